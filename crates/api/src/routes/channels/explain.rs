//! `GET /api/v1/channels/{id}/circuit/explain`: what the channel's breaker and retry policy do to
//! a dead endpoint, predicted from its settings alone ([`circuit::explain`]).

use super::policy_in_force;
use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::Path;
use crate::responses::{ById, TenantAuth};
use breakwater_core::channels;
use breakwater_core::circuit::{self, ExplainInput, Explanation};
use breakwater_core::ratelimit::RateLimit;
use uuid::Uuid;

/// Explains the channel's breaker from its settings in force (its overrides, its retry policy
/// in force, the cluster defaults and the service configuration): how many requests a dead
/// endpoint gets before the circuit opens (refused, timing out, 5xx), when the open circuit
/// probes it, the longest a delivery waits before it is dead, and warnings for settings that
/// fight each other (a timeout longer than the cooldown, a schedule that outlives the
/// retention, a rate limit too slow for the circuit's window, …). Nothing is sent or changed.
#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/circuit/explain",
    tag = "channels",
    operation_id = "explain_channel_circuit",
    params(("id" = Uuid, Path, description = "Channel id.")),
    responses(
        (status = 200, description = "The prediction, with the settings it comes from.",
            body = Explanation),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn explain_circuit(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Explanation>, ApiError> {
    let state = &call.state;
    let channel = channels::get(state.pool(), call.tenant_id(), id).await?;
    let settings = state.settings();
    let (threshold, cooldown, _, _) =
        circuit::effective_defaults(state.pool(), &settings.circuit).await?;
    let (close_after, _) =
        circuit::effective_close_after_successes(state.pool(), &settings.circuit).await?;
    let policy = policy_in_force(state, &channel).await?;
    let limits = &settings.channel_limits;
    let (_, ceiling) = limits.bounds(
        channel.max_in_flight,
        channel.ordering == channels::DeliveryOrdering::Fifo,
    );
    let rate_limit = channel
        .rate_limit
        .as_deref()
        .map(RateLimit::parse)
        .transpose()?;
    let input = ExplainInput {
        circuit: settings.circuit.clone(),
        failure_threshold: channel.failure_threshold.unwrap_or(threshold),
        cooldown_ms: channel.cooldown_ms.unwrap_or(cooldown),
        close_after_successes: channel.close_after_successes.unwrap_or(close_after),
        concurrency: breakwater_queue::GroupLimits {
            ceiling,
            ..limits.clone()
        },
        rate_limit,
        policy,
        connect_timeout_ms: settings.connect_timeout_ms as i64,
        retention_days: settings.retention_days,
    };
    Ok(axum::Json(circuit::explain(&input)))
}
