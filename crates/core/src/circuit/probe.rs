//! The probe watcher: its step (claim `half_open` after the cooldown or a lease expiry) and the
//! choice of the probe delivery. The probe's results are in `probe_result.rs`.

use super::{audit_transition, CircuitConfig, State};
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::jobs::{DeliverArgs, JobArgs, ProbeArgs};
use crate::{Result, JOB_DELIVER};
use breakwater_queue::PRIORITY_URGENT;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// The unique key of channel `channel_id`'s probe watcher job.
pub fn probe_key(channel_id: Uuid) -> String {
    format!("probe:{channel_id}")
}

/// Makes sure the channel's probe watcher (unique per channel) runs no later than `at`, in its
/// tenant's watcher group ([`crate::jobs::TenantGroup::ProbeWatchers`]).
pub(super) async fn schedule_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    at: Option<DateTime<Utc>>,
) -> Result<()> {
    let tenant: Option<Uuid> = sqlx::query_scalar("SELECT tenant_id FROM channels WHERE id = $1")
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?;
    let args = ProbeArgs { channel_id };
    crate::jobs::schedule_watcher(tx, &args, probe_key(channel_id), at, tenant).await
}

/// Brings an open circuit's next probe forward to now because the channel's endpoint changed
/// (a `PATCH` of its URL): the cooldown measured the old endpoint, and a tenant who fixed the URL
/// should not wait for it (up to `max_cooldown_ms`, 10 min by default; found by a new-user
/// trial). The doubling starts again (`probe_failures` 0; the caller drops a `Retry-After` hold
/// of the old endpoint first, [`drop_retry_after`], in any state); the circuit stays open until
/// the probe answers, so the backlog is not
/// released on a URL that may be wrong too. A channel paused while open (or half-open) keeps its
/// probe time for its resume ([`Manual::Resume`]): a new URL makes that now too, and its resume
/// probes at once. A circuit an operator holds open is left alone (its cooldown is the
/// operator's). In the caller's transaction, which holds the channel row. Returns the new next
/// probe time (database clock) if it moved.
pub(crate) async fn probe_new_endpoint(
    tx: &mut PgConnection,
    channel_id: Uuid,
) -> Result<Option<DateTime<Utc>>> {
    let row: Option<(DateTime<Utc>, State)> = sqlx::query_as(
        "UPDATE channels SET next_probe_at = now(), probe_failures = 0, updated_at = now()
         WHERE id = $1 AND NOT operator_hold AND deleted_at IS NULL
           AND (circuit_state = 'open'
                OR (circuit_state = 'paused' AND paused_from IN ('open', 'half_open')))
         RETURNING next_probe_at, circuit_state",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((at, state)) = row else {
        return Ok(None);
    };
    if state == State::Open {
        schedule_probe(tx, channel_id, Some(at)).await?;
    }
    Ok(Some(at))
}

/// What the probe watcher should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeStep {
    /// The circuit is closed or paused, or half-open with the probe role empty (the next
    /// delivery to arrive takes it and schedules the watcher again): the watcher is done.
    Done,
    /// Not yet: look again after this long (measured on the database's clock).
    Wait(Duration),
    /// A probe was started (or taken over).
    Started {
        /// Generation of the half-open claim.
        generation: i64,
        /// The delivery woken as the probe, if the channel had a parked one; `None` leaves the
        /// role to the next delivery that arrives.
        delivery_id: Option<Uuid>,
        /// The probe's lease when a delivery was woken: look again when it expires (another
        /// probe may then take over). `None` when no delivery was woken: the watcher ends.
        lease: Option<Duration>,
    },
}

/// What the probe watcher reads when there is nothing to claim: state, next probe time, probe
/// deadline, database now.
type WatchRow = (
    State,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
    bool,
    Option<DateTime<Utc>>,
);

/// Shortest wait of a channel's probe watcher while its host circuit holds the host (the host's
/// next probe time is the usual wait; this bounds the polling when that time has passed).
const HOST_HELD_RECHECK: Duration = Duration::from_secs(1);

/// The probe watcher's step for a channel: if the circuit is open and the cooldown is over, or
/// half-open and the probe's lease has expired, claims `half_open` (one conditional UPDATE:
/// generation + 1, probe role emptied) and wakes exactly one parked delivery as the probe with a
/// lease of `cfg.probe_lease_ms` — or, with nothing parked, leaves the role empty and the lease
/// unset for the next delivery that arrives (module doc, "The probe role with nothing waiting").
/// A half-open circuit with an empty role is never claimed again here, so it writes no audit row
/// per lease period. While the channel's host circuit is open, or half-open with its probe
/// chosen (the host's whole gate is parked, so no channel probe could be fetched), it claims
/// nothing and waits for the host's next step. A host half-open with its probe role free found
/// no closed channel with a delivery waiting (its probe is chosen among those) and lets the next
/// one through: then the channel probes, and its probe tests the host too ([`admit`]) — else a
/// host whose every waiting delivery sits behind its own channel's open circuit would never be
/// tested again. Entering `half_open` from `open` restarts the trial count. In the caller's
/// transaction. Returns the step and, when a claim was made, the transition to count once the
/// caller commits.
pub async fn probe_watch(
    tx: &mut PgConnection,
    channel_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<(ProbeStep, Option<audit::Transitioned>)> {
    let claimed: Option<(Uuid, i64, State, i32, i32)> = sqlx::query_as(
        "WITH before AS (SELECT id, circuit_state FROM channels WHERE id = $1 AND deleted_at IS NULL FOR UPDATE)
         UPDATE channels c
         SET circuit_state = 'half_open', circuit_changed_at = now(),
             circuit_generation = c.circuit_generation + 1, probe_delivery_id = NULL,
             probe_deadline = NULL,
             trial_successes = CASE WHEN before.circuit_state = 'open' THEN 0 ELSE c.trial_successes END,
             updated_at = now()
         FROM before
         WHERE c.id = before.id
           AND ((c.circuit_state = 'open' AND c.next_probe_at <= now())
             OR (c.circuit_state = 'half_open' AND c.probe_deadline <= now()))
           AND NOT EXISTS (SELECT 1 FROM host_circuits h
                           WHERE h.host_key = c.host_key
                             AND (h.state = 'open'
                               OR (h.state = 'half_open' AND h.probe_delivery_id IS NOT NULL)))
         RETURNING c.tenant_id, c.circuit_generation, before.circuit_state, c.probe_failures,
                   c.trial_successes",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((tenant_id, generation, before, probe_failures, passed)) = claimed else {
        let row: Option<WatchRow> = sqlx::query_as(
            "SELECT c.circuit_state, c.next_probe_at, c.probe_deadline, now(),
                    h.state IS NOT NULL AS host_held,
                    coalesce(h.next_probe_at, h.probe_deadline) AS host_next
             FROM channels c
             LEFT JOIN host_circuits h ON h.host_key = c.host_key
                  AND (h.state = 'open'
                    OR (h.state = 'half_open' AND h.probe_delivery_id IS NOT NULL))
             WHERE c.id = $1 AND c.deleted_at IS NULL",
        )
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        let until =
            |at: DateTime<Utc>, now: DateTime<Utc>| (at - now).to_std().unwrap_or(Duration::ZERO);
        let step = match row {
            // The channel's host circuit is open, or half-open with its probe chosen: the whole
            // host is parked, so a channel probe could not be fetched (its lease would only
            // expire, again and again).
            // The channel's own probe waits, quietly, until the host's next step.
            Some((s, next, deadline, now, true, host_next))
                if (s == State::Open && next.is_some_and(|n| n <= now))
                    || (s == State::HalfOpen && deadline.is_some_and(|d| d <= now)) =>
            {
                ProbeStep::Wait(
                    host_next
                        .map(|at| until(at, now))
                        .unwrap_or_default()
                        .max(HOST_HELD_RECHECK),
                )
            }
            Some((State::Open, Some(next), _, now, _, _)) => ProbeStep::Wait(until(next, now)),
            Some((State::HalfOpen, _, Some(deadline), now, _, _)) => {
                ProbeStep::Wait(until(deadline, now))
            }
            // Closed, paused, gone, or half-open with the role empty (no lease to watch).
            _ => ProbeStep::Done,
        };
        return Ok((step, None));
    };
    let chosen = choose_probe(tx, channel_id, cfg.probe_lease_ms).await?;
    let delivery_id = chosen.map(|(d, _)| d);
    let reason = match (before, delivery_id) {
        (State::HalfOpen, Some(_)) => "the previous probe's lease expired; another probe takes over",
        (State::HalfOpen, None) => {
            "the previous probe's lease expired and nothing is waiting; the next delivery to arrive is the probe"
        }
        (_, Some(_)) => "cooldown over; probing",
        (_, None) => "cooldown over and nothing is waiting; the next delivery to arrive is the probe",
    };
    let details = role_details(
        generation,
        chosen,
        serde_json::json!({ "probe_failures": probe_failures, "trial_successes": passed }),
    );
    let action = "circuit.probe_started";
    audit_half_open(tx, (tenant_id, channel_id), before, action, reason, details).await?;
    let step = ProbeStep::Started {
        generation,
        delivery_id,
        lease: delivery_id.map(|_| Duration::from_millis(cfg.probe_lease_ms as u64)),
    };
    let counted = audit::Transitioned {
        from: before.as_str(),
        to: State::HalfOpen.as_str(),
    };
    Ok((step, Some(counted)))
}

/// [`probe_watch`] without the transition to count: for callers that do not count metrics.
#[cfg(feature = "testing")]
pub async fn probe_step(
    tx: &mut PgConnection,
    channel_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<ProbeStep> {
    Ok(probe_watch(tx, channel_id, cfg).await?.0)
}

/// The audit details of a step that handed the probe role to `chosen` (the delivery and its
/// lease's end, from [`choose_probe`]; `None`: nothing was waiting, both `null`) under
/// `generation`: `{"generation", "probe_delivery_id", "deadline"}` and the fields of `more` (a
/// JSON object).
pub(super) fn role_details(
    generation: i64,
    chosen: Option<(Uuid, DateTime<Utc>)>,
    more: serde_json::Value,
) -> serde_json::Value {
    let mut details = serde_json::json!({
        "generation": generation,
        "probe_delivery_id": chosen.map(|(d, _)| d),
        "deadline": chosen.map(|(_, at)| at),
    });
    if let (Some(d), serde_json::Value::Object(more)) = (details.as_object_mut(), more) {
        d.extend(more);
    }
    details
}

/// The breaker's audit row of a step of a channel (`ids`: tenant, channel) from `from` into
/// `half_open` that handed the probe role (a claim, a takeover, a trial): `action` for `reason`,
/// with `details` ([`role_details`]).
pub(super) async fn audit_half_open(
    tx: &mut PgConnection,
    ids: (Uuid, Uuid),
    from: State,
    action: &str,
    reason: &str,
    details: serde_json::Value,
) -> Result<()> {
    let (actor, to) = (ACTOR_CIRCUIT_BREAKER, State::HalfOpen);
    audit_transition(tx, ids, (from, to), actor, action, reason, details).await
}

/// Gives the (empty) probe role of half-open channel `channel_id` to one parked delivery: wakes
/// exactly one waiting delivery job of the channel's group at urgent priority (the group's probe
/// slot lets the fetch take exactly that one), names its delivery the probe, starts its lease
/// (`lease_ms`, database clock) and puts the delivery back to `pending`. Returns the delivery and
/// the lease's end, or `None` when nothing is waiting: the slot stays granted and the role empty,
/// for the next delivery that arrives ([`admit`]). The caller holds the channel row and has just
/// moved its generation (the fence of this probe).
pub(super) async fn choose_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    lease_ms: i64,
) -> Result<Option<(Uuid, DateTime<Utc>)>> {
    let woken =
        breakwater_queue::wake_one(&mut *tx, channel_id, JOB_DELIVER, PRIORITY_URGENT).await?;
    let Some(d) = woken
        .as_ref()
        .and_then(|(_, args)| DeliverArgs::from_json(args).ok().map(|a| a.delivery_id))
    else {
        return Ok(None);
    };
    let deadline: DateTime<Utc> = sqlx::query_scalar(
        "UPDATE channels
         SET probe_delivery_id = $2, probe_deadline = now() + ($3::float8 * interval '1 millisecond')
         WHERE id = $1
         RETURNING probe_deadline",
    )
    .bind(channel_id)
    .bind(d)
    .bind(lease_ms)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE deliveries SET status = 'pending', updated_at = now() WHERE id = $1 AND status = 'paused'",
        d,
    )
    .execute(&mut *tx)
    .await?;
    Ok(Some((d, deadline)))
}
