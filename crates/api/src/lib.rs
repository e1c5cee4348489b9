//! Breakwater's REST API (axum).
//!
//! [`app`] builds the whole router from an [`AppState`]; tests can call it without a socket.
//! JSON in and out; every error is `application/problem+json` (RFC 9457) with a stable `code`
//! and a human `detail` ([`error::ApiError`]). A tenant only ever sees its own objects: another
//! tenant's id answers 404, exactly like a missing one.

mod auth;
mod call;
pub mod cell;
mod connection;
mod created;
pub mod error;
mod extract;
pub use routes::openapi;
pub mod page;
mod responses;
mod routes;
pub use routes::portal::check_frame_ancestors;

use axum::Router;
use breakwater_core::circuit::CircuitConfig;
use serde::Deserialize;
use sqlx::PgPool;
use std::sync::Arc;

pub use auth::OperatorKey;
pub use routes::health::{READY_CHECK_TIMEOUT, READY_MAX_AGE};
pub use routes::metrics::{refresh_cluster_gauges, Metrics, GAUGES_MAX_AGE};

/// API settings (`[api]` in `config/default.toml`; environment `BREAKWATER_API__<FIELD>`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Largest accepted delivery payload (the serialized `payload` value), bytes. Larger → 413.
    pub max_payload_bytes: usize,
    /// Most deliveries in one batch request.
    pub max_batch_size: usize,
    /// Largest accepted batch request body, bytes. Larger → 413.
    pub max_batch_body_bytes: usize,
    /// Requests per second each tenant may make, with all its API keys on all nodes together
    /// (GCRA with its state in Postgres, [`breakwater_core::quotas::take_ingress`]; it was per key
    /// and per node, so a tenant multiplied it by minting keys); over it → 429 with
    /// `Retry-After`. 0 turns the limit off. A request counts once whatever it carries: a batch
    /// of 1000 deliveries or a message fanned out to 1000 channels is one request (the delivery
    /// quotas count those). Default 1000 (was 100, which capped a sender of single messages at
    /// about 100/s while the service delivers several hundred per second; peers set no such low
    /// cap).
    pub ingress_per_second: u32,
    /// Requests a tenant may make at once above that rate (default 2000).
    pub ingress_burst: u32,
    /// Default `channels` quota: live channels per tenant (default 1000, the most one message may
    /// name). The operator overrides it per tenant ([`breakwater_core::quotas`]).
    pub quota_channels: i64,
    /// Default `active_keys` quota: unrevoked API keys per tenant (default 100, the fixed cap
    /// before quotas).
    pub quota_active_keys: i64,
    /// Default `deliveries_per_second` quota: deliveries each tenant may have accepted per second,
    /// counting every delivery a batch or a message fan-out creates (a second's worth may come
    /// at once); 0 = no limit. Default 5000.
    pub quota_deliveries_per_second: i64,
    /// Default `deliveries_per_day` quota: deliveries each tenant may have accepted per UTC day;
    /// 0 = no limit. Default 5 000 000.
    pub quota_deliveries_per_day: i64,
    /// How long a client may take to send a request's headers, ms (HTTP/1.1; from the
    /// connection's start or the end of its previous request); then the connection is closed.
    /// Default 10 000. Bounds a client that opens connections and never finishes a request
    /// (slow loris), which otherwise kept each connection open for good.
    pub header_read_timeout_ms: u64,
    /// How long a request's body may take to arrive in full once the handler reads it, ms; then
    /// 408 `request_timeout` and the connection is closed. Default 30 000 (a 16 MiB batch at
    /// about 0.5 MB/s).
    pub body_read_timeout_ms: u64,
    /// The origins that may embed the tenant portal (`/portal`) in a frame: the source list of
    /// its `Content-Security-Policy: frame-ancestors` (CSP Level 3), e.g. `'self'
    /// https://dashboard.example.com`. Default `'self'`; `'none'` forbids framing. Checked at
    /// start-up (no `;` or `,`, [`routes::portal::check_frame_ancestors`]).
    pub portal_frame_ancestors: String,
    /// This service's public base URL, e.g. `https://hooks.example.com`: the prefix of a portal
    /// session's `url` (`<public_url>/portal#token=…`). Empty (the default): the `url` is the
    /// path alone (`/portal#token=…`), for the caller to put behind its own base.
    pub public_url: String,
}

impl ApiConfig {
    /// The default quotas (`quota_*`), for tenants without an override.
    pub fn quota_defaults(&self) -> breakwater_core::quotas::QuotaDefaults {
        breakwater_core::quotas::QuotaDefaults {
            channels: self.quota_channels,
            active_keys: self.quota_active_keys,
            deliveries_per_second: self.quota_deliveries_per_second,
            deliveries_per_day: self.quota_deliveries_per_day,
        }
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            max_batch_size: 1_000,
            max_batch_body_bytes: 16 * 1024 * 1024,
            ingress_per_second: 1_000,
            ingress_burst: 2_000,
            quota_channels: breakwater_core::quotas::QuotaDefaults::default().channels,
            quota_active_keys: breakwater_core::quotas::QuotaDefaults::default().active_keys,
            quota_deliveries_per_second: breakwater_core::quotas::QuotaDefaults::default()
                .deliveries_per_second,
            quota_deliveries_per_day: breakwater_core::quotas::QuotaDefaults::default()
                .deliveries_per_day,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            portal_frame_ancestors: "'self'".into(),
            public_url: String::new(),
        }
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

/// What [`AppState::new`] takes from the node's configuration, besides the pool.
pub struct AppSettings {
    /// The key of the operator routes.
    pub operator_key: OperatorKey,
    /// API settings (`[api]`).
    pub config: ApiConfig,
    /// Whether channel and alert URLs may point at internal addresses.
    pub allow_private_targets: bool,
    /// The attempts each delivery gets (set on enqueue and on replay).
    pub max_attempts: i32,
    /// The circuit defaults (shown where a channel has no override).
    pub circuit: CircuitConfig,
    /// The bounds of each channel's adaptive concurrency limit (to show a channel's limit in
    /// force).
    pub channel_limits: breakwater_queue::GroupLimits,
    /// Host circuit settings (granularity of channel keys, defaults shown in the host list).
    pub hosts: breakwater_core::hosts::HostsConfig,
    /// The service configuration's retry policy (`worker.max_attempts`, `worker.backoff_*`,
    /// `worker.request_timeout_ms`): what a channel's policy in force falls back to.
    pub retry: breakwater_core::retry_policy::ServiceRetry,
    /// `worker.connect_timeout_ms` (for the breaker's explanation).
    pub connect_timeout_ms: u64,
    /// `retention.deliveries_days` (for the breaker's explanation; 0 = kept for ever).
    pub retention_days: u32,
    /// This node's cell (`cell`, docs/cells.md), or `None` in a deployment without cells: the cell
    /// every key and portal token it mints names, and the one a request's [`cell::HEADER`] must
    /// name if it names one ([`cell::misdirected`]).
    pub cell: Option<breakwater_core::api_key::Cell>,
}

struct Inner {
    pool: PgPool,
    settings: AppSettings,
    /// `/metrics` on the API's address, unless it is served elsewhere ([`AppState::with_metrics`]).
    metrics: Option<Metrics>,
    /// The last readiness check: when, and whether the database answered (`routes::health`).
    ready: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    /// The event types' compiled schemas, for the enqueue-time check
    /// ([`breakwater_core::event_types::check_event`]).
    event_types: breakwater_core::event_types::Cache,
}

impl AppState {
    /// State for [`app`]: the database pool and the [`AppSettings`].
    pub fn new(pool: PgPool, settings: AppSettings) -> Self {
        Self {
            inner: Arc::new(Inner {
                pool,
                settings,
                metrics: None,
                ready: tokio::sync::Mutex::new(None),
                event_types: breakwater_core::event_types::Cache::new(),
            }),
        }
    }

    /// Serves `metrics` on the API's address too (without it, the API has no `/metrics` and the
    /// node serves it on its own address, `BREAKWATER_METRICS_LISTEN`). Call before [`app`].
    pub fn with_metrics(mut self, metrics: Option<Metrics>) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("with_metrics is called before the state is shared")
            .metrics = metrics;
        self
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The settings the state was made with ([`AppState::new`]).
    pub(crate) fn settings(&self) -> &AppSettings {
        &self.inner.settings
    }

    /// This node's cache of compiled event-type schemas.
    pub(crate) fn event_types(&self) -> &breakwater_core::event_types::Cache {
        &self.inner.event_types
    }

    /// The default quotas (`api.quota_*`).
    pub(crate) fn quota_defaults(&self) -> breakwater_core::quotas::QuotaDefaults {
        self.inner.settings.config.quota_defaults()
    }
}

/// The whole API.
pub fn app(state: AppState) -> Router {
    let metrics = match &state.inner.metrics {
        Some(m) => m.router(),
        None => Router::new(),
    };
    Router::new()
        .merge(routes::health::router())
        .merge(routes::openapi::router())
        .merge(routes::tenants::router())
        .merge(routes::channels::router(&state.settings().config))
        .merge(routes::deliveries::router())
        .merge(routes::messages::router(&state.settings().config))
        .merge(routes::secrets::router())
        .merge(routes::lifecycle::router())
        .merge(routes::keys::router())
        .merge(routes::event_types::router())
        .merge(routes::audit::router())
        .merge(routes::operator::router())
        .merge(routes::hosts::router())
        .merge(routes::queues::router())
        .merge(metrics)
        .merge(routes::admin::router())
        .merge(routes::assets::router())
        .merge(routes::portal_sessions::router())
        .merge(routes::portal::router())
        .fallback(|| async { error::ApiError::not_found("route") })
        .method_not_allowed_fallback(|| async {
            error::ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not accept that method",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            cell::misdirected,
        ))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        // Outermost: every request gets an `x-request-id` (the client's, or a fresh UUID), sent
        // back on the response and written on the request's audit rows.
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            tower_http::request_id::MakeRequestUuid,
        ))
        // Before that: a client's `x-request-id` that is not well formed (1–128 visible ASCII
        // characters) is dropped, so the request gets a fresh UUID and the response and the
        // audit rows carry the same id.
        .layer(axum::middleware::map_request(
            extract::drop_malformed_request_id,
        ))
        // Outermost of all: a request answered before its body was read leaves its keep-alive
        // connection usable, or its answer says `Connection: close` (connection.rs).
        .layer(axum::middleware::from_fn(connection::keep_alive))
        .with_state(state)
}
