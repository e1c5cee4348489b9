//! `GET /api/v1/admin/queues` (operator): every queue's depth, scheduled and in-flight jobs,
//! parked jobs and the age of its oldest due job, across the cluster.

use crate::call::OperatorCall;
use crate::error::ApiError;
use crate::responses::OperatorAuth;
use crate::AppState;
use axum::routing::get;
use axum::Router;
use breakwater_queue::stats::QueueStats;
use serde::Serialize;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/admin/queues", get(list))
}

/// `{"data": [{"queue", "available", "scheduled", "executing", "parked",
/// "oldest_available_ms"}, …]}`: the tier queues (highest first), `circuit`, `alerts`, then any
/// other queue with live jobs. `available` is the depth (due, waiting for a worker),
/// `executing` the jobs in flight on all nodes.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Queues {
    /// One entry per queue.
    data: Vec<QueueStats>,
}

/// Every queue's live jobs across the cluster.
#[utoipa::path(
    get,
    path = "/api/v1/admin/queues",
    tag = "operator",
    operation_id = "list_queues",
    responses(
        (status = 200, description = "Every queue's counts.", body = Queues),
        OperatorAuth,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn list(call: OperatorCall) -> Result<axum::Json<Queues>, ApiError> {
    let data = breakwater_core::overview::queues(call.state.pool()).await?;
    Ok(axum::Json(Queues { data }))
}
