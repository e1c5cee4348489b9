//! Testing a channel's payload filter against a sample message, without sending anything.

use super::check_payload;
use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::{Json, Path};
use crate::responses::{ById, JsonBody, TenantAuth};
use breakwater_core::{channels, deliveries, filters};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

/// Body of `POST /api/v1/channels/{id}/filter/test`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilterTest {
    /// A sample payload: any JSON value, at most `api.max_payload_bytes` as sent (the filter
    /// reads it as `payload`).
    #[schema(value_type = serde_json::Value, example = json!({"status": "paid", "amount": 120}))]
    payload: Box<RawValue>,
    /// A sample event type (the filter reads it as `event_type`; absent = `null`), checked as a
    /// message's.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[!-~]+$",
        example = "invoice.paid"
    )]
    event_type: Option<String>,
}

/// Response of `POST /api/v1/channels/{id}/filter/test`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct FilterTestResult {
    /// Whether a message with this payload and event type would be delivered to the channel by
    /// `POST /api/v1/messages` (as far as the filter decides; the channel's `event_types` are not
    /// consulted). True when the channel has no filter.
    matches: bool,
    /// Whether the channel has a filter.
    has_filter: bool,
    /// Why the evaluation failed, when it did (e.g. arithmetic on a string): such a message does
    /// not match.
    error: Option<String>,
}

/// Tests the channel's payload filter against a sample message.
///
/// `POST /api/v1/channels/{id}/filter/test` with `{payload, event_type?}`: evaluates the
/// channel's `filter` (a JSON Logic rule) on `{"event_type": …, "payload": …}` exactly as a
/// fan-out does, and answers `{matches, has_filter, error}`. Nothing is stored, sent or audited.
/// 404 for another tenant's channel; 422 for a bad `event_type`, 413 for a payload over
/// `api.max_payload_bytes`.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/filter/test",
    tag = "channels",
    operation_id = "test_channel_filter",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body = FilterTest,
    responses(
        (status = 200, description = "Whether the sample matches the channel's filter.",
            body = FilterTestResult),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn test_filter(
    call: TenantCall,
    Path(id): Path<Uuid>,
    Json(body): Json<FilterTest>,
) -> Result<axum::Json<FilterTestResult>, ApiError> {
    // 404 before validating, so another tenant's id reveals nothing.
    let channel = channels::get(call.state.pool(), call.tenant_id(), id).await?;
    check_payload(&call.state.settings().config, &body.payload, "payload")?;
    if let Some(t) = &body.event_type {
        deliveries::check_event_type(t)?;
    }
    let Some(rule) = &channel.filter else {
        return Ok(axum::Json(FilterTestResult {
            matches: true,
            has_filter: false,
            error: None,
        }));
    };
    let outcome = filters::test(rule, body.event_type.as_deref(), body.payload.get());
    Ok(axum::Json(FilterTestResult {
        matches: outcome.matches(),
        has_filter: true,
        error: match outcome {
            filters::Outcome::Failed(why) => Some(why),
            filters::Outcome::Matched(_) => None,
        },
    }))
}
