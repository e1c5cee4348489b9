//! `GET /metrics`: every Breakwater metric as Prometheus text (see `breakwater-telemetry`).
//!
//! Unauthenticated, like `/healthz`, so a Prometheus server can scrape it without a key: it
//! carries counts by tier, queue, state and outcome only, never a tenant, channel or delivery id.
//! The cluster-wide gauges (channels per circuit state, parked deliveries, queue depth and age)
//! are read from Postgres at most once per [`GAUGES_MAX_AGE`] whatever the scrape rate (one
//! reader at a time; concurrent scrapes wait for it and serve its values), so scraping in a loop
//! costs the database nothing more.

use crate::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// The oldest the cluster-wide gauges may be when served.
pub const GAUGES_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(5);

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    {
        let mut read_at = state.inner.gauges_read_at.lock().await;
        if read_at.is_none_or(|t| t.elapsed() >= GAUGES_MAX_AGE) {
            // A failed read leaves the previous gauge values in place; the counters are still
            // served, and the next scrape past the age tries again.
            match breakwater_core::overview::refresh_metrics(state.pool()).await {
                Ok(()) => *read_at = Some(std::time::Instant::now()),
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
}
