//! `GET /healthz` (the process is up) and `GET /readyz` (it can reach the database).
//!
//! Both are unauthenticated, so each costs O(1) whatever the request rate: `/readyz` runs
//! `SELECT 1` at most once per [`READY_MAX_AGE`] (one check at a time, bounded by
//! [`READY_CHECK_TIMEOUT`]) and answers every other request from that result.

use crate::error::ApiError;
use crate::responses::Unavailable;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::time::{Duration, Instant};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

/// The body of `/healthz` and `/readyz`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    #[schema(example = "ok")]
    status: &'static str,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    operation_id = "healthz",
    responses((status = 200, description = "`{\"status\": \"ok\"}`.", body = Health)),
)]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// How long one readiness result is served.
pub const READY_MAX_AGE: Duration = Duration::from_secs(1);
/// The longest one readiness check may take before it counts as a failure.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Readiness: the database answered (checked at most once a second).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    operation_id = "readyz",
    responses(
        (status = 200, description = "`{\"status\": \"ready\"}`.", body = Health),
        Unavailable,
    ),
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
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
    Ok(Json(Health { status: "ready" }))
}
