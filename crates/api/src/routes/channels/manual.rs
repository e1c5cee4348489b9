//! A channel's manual circuit actions, the replay of a window of its dead deliveries, and the
//! recover of its final deliveries since a time.

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

impl crate::extract::QueryParams for ReasonQuery {
    const PAGED: bool = false;
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

/// Most entries in a recover's `status` list.
const MAX_RECOVER_STATUSES: usize = 3;

/// Body of `POST /api/v1/channels/{id}/recover`: which of the channel's final deliveries to
/// resend.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecoverBody {
    /// Resend deliveries accepted at or after this instant (RFC 3339, years 1 to 9999).
    since: chrono::DateTime<chrono::Utc>,
    /// …and before this one (exclusive; default: no bound); not before `since`.
    until: Option<chrono::DateTime<chrono::Utc>>,
    /// Which final statuses to resend: 1 to 3 of `delivered`, `dead`, `cancelled` (default
    /// `["dead"]`: what the endpoint missed).
    #[schema(max_items = 3, min_items = 1, value_type = Option<Vec<breakwater_core::deliveries::Status>>)]
    status: Option<Vec<String>>,
    /// Only these event types (exact match; 1 to 100 of them; default: any).
    #[schema(max_items = 100, min_items = 1)]
    event_types: Option<Vec<String>>,
    /// Count what would go and show the first 10 ids, sending nothing (default `false`).
    #[serde(default)]
    dry_run: bool,
    /// Most deliveries this call resends: 1 to 1000 (default 1000).
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Continue a recover: the previous call's `next_cursor`.
    after: Option<String>,
}

/// What a recover did, or (dry run) would do.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RecoverResult {
    /// Whether this was a dry run (nothing sent).
    dry_run: bool,
    /// Dry run: how many deliveries the whole window selects now (every call's worth); else
    /// how many this call resent.
    count: i64,
    /// Dry run: the first (up to 10) that would go, oldest first; else every one resent.
    ids: Vec<Uuid>,
    /// Whether they were (or would be) resent parked (`paused`): the channel's circuit is open
    /// or paused, so they go when it resumes or closes.
    parked: bool,
    /// More may match after this call's bound: pass it as `after` with the same body to
    /// continue; `null` when the window is done (always `null` on a dry run).
    next_cursor: Option<String>,
}

/// Checks a recover's `status` list: 1 to 3 final statuses (default `dead`).
fn recover_statuses(raw: Option<&[String]>) -> Result<Vec<deliveries::Status>, ApiError> {
    use deliveries::Status;
    let Some(raw) = raw else {
        return Ok(vec![Status::Dead]);
    };
    if raw.is_empty() || raw.len() > MAX_RECOVER_STATUSES {
        return Err(ApiError::invalid(
            "status",
            "must list 1 to 3 of delivered, dead, cancelled (omit it for dead)",
        ));
    }
    let mut out = Vec::new();
    for s in raw {
        let status = crate::routes::list_filter::<Status>("status", Some(s))?.expect("given");
        if !status.is_final() {
            return Err(ApiError::invalid(
                "status",
                format!(
                    "{status} is not final; only delivered, dead and cancelled deliveries can be \
                     resent (the others are still on their way)"
                ),
            ));
        }
        if !out.contains(&status) {
            out.push(status);
        }
    }
    Ok(out)
}

/// Resends the channel's final deliveries since a time.
///
/// Resends (as `POST /api/v1/deliveries/{id}/resend` does one: same id and `webhook-id`, a new
/// attempt series) the channel's deliveries accepted in `[since, until)` whose status is in
/// `status` (default `dead`) and event type in `event_types` (default any), whose payload was not
/// purged, oldest first, at most `limit` (1 000) per call: `next_cursor` continues after the
/// last one looked at. Idempotent while they are on their way: only final deliveries are picked,
/// so a second call does not send again what the first resent until that has finished. To an
/// open or paused channel they come back parked (`parked: true`). With `dry_run`: the count and
/// the first 10 ids, nothing sent, nothing audited. Each real call is audited once
/// (`deliveries.recovered`). 422 for a bad body (`since` after `until`, a status that is unknown
/// or not final, an empty or too long list, a bad `after`).
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/recover",
    tag = "channels",
    operation_id = "recover_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body(content = RecoverBody),
    responses(
        (status = 200, description = "What was resent, or (dry run) would be.",
            body = RecoverResult),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn recover(
    call: TenantCall,
    Path(id): Path<Uuid>,
    crate::extract::Json(body): crate::extract::Json<RecoverBody>,
) -> Result<axum::Json<RecoverResult>, ApiError> {
    let channel = channels::get(call.state.pool(), call.tenant_id(), id).await?;
    check_replay_bound("since", body.since)?;
    if let Some(until) = body.until {
        check_replay_bound("until", until)?;
        if body.since > until {
            return Err(ApiError::invalid("since", "must not be after `until`"));
        }
    }
    let statuses = recover_statuses(body.status.as_deref())?;
    if let Some(types) = &body.event_types {
        if types.is_empty() || types.len() > deliveries::MAX_RECOVER_EVENT_TYPES {
            return Err(ApiError::invalid(
                "event_types",
                "must list 1 to 100 event types (omit it for any)",
            ));
        }
        for (i, t) in types.iter().enumerate() {
            deliveries::check_event_type(t).map_err(|_| {
                ApiError::invalid(
                    "event_types",
                    format!("item {i}: must be 1 to 200 visible ASCII characters"),
                )
            })?;
        }
    }
    let limit = match body.limit {
        None => deliveries::MAX_RECOVER,
        Some(n) if (1..=deliveries::MAX_RECOVER).contains(&n) => n,
        Some(_) => return Err(ApiError::invalid("limit", "must be from 1 to 1000")),
    };
    let after = match body.after.as_deref() {
        None | Some("") => None,
        Some(c) => Some(
            crate::page::decode::<deliveries::ListKey>(c).ok_or_else(|| {
                ApiError::invalid(
                    "after",
                    "is not a recover cursor (pass back the previous call's next_cursor)",
                )
            })?,
        ),
    };
    let filter = deliveries::RecoverFilter {
        tenant_id: call.tenant_id(),
        channel_id: channel.id,
        since: body.since,
        until: body.until,
        statuses: &statuses,
        event_types: body.event_types.as_deref(),
        after,
    };
    if body.dry_run {
        let mut conn = call.state.pool().acquire().await?;
        let parked = channel.circuit_state.parks_new_deliveries();
        let (count, ids) = deliveries::recover_preview(&mut conn, &filter).await?;
        return Ok(axum::Json(RecoverResult {
            dry_run: true,
            count,
            ids,
            parked,
            next_cursor: None,
        }));
    }
    let mut tx = call.begin_audited().await?;
    // Parked or not as an enqueue to the channel (nothing if it was deleted meanwhile).
    let (recovered, parked) = match circuit::enqueue_parked(&mut tx, channel.id).await? {
        Some(parked) => {
            let max_attempts = call.state.settings().max_attempts;
            let r = deliveries::recover(&mut tx, &filter, parked, max_attempts, limit).await?;
            (r, parked)
        }
        None => (
            deliveries::Recovered {
                ids: Vec::new(),
                next: None,
            },
            false,
        ),
    };
    let next_cursor = recovered.next.map(|k| crate::page::encode(&k));
    audit::record(
        &mut *tx,
        &audit::Entry {
            reason: Some("channel recover"),
            details: serde_json::json!({
                "resent": recovered.ids.len(),
                "since": body.since,
                "until": body.until,
                "status": statuses,
                "event_types": body.event_types,
                "after": body.after,
                "parked": parked,
                "more": next_cursor.is_some(),
            }),
            ..audit::Entry::channel(
                call.tenant_id(),
                channel.id,
                call.actor(),
                "deliveries.recovered",
            )
        },
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(RecoverResult {
        dry_run: false,
        count: recovered.ids.len() as i64,
        ids: recovered.ids,
        parked,
        next_cursor,
    }))
}
