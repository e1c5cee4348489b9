//! `GET /metrics`: every Breakwater metric as Prometheus text (see `breakwater-telemetry`).
//!
//! Where it is served and who may read it is the operator's choice ([`Metrics`]):
//! - on the API's own address (the default), or only on a separate address
//!   (`BREAKWATER_METRICS_LISTEN`, the usual production setup: a port that only the Prometheus
//!   network reaches), which also works on a node that runs only workers;
//! - open, or behind a bearer token (`BREAKWATER_METRICS_TOKEN`): `Authorization: Bearer <token>`,
//!   compared in constant time; anything else is 401 with a problem body.
//!
//! It carries counts by tier, queue, state and outcome only, never a tenant, channel or delivery
//! id. The cluster-wide gauges (channels per circuit state, parked deliveries, queue depth and
//! age) are read from Postgres at most once per [`GAUGES_MAX_AGE`] whatever the scrape rate (one
//! reader at a time; concurrent scrapes wait for it and serve its values), so scraping in a loop
//! costs the database nothing more.

use crate::error::ApiError;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The oldest the cluster-wide gauges may be when served.
pub const GAUGES_MAX_AGE: Duration = Duration::from_secs(5);

/// The `/metrics` endpoint: the pool its gauges are read from, the optional bearer token, and
/// when the gauges were last read. Cheap to clone; every router made from one shares the cache.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    token: Option<String>,
    gauges_read_at: tokio::sync::Mutex<Option<Instant>>,
}

impl Metrics {
    /// `/metrics` reading its gauges from `pool`; with `token`, only requests that present it as
    /// a bearer token are answered.
    pub fn new(pool: PgPool, token: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                pool,
                token: token.filter(|t| !t.is_empty()),
                gauges_read_at: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// A router with only `GET /metrics` (and problem+json 404s), to serve on its own address;
    /// like the API, a request answered before its body was read keeps its keep-alive
    /// connection (`connection.rs`).
    pub fn app(&self) -> Router {
        self.router()
            .fallback(|| async { ApiError::not_found("route") })
            .layer(axum::middleware::from_fn(crate::connection::keep_alive))
    }

    /// The `/metrics` route, for any router state.
    pub(crate) fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        Router::new()
            .route("/metrics", get(metrics))
            .with_state(self.clone())
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.inner.token else {
            return true;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
    }
}

/// Every Breakwater metric, as Prometheus text.
///
/// Open unless `BREAKWATER_METRICS_TOKEN` is set; then `Authorization: Bearer <token>`. Served
/// here unless `BREAKWATER_METRICS_LISTEN` gives it an address of its own.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "observability",
    operation_id = "metrics",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4.", body = String,
            content_type = "text/plain"),
        (status = 401, description = "A metrics token is configured and was not presented \
            (`unauthorized`).", body = crate::error::Problem,
            content_type = "application/problem+json"),
    ),
    security((), ("metrics_token" = [])),
)]
pub(crate) async fn metrics(State(m): State<Metrics>, headers: HeaderMap) -> Response {
    if !m.authorized(&headers) {
        let mut e = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "/metrics needs the metrics bearer token",
        );
        e.headers
            .push((header::WWW_AUTHENTICATE, "Bearer".to_string()));
        return e.into_response();
    }
    {
        let mut read_at = m.inner.gauges_read_at.lock().await;
        if read_at.is_none_or(|t| t.elapsed() >= GAUGES_MAX_AGE) {
            // A failed read leaves the previous gauge values in place; the counters are still
            // served, and the next scrape past the age tries again.
            match refresh_cluster_gauges(&m.inner.pool).await {
                Ok(()) => *read_at = Some(Instant::now()),
                Err(e) => tracing::warn!(error = %e,
                    "metrics: reading the cluster gauges from the database failed"),
            }
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            breakwater_telemetry::PROMETHEUS_CONTENT_TYPE,
        )],
        breakwater_telemetry::render(),
    )
        .into_response()
}

/// Reads the cluster-wide gauges from the database ([`breakwater_core::overview::gauges`]) and
/// hands them to the metrics ([`breakwater_telemetry::set_snapshot`]).
pub async fn refresh_cluster_gauges(pool: &sqlx::PgPool) -> breakwater_core::Result<()> {
    let g = breakwater_core::overview::gauges(pool).await?;
    breakwater_telemetry::set_snapshot(breakwater_telemetry::Snapshot {
        channels_by_state: g.channels_by_state,
        parked_by_tier: g.parked_by_tier,
        queues: g
            .queues
            .into_iter()
            .map(|q| breakwater_telemetry::QueueGauge {
                queue: q.queue,
                available: q.available,
                scheduled: q.scheduled,
                executing: q.executing,
                oldest_available_age_s: q.oldest_available_ms as f64 / 1000.0,
            })
            .collect(),
    });
    Ok(())
}
