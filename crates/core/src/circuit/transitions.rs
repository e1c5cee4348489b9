//! Transitions driven by attempts (count a failure, reset on success, Retry-After, open from
//! closed) and their effects (park or release the backlog, audit, alert), plus the reconciler
//! of parking.

use super::{
    audit_transition, schedule_probe, transition, CircuitConfig, State, Transition, TransitionRow,
};
use crate::alerts;
use crate::audit::ACTOR_CIRCUIT_BREAKER;
use crate::Result;
use breakwater_queue::Reconciled;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use std::time::Duration;
use uuid::Uuid;
/// Counts one transient failure of a closed channel and, when the count reaches the channel's
/// threshold, opens the circuit (see [`open_from_closed`]) with `reason`. Failures of a channel
/// that is not closed are not counted. Returns the transition if this call made it.
///
/// The increment and the trip run in the caller's transaction; the increment's row lock is held
/// until commit, so of 50 failures racing on the threshold exactly one sees the count cross it
/// while the circuit is still closed.
pub async fn record_failure(
    tx: &mut PgConnection,
    channel_id: Uuid,
    reason: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let row: Option<(i32, i32)> = sqlx::query_as(
        "UPDATE channels
         SET consecutive_failures = consecutive_failures + 1, last_failure_at = now(),
             last_failure_reason = $2, updated_at = now()
         WHERE id = $1 AND circuit_state = 'closed' AND deleted_at IS NULL
         RETURNING consecutive_failures,
                   coalesce(failure_threshold, (SELECT failure_threshold FROM circuit_defaults), $3)",
    )
    .bind(channel_id)
    .bind(reason)
    .bind(cfg.failure_threshold)
    .fetch_optional(&mut *tx)
    .await?;
    match row {
        Some((count, threshold)) if count >= threshold => {
            let why = format!(
                "{count} consecutive transient failures (threshold {threshold}); last: {reason}"
            );
            open_from_closed(tx, channel_id, &why, ACTOR_CIRCUIT_BREAKER, cfg).await
        }
        _ => Ok(None),
    }
}

/// A success of a closed channel: resets its failure count. The caller skips this when the
/// count it read was already 0, so the common case costs no write; the `> 0` condition keeps a
/// racing call from writing either.
pub(crate) async fn record_success(exec: impl PgExecutor<'_>, channel_id: Uuid) -> Result<()> {
    sqlx::query(
        "UPDATE channels SET consecutive_failures = 0
         WHERE id = $1 AND circuit_state = 'closed' AND consecutive_failures > 0 AND deleted_at IS NULL",
    )
    .bind(channel_id)
    .execute(exec)
    .await?;
    Ok(())
}

/// Remembers a `Retry-After` of `wait` on the channel: nothing is sent to it before then (the
/// later of any earlier such time and now + `wait`).
pub(crate) async fn set_retry_after(
    exec: impl PgExecutor<'_>,
    channel_id: Uuid,
    wait: Duration,
) -> Result<()> {
    sqlx::query(
        "UPDATE channels
         SET retry_after_until = greatest(coalesce(retry_after_until, now()), now() + ($2::float8 * interval '1 millisecond'))
         WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind(channel_id)
    .bind(wait.as_millis() as i64)
    .execute(exec)
    .await?;
    Ok(())
}

/// How far past a `Retry-After` hold's end its snoozed deliveries may wait (the admission
/// snoozes a held job until the end plus up to 250 ms of jitter, from a `now()` that can be
/// seconds later than the one it compared with on a stalled disk).
const HOLD_SNOOZE_MARGIN: chrono::Duration = chrono::Duration::seconds(5);

/// Drops channel `channel_id`'s `Retry-After` hold, if it has one on record: clears
/// `retry_after_until` and, if the hold was still on (database clock), makes the deliveries
/// waiting until its end (plus [`HOLD_SNOOZE_MARGIN`]) due now
/// ([`breakwater_queue::make_group_due_until`]). For a new URL (the hold was the old
/// endpoint's) and an operator's force-close (the operator's call overrides it): otherwise an
/// hour-long hold outlives both and nobody can end it.
/// In the caller's transaction, which already holds the channel row (`FOR NO KEY UPDATE` here
/// takes nothing new: a `FOR UPDATE` would wait for a worker's attempt insert, whose foreign
/// key holds `KEY SHARE` on the row, while that worker waits for the caller: a deadlock); then
/// the group's job rows. A delivery in its admission at that moment snoozes under the row's
/// share lock ([`hold_left`]), so it sees the hold gone. Returns the end of the hold that
/// was on, if one was.
pub(crate) async fn drop_retry_after(
    tx: &mut PgConnection,
    channel_id: Uuid,
) -> Result<Option<DateTime<Utc>>> {
    let row: Option<(DateTime<Utc>, bool)> = sqlx::query_as(
        "WITH old AS (SELECT id, retry_after_until FROM channels WHERE id = $1 FOR NO KEY UPDATE)
         UPDATE channels c SET retry_after_until = NULL, updated_at = now()
         FROM old
         WHERE c.id = old.id AND old.retry_after_until IS NOT NULL
         RETURNING old.retry_after_until, old.retry_after_until > now()",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((until, true)) = row else {
        return Ok(None);
    };
    breakwater_queue::make_group_due_until(&mut *tx, channel_id, until + HOLD_SNOOZE_MARGIN)
        .await?;
    Ok(Some(until))
}

/// Opens a closed circuit: the conditional UPDATE, then, for the winner only, the effects of
/// opening (`on_opened`). `actor` and `reason` go to the audit log.
pub async fn open_from_closed(
    tx: &mut PgConnection,
    channel_id: Uuid,
    reason: &str,
    actor: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let row: Option<TransitionRow> = sqlx::query_as(concat!(
        enter_state_sql!("open"),
        "
             probe_failures = 0, probe_delivery_id = NULL, probe_deadline = NULL,
             next_probe_at = greatest(now() + (",
        cooldown_ms_sql!("cooldown_ms", "$2"),
        "::float8 * interval '1 millisecond'),
                                      coalesce(retry_after_until, now())),
             updated_at = now()
         WHERE id = $1 AND circuit_state = 'closed' AND deleted_at IS NULL",
        returning_transition_sql!()
    ))
    .bind(channel_id)
    .bind(cfg.cooldown_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let t = transition(channel_id, State::Closed, State::Open, row);
    on_opened(tx, &t, "circuit.opened", actor, reason).await?;
    enqueue_alert(tx, &t, "channel.circuit_opened", reason).await?;
    Ok(Some(t))
}

/// The winner's effects of entering `open`: park the channel's whole backlog in bulk (one
/// UPDATE by group), mark its live deliveries `paused`, make sure the probe watcher runs at
/// `next_probe_at`, and audit.
pub(super) async fn on_opened(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
) -> Result<()> {
    let parked = park_backlog(tx, t.channel_id).await?;
    schedule_probe(tx, t.channel_id, t.next_probe_at).await?;
    let details = serde_json::json!({
        "generation": t.generation,
        "failures": t.failures,
        "parked": parked,
        "next_probe_at": t.next_probe_at,
    });
    audit_transition(tx, t.ids(), (t.from, t.to), actor, action, reason, details).await?;
    tracing::warn!(channel_id = %t.channel_id, tenant_id = %t.tenant_id, from = t.from.as_str(), parked, reason, "circuit opened");
    Ok(())
}

/// Parks the channel's job group (one row update: its waiting jobs stay put and are not fetched
/// until released, and never wake on their own) and marks its live, not-yet-delivered
/// deliveries `paused`. Returns the number of jobs parked. The caller holds the channel row
/// (channel row before group row, everywhere).
pub(crate) async fn park_backlog(tx: &mut PgConnection, channel_id: Uuid) -> Result<u64> {
    let n = breakwater_queue::park_group(&mut *tx, channel_id).await?;
    sqlx::query!(
        "UPDATE deliveries SET status = 'paused', updated_at = now()
         WHERE channel_id = $1 AND status IN ('pending', 'failed')",
        channel_id,
    )
    .execute(&mut *tx)
    .await?;
    Ok(n)
}

/// Releases the channel's job group (one row update; the fetch takes its jobs again, oldest
/// first) and puts its paused deliveries back to `pending`. Returns the number of jobs released.
pub(crate) async fn release_backlog(tx: &mut PgConnection, channel_id: Uuid) -> Result<u64> {
    let n = breakwater_queue::release_group(&mut *tx, channel_id).await?;
    sqlx::query!(
        "UPDATE deliveries SET status = 'pending', updated_at = now()
         WHERE channel_id = $1 AND status = 'paused'",
        channel_id,
    )
    .execute(&mut *tx)
    .await?;
    Ok(n)
}

/// The safety net for a park or a release that was missed (docs/design.md: parked means asleep until
/// released, never woken by a timer): compares every channel's circuit with its job group's
/// parked flag and repairs a mismatch with the same one-row park or release, each in its own
/// transaction under the channel row's lock, re-checked there. Cheap: it reads the parked groups
/// (a partial index) and the channels that are not closed (another), never a job.
pub async fn reconcile_parking(conn: &mut PgConnection) -> Result<Reconciled> {
    let parked = breakwater_queue::parked_groups(&mut *conn).await?;
    // A deleted channel's group is released too: a job that outlived the deletion (a retry
    // recorded by an attempt that was in flight) must reach the worker, which cancels it.
    let closed: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM channels WHERE id = ANY($1) AND (circuit_state = 'closed' OR deleted_at IS NOT NULL)",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    let held: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM channels
         WHERE circuit_state <> 'closed' AND deleted_at IS NULL AND NOT (id = ANY($1))",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Reconciled {
        released: repair_parking(conn, &closed, false).await?,
        parked: repair_parking(conn, &held, true).await?,
    })
}

/// Parks (`park`) or releases the job group of each channel that, re-read under its row lock,
/// still needs it; one transaction per channel. Returns how many it repaired.
async fn repair_parking(conn: &mut PgConnection, channels: &[Uuid], park: bool) -> Result<u64> {
    let mut repaired = 0;
    for &channel_id in channels {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let row: Option<(State, bool)> = sqlx::query_as(
            "SELECT circuit_state, deleted_at IS NOT NULL FROM channels WHERE id = $1 FOR UPDATE",
        )
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        let needs = match row {
            // A deleted channel's group is released whatever its last state.
            Some((State::Closed, _) | (_, true)) => !park,
            Some(_) => park,
            None => false,
        };
        if needs {
            let jobs = if park {
                park_backlog(&mut tx, channel_id).await?
            } else {
                release_backlog(&mut tx, channel_id).await?
            };
            tracing::warn!(%channel_id, jobs, park, "reconciler: repaired a missed park or release");
            repaired += 1;
        }
        tx.commit().await?;
    }
    Ok(repaired)
}

/// The winner's effects of entering `closed`: release the whole backlog in one UPDATE, audit,
/// alert (unless `alert_event` is `None`: a tenant's own resume, see
/// [`alerts::manual_alerts`]).
pub(super) async fn on_closed(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
    alert_event: Option<&str>,
) -> Result<()> {
    let released = release_backlog(tx, t.channel_id).await?;
    let details = serde_json::json!({ "generation": t.generation, "released": released });
    audit_transition(tx, t.ids(), (t.from, t.to), actor, action, reason, details).await?;
    if let Some(event) = alert_event {
        enqueue_alert(tx, t, event, reason).await?;
    }
    tracing::info!(channel_id = %t.channel_id, released, action, "circuit closed");
    Ok(())
}

/// Enqueues the tenant's alert webhook for a transition, if the tenant has an `alert_url`,
/// under the alert policy ([`crate::alerts::on_transition`]: a flapping circuit sends one
/// `channel.flapping` instead, then nothing until it is stable). Every transition alert goes
/// through here, in the winner's transaction. Unique per (channel, generation, event): a
/// transition alerts at most once, whichever node won it.
pub(crate) async fn enqueue_alert(
    tx: &mut PgConnection,
    t: &Transition,
    event: &str,
    reason: &str,
) -> Result<()> {
    alerts::on_transition(
        tx,
        &alerts::Change {
            channel_id: t.channel_id,
            tenant_id: t.tenant_id,
            from: t.from.as_str(),
            to: t.to.as_str(),
            generation: t.generation,
            failures: t.failures,
            event,
            reason,
        },
    )
    .await?;
    Ok(())
}
