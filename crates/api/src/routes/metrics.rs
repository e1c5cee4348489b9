//! `GET /metrics`: every Breakwater metric as Prometheus text (see `breakwater-telemetry`).
//!
//! Unauthenticated, like `/healthz`, so a Prometheus server can scrape it without a key: it
//! carries counts by tier, queue, state and outcome only, never a tenant, channel or delivery id.
//! The cluster-wide gauges (channels per circuit state, parked deliveries, queue depth and age)
//! are read from Postgres on each scrape, so any node gives the same, current answer.

use crate::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    // A failed read leaves the previous gauge values in place; the counters are still served.
    if let Err(e) = breakwater_core::overview::refresh_metrics(state.pool()).await {
        tracing::warn!(error = %e, "metrics: reading the cluster gauges from the database failed");
    }
    (
        [(
            header::CONTENT_TYPE,
            breakwater_telemetry::PROMETHEUS_CONTENT_TYPE,
        )],
        breakwater_telemetry::render(),
    )
}
