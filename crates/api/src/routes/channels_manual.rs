//! A channel's manual circuit actions and the replay of a window of its dead deliveries.

use super::{view, ChannelView};
use crate::call::{Call, TenantCall};
use crate::error::ApiError;
use crate::extract::{OptionalJson, Path, Query};
use crate::responses::{ById, Conflict, JsonBody, TenantAuth, WithQuery};
use breakwater_core::channels::{self, Channel};
use breakwater_core::deliveries;
use breakwater_core::{audit, circuit, names};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `?reason=` on manual circuit actions (optional; goes to the audit log and the alert).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReasonQuery {
    /// Why, for the audit log and the alert: 1 to 500 characters (trimmed) without control,
    /// bidirectional formatting or invisible characters; absent or blank: `"<action> by
    /// <actor>"`.
    #[param(max_length = 500)]
    pub(crate) reason: Option<String>,
}

impl ReasonQuery {
    /// The reason a manual action is audited and alerted with: the caller's
    /// ([`breakwater_core::names::display_text`]: trimmed, 1 to 500 characters without control,
    /// bidirectional formatting or invisible characters, else 422 on `reason`), or, when absent
    /// or blank, `"{action} by {actor}"` (e.g. `channel.paused by operator`).
    pub(crate) fn or_default(self, action: &str, actor: &str) -> Result<String, ApiError> {
        match self.reason.as_deref().map(str::trim) {
            None | Some("") => Ok(format!("{action} by {actor}")),
            Some(given) => Ok(names::display_text(
                "reason",
                given,
                names::MAX_REASON_CHARS,
            )?),
        }
    }
}

/// Counts a manual transition (of a channel or a host circuit) in
/// `breakwater.circuit.transitions`; call it only once its transaction has committed.
pub(crate) fn count_committed(moved: Option<audit::Transitioned>) {
    if let Some(t) = moved {
        breakwater_telemetry::circuit_transition(t.from, t.to);
    }
}

/// Applies a manual change to the channel as the caller and answers with its view. Idempotent:
/// a change that is already in effect changes nothing and audits nothing.
pub(crate) async fn manual<K>(
    call: &Call<K>,
    channel: Channel,
    (change, by): (circuit::Manual, circuit::ManualBy),
    reason: ReasonQuery,
) -> Result<ChannelView, ApiError> {
    let reason = reason.or_default(change.action(), call.actor())?;
    let mut tx = call.begin_audited().await?;
    let moved = circuit::apply_manual(
        &mut tx,
        channel.id,
        change,
        by,
        call.actor(),
        &reason,
        &call.state.settings().circuit,
    )
    .await?;
    tx.commit().await?;
    count_committed(moved.map(|t| t.counted()));
    let channel = channels::get_any(call.state.pool(), channel.id).await?;
    let channel = match by {
        circuit::ManualBy::Operator => channel.for_operator(),
        circuit::ManualBy::Tenant => channel,
    };
    view(&call.state, channel).await
}

/// A tenant's manual change to its channel `id` (404 for another tenant's), audited as the
/// calling key: the handler body of pause and resume.
async fn tenant_manual(
    call: &TenantCall,
    id: Uuid,
    change: circuit::Manual,
    reason: ReasonQuery,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(call.state.pool(), call.tenant_id(), id).await?;
    let by = circuit::ManualBy::Tenant;
    Ok(axum::Json(
        manual(call, channel, (change, by), reason).await?,
    ))
}

/// Pauses the channel: parks the backlog and pauses the circuit.
///
/// Never probed while paused; new deliveries are accepted and parked. Idempotent. 200 with the
/// channel; 409 while an operator holds the channel's circuit (`operator_hold`: an operator
/// paused it or forced it open).
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/pause",
    tag = "channels",
    operation_id = "pause_channel",
    params(("id" = Uuid, Path, description = "Channel id."), ReasonQuery),
    responses(
        (status = 200, description = "The channel, paused.", body = ChannelView),
        Conflict,
        ById<WithQuery<TenantAuth>>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn pause(
    call: TenantCall,
    Path(id): Path<Uuid>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    tenant_manual(&call, id, circuit::Manual::Pause, q).await
}

/// Resumes a paused channel: closes its circuit and releases every parked delivery; or, when
/// the pause began while the circuit was open or half-open, returns it to `open` with its probe
/// due at once (a pause and a resume never close a breaker without a probe).
///
/// One UPDATE releases the whole backlog. Idempotent (a repeated resume of a closed channel
/// changes nothing). 200 with the channel; 409 while an operator holds the channel's circuit
/// (`operator_hold`), and for a channel that is not paused but open or half-open (the circuit
/// breaker's: a probe closes it), which includes a repeated resume of one that went back to
/// open.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/resume",
    tag = "channels",
    operation_id = "resume_channel",
    params(("id" = Uuid, Path, description = "Channel id."), ReasonQuery),
    responses(
        (status = 200, description = "The channel, resumed.", body = ChannelView),
        Conflict,
        ById<WithQuery<TenantAuth>>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn resume(
    call: TenantCall,
    Path(id): Path<Uuid>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    tenant_manual(&call, id, circuit::Manual::Resume, q).await
}

/// Body of `POST /api/v1/channels/{id}/replay`: the window in which deliveries went dead
/// (RFC 3339; default: the last 24 h up to now).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayWindow {
    /// Start (default: 24 h before `to`); years 1 to 9999.
    from: Option<chrono::DateTime<chrono::Utc>>,
    /// End (default: now); not before `from`; years 1 to 9999.
    to: Option<chrono::DateTime<chrono::Utc>>,
}

/// The deliveries a replay re-enqueued.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Replayed {
    /// How many.
    replayed: usize,
    /// Their ids.
    ids: Vec<Uuid>,
}

/// Refuses a replay window bound outside years 1 to 9999 (422 naming `field`): chrono reads
/// years up to ±262 143, where the default window's arithmetic overflows and Postgres (from
/// 4713 BC) cannot compare, and no delivery is that old or new.
fn check_replay_bound(
    field: &'static str,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), ApiError> {
    use chrono::Datelike;
    if !(1..=9999).contains(&at.year()) {
        return Err(ApiError::invalid(
            field,
            "must be a time between the years 1 and 9999",
        ));
    }
    Ok(())
}

/// Replays the channel's dead deliveries from a window.
///
/// Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
/// the count and ids. No body (or `{}`) replays the last 24 h.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/replay",
    tag = "channels",
    operation_id = "replay_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body(content = Option<ReplayWindow>, description = "Optional: no body (or `{}`) is the last 24 h."),
    responses(
        (status = 200, description = "The replayed deliveries.", body = Replayed),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn replay_window(
    call: TenantCall,
    Path(id): Path<Uuid>,
    OptionalJson(body): OptionalJson<ReplayWindow>,
) -> Result<axum::Json<Replayed>, ApiError> {
    let channel = channels::get(call.state.pool(), call.tenant_id(), id).await?;
    let mut tx = call.begin_audited().await?;
    // The default window ends at the database's now() (this transaction's), not the node's.
    let to = match body.to {
        Some(to) => to,
        None => breakwater_core::clock::db_now(&mut *tx).await?,
    };
    check_replay_bound("to", to)?;
    let from = match body.from {
        Some(from) => from,
        None => to - chrono::Duration::hours(24),
    };
    check_replay_bound("from", from)?;
    if from > to {
        return Err(ApiError::invalid("from", "must not be after `to`"));
    }
    // Parked or not as an enqueue to the channel (none if it was deleted meanwhile).
    let ids = match circuit::enqueue_parked(&mut tx, channel.id).await? {
        Some(parked) => {
            let window = deliveries::ReplaySelector::ChannelWindow {
                tenant_id: call.tenant_id(),
                channel_id: channel.id,
                from,
                to,
            };
            let max_attempts = call.state.settings().max_attempts;
            deliveries::replay(&mut tx, window, parked, max_attempts).await?
        }
        None => Vec::new(),
    };
    audit::record(
        &mut *tx,
        &audit::Entry {
            reason: Some("channel replay"),
            details: serde_json::json!({ "replayed": ids.len(), "from": from, "to": to }),
            ..audit::Entry::channel(
                call.tenant_id(),
                channel.id,
                call.actor(),
                "deliveries.replayed",
            )
        },
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(Replayed {
        replayed: ids.len(),
        ids,
    }))
}
