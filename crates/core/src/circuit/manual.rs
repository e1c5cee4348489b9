//! Manual changes of a channel's circuit: pause, resume, force open, force close.

use super::{
    audit_transition, drop_retry_after, enqueue_alert, on_closed, on_opened, park_backlog,
    CircuitConfig, State, Transition, TransitionRow,
};
use crate::alerts;
use crate::audit;
use crate::{Error, Result};
use sqlx::PgConnection;
use uuid::Uuid;
/// A manual change of a channel's circuit, by a tenant (pause, resume) or an operator (any of
/// them, plus force open / force close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    /// Park the backlog and stop everything; never probed. From any state but `paused`.
    Pause,
    /// End a pause. From `paused` only: to `closed` (the backlog released), or, when the pause
    /// began while the circuit was `open` or `half_open`, back to `open` with its probe due when
    /// it was due before the pause (a pause keeps `next_probe_at`), or at once if that time has
    /// passed (the pause counted as cooldown, no more); a new URL while paused makes it due at
    /// once ([`probe_new_endpoint`]). So a pause and a resume never close a breaker without a
    /// probe, and toggling them neither probes a dead endpoint early nor doubles its cooldown
    /// (otherwise five quick toggles would mean five probes and a 10-min cooldown).
    Resume,
    /// Open the circuit now (park, probe after the cooldown). From `closed`, `half_open`,
    /// `paused`.
    ForceOpen,
    /// Close the circuit now and release the backlog. From `open`, `half_open`, `paused`; in
    /// any state it also ends a `Retry-After` hold ([`drop_retry_after`]).
    ForceClose,
}

/// Who makes a manual change: the channel's tenant or an operator. An operator's pause or
/// force-open holds the circuit (`channels.operator_hold`): the tenant's own pause and resume
/// are refused until a close ends the hold, so a tenant's resume cannot undo an operator's
/// pause a second later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManualBy {
    /// The channel's tenant (pause and resume only).
    Tenant,
    /// An operator.
    Operator,
}

impl Manual {
    fn target(self) -> State {
        match self {
            Manual::Pause => State::Paused,
            Manual::Resume | Manual::ForceClose => State::Closed,
            Manual::ForceOpen => State::Open,
        }
    }

    fn allowed_from(self) -> &'static [State] {
        use State::*;
        match self {
            Manual::Pause => &[Closed, Open, HalfOpen],
            Manual::Resume => &[Paused],
            Manual::ForceOpen => &[Closed, HalfOpen, Paused],
            Manual::ForceClose => &[Open, HalfOpen, Paused],
        }
    }

    /// The audit action.
    pub fn action(self) -> &'static str {
        match self {
            Manual::Pause => "channel.paused",
            Manual::Resume => "channel.resumed",
            Manual::ForceOpen => "circuit.forced_open",
            Manual::ForceClose => "circuit.forced_closed",
        }
    }

    fn alert_event(self) -> &'static str {
        match self {
            Manual::Pause => "channel.paused",
            Manual::Resume => "channel.resumed",
            Manual::ForceOpen => "channel.circuit_opened",
            Manual::ForceClose => "channel.circuit_closed",
        }
    }
}

/// Applies a manual change by `by`: reads the channel's state under its row lock, then, when the
/// change applies, one UPDATE. Returns the transition, or `None` when the
/// channel is already where the change would put it (so repeating a pause or a resume changes
/// nothing and writes no second audit row). The winner parks or releases the backlog, audits
/// with `actor` and `reason`, and alerts. An operator's pause or force-open sets the channel's
/// operator hold; a close clears it, and so does a resume. A pause records the state it
/// interrupted (`paused_from`) and keeps `next_probe_at`; a resume of a pause that interrupted
/// an open or half-open circuit returns it to `open`, its probe due no earlier than before the
/// pause, its failure counts kept ([`Manual::Resume`]).
///
/// Errors: [`Error::Conflict`] when the tenant changes a channel an operator holds, or resumes
/// a channel that is not paused (its circuit breaker opened it: a probe closes it);
/// [`Error::NotFound`] for a missing or deleted channel.
pub async fn apply_manual(
    tx: &mut PgConnection,
    channel_id: Uuid,
    change: Manual,
    by: ManualBy,
    actor: &str,
    reason: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let (tenant_id, state, held, paused_from): (Uuid, State, bool, Option<State>) = sqlx::query_as(
        "SELECT tenant_id, circuit_state, operator_hold, paused_from FROM channels
         WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("channel"))?;
    if by == ManualBy::Tenant && held {
        return Err(Error::Conflict(format!(
            "an operator holds this channel's circuit ({}); only an operator can resume or close it",
            state.as_str()
        )));
    }
    // A resume of a pause that interrupted an open (or half-open) circuit goes back to open.
    let reopen = change == Manual::Resume
        && state == State::Paused
        && matches!(paused_from, Some(State::Open | State::HalfOpen));
    let to = if reopen { State::Open } else { change.target() };
    let hold = by == ManualBy::Operator && matches!(change, Manual::Pause | Manual::ForceOpen);
    // An operator's close sends now: it ends a Retry-After hold too, in any state (a closed
    // circuit can hold a channel for up to an hour that way, and nobody else can end it).
    let dropped_hold = match change {
        Manual::ForceClose => drop_retry_after(tx, channel_id).await?,
        _ => None,
    };
    if state == to {
        if let Some(until) = dropped_hold {
            let details = serde_json::json!({ "retry_after_until": until });
            let ids = (tenant_id, channel_id);
            let entry = unchanged(ids, actor, "circuit.retry_after_dropped", reason, details);
            audit::record(&mut *tx, &entry).await?;
        }
        if hold && !held {
            // Already paused (or open) by the tenant or the breaker: the operator's change
            // takes the hold, audited, with no transition.
            sqlx::query(
                "UPDATE channels SET operator_hold = true, updated_at = now() WHERE id = $1",
            )
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
            let details = serde_json::json!({ "circuit_state": state.as_str() });
            let ids = (tenant_id, channel_id);
            let entry = unchanged(ids, actor, "circuit.operator_hold", reason, details);
            audit::record(&mut *tx, &entry).await?;
        }
        return Ok(None);
    }
    if !change.allowed_from().contains(&state) {
        // Only a resume of a circuit that is open or half-open, not paused, gets here.
        let next = match by {
            ManualBy::Tenant => "a probe closes it once the endpoint answers",
            ManualBy::Operator => "force it closed (close) to release its backlog now",
        };
        return Err(Error::Conflict(format!(
            "the channel is not paused: its circuit is {}; {next}",
            state.as_str()
        )));
    }
    // The row is locked and its state checked above: the UPDATE needs no condition of its own.
    let row: TransitionRow = sqlx::query_as(concat!(
        "UPDATE channels
         SET circuit_state = $2, circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             probe_delivery_id = NULL, probe_deadline = NULL,
             next_probe_at = CASE
                 WHEN $2 = 'open' AND $5 THEN greatest(next_probe_at, now(), retry_after_until)
                 WHEN $2 = 'open' THEN greatest(now() + (",
        cooldown_ms_sql!("cooldown_ms", "$3"),
        "::float8
                          * interval '1 millisecond'), coalesce(retry_after_until, now()))
                 WHEN $2 = 'paused' THEN next_probe_at END,
             consecutive_failures = CASE WHEN $2 = 'closed' THEN 0 ELSE consecutive_failures END,
             probe_failures = CASE WHEN $2 = 'paused' OR $5 THEN probe_failures ELSE 0 END,
             health_unhealthy = CASE WHEN $2 = 'closed' THEN false ELSE health_unhealthy END,
             operator_hold = CASE WHEN $2 = 'closed' OR $5 THEN false ELSE operator_hold OR $4 END,
             paused_from = CASE WHEN $2 = 'paused' THEN $6 END,
             updated_at = now()
         WHERE id = $1",
        returning_transition_sql!()
    ))
    .bind(channel_id)
    .bind(to.as_str())
    .bind(cfg.cooldown_ms)
    .bind(hold)
    .bind(reopen)
    .bind(state.as_str())
    .fetch_one(&mut *tx)
    .await?;
    let (from, tenant_id, generation, failures, next_probe_at) = (
        state,
        row.tenant_id,
        row.circuit_generation,
        row.consecutive_failures,
        row.next_probe_at,
    );
    let t = Transition {
        channel_id,
        tenant_id,
        from,
        to,
        generation,
        failures,
        next_probe_at,
    };
    // A tenant's own pause or resume is audited but pages nobody unless the tenant asked
    // (`alert_on_manual`); an operator's always alerts, and so do force open and force close.
    let alert_event = match change {
        Manual::Pause | Manual::Resume => {
            alerts::manual_change_alerts(&mut *tx, tenant_id, actor).await?
        }
        Manual::ForceOpen | Manual::ForceClose => true,
    }
    .then(|| change.alert_event());
    match to {
        State::Open => {
            on_opened(tx, &t, change.action(), actor, reason).await?;
            if let Some(event) = alert_event {
                enqueue_alert(tx, &t, event, reason).await?;
            }
        }
        State::Closed => on_closed(tx, &t, change.action(), actor, reason, alert_event).await?,
        State::Paused => {
            let parked = park_backlog(tx, channel_id).await?;
            let details = serde_json::json!({ "generation": generation, "parked": parked });
            audit_transition(
                tx,
                t.ids(),
                (t.from, t.to),
                actor,
                change.action(),
                reason,
                details,
            )
            .await?;
            if let Some(event) = alert_event {
                enqueue_alert(tx, &t, event, reason).await?;
            }
        }
        State::HalfOpen => unreachable!("no manual change targets half_open"),
    }
    Ok(Some(t))
}

/// The audit entry of a manual change that made no transition (the state stays): `action` by
/// `actor` on channel `ids.1` of tenant `ids.0`, for `reason`, with `details`.
fn unchanged<'a>(
    ids: (Uuid, Uuid),
    actor: &'a str,
    action: &'a str,
    reason: &'a str,
    details: serde_json::Value,
) -> audit::Entry<'a> {
    audit::Entry {
        reason: Some(reason),
        details,
        ..audit::Entry::channel(ids.0, ids.1, actor, action)
    }
}
