//! Tenant routes for deliveries: `GET /api/v1/deliveries/{id}` with its attempts.

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::Path;
use crate::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use breakwater_core::deliveries::{self, Attempt, Delivery};
use serde::Serialize;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/deliveries/{id}", get(read))
}

#[derive(Serialize)]
struct DeliveryView {
    #[serde(flatten)]
    delivery: Delivery,
    attempt_log: Vec<Attempt>,
}

async fn read(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DeliveryView>, ApiError> {
    let delivery = deliveries::get(state.pool(), key.tenant_id, id).await?;
    let attempt_log = deliveries::attempts(state.pool(), id).await?;
    Ok(axum::Json(DeliveryView {
        delivery,
        attempt_log,
    }))
}
