//! `GET /healthz` (the process is up) and `GET /readyz` (it can reach the database).
//!
//! Both are unauthenticated, so each costs O(1) whatever the request rate: `/readyz` runs
//! `SELECT 1` at most once per [`READY_MAX_AGE`] (one check at a time, bounded by
//! [`READY_CHECK_TIMEOUT`]) and answers every other request from that result.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// How long one readiness result is served.
pub const READY_MAX_AGE: Duration = Duration::from_secs(1);
/// The longest one readiness check may take before it counts as a failure.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let ready = {
        let mut last = state.inner.ready.lock().await;
        match *last {
            Some((at, ok)) if at.elapsed() < READY_MAX_AGE => ok,
            _ => {
                let check = sqlx::query("SELECT 1").execute(state.pool());
                let ok = match tokio::time::timeout(READY_CHECK_TIMEOUT, check).await {
                    Ok(Ok(_)) => true,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "readiness: database unreachable");
                        false
                    }
                    Err(_) => {
                        tracing::warn!("readiness: the database did not answer in time");
                        false
                    }
                };
                *last = Some((Instant::now(), ok));
                ok
            }
        }
    };
    if !ready {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "database unreachable",
        ));
    }
    Ok(Json(json!({ "status": "ready" })))
}
