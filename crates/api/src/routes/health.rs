//! `GET /healthz` (the process is up) and `GET /readyz` (it can reach the database).

use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    sqlx::query("SELECT 1")
        .execute(state.pool())
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "readiness: database unreachable");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "database unreachable",
            )
        })?;
    Ok(Json(json!({ "status": "ready" })))
}
