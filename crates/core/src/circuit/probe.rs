//! The probe: the watcher's step (claim `half_open` after the cooldown or a lease expiry), the
//! choice of the probe delivery, and the probe's results (succeeded, with careful closing's
//! trials; failed; inconclusive).

use super::*;

/// The unique key of channel `channel_id`'s probe watcher job.
pub fn probe_key(channel_id: Uuid) -> String {
    format!("probe:{channel_id}")
}

/// Makes sure the channel's probe watcher (unique per channel) runs no later than `at`.
pub(super) async fn schedule_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    at: Option<DateTime<Utc>>,
) -> Result<()> {
    let mut job = NewJob::new(
        QUEUE_CIRCUIT,
        JOB_PROBE,
        serde_json::json!({ "channel_id": channel_id }),
    )
    .priority(PRIORITY_URGENT)
    .unique_key(probe_key(channel_id))
    .max_attempts(1_000);
    job.scheduled_at = at;
    breakwater_queue::schedule_unique(&mut *tx, &job).await?;
    Ok(())
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
/// per lease period. While the channel's host circuit is open or half-open (the host's whole gate
/// is parked, so no channel probe could be fetched) it claims nothing and waits for the host's
/// next step. Entering `half_open` from `open` restarts the trial count. In the caller's
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
                           WHERE h.host_key = c.host_key AND h.state <> 'closed')
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
             LEFT JOIN host_circuits h ON h.host_key = c.host_key AND h.state <> 'closed'
             WHERE c.id = $1 AND c.deleted_at IS NULL",
        )
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        let until =
            |at: DateTime<Utc>, now: DateTime<Utc>| (at - now).to_std().unwrap_or(Duration::ZERO);
        let step = match row {
            // The channel's host circuit is open or half-open: the whole host is parked, so a
            // channel probe could not be fetched (its lease would only expire, again and again).
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
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            channel_id: Some(channel_id),
            actor: ACTOR_CIRCUIT_BREAKER,
            action: "circuit.probe_started",
            from_state: Some(before.as_str()),
            to_state: Some(State::HalfOpen.as_str()),
            reason: Some(reason),
            details: serde_json::json!({
                "generation": generation,
                "probe_delivery_id": delivery_id,
                "probe_failures": probe_failures,
                "trial_successes": passed,
                "deadline": chosen.map(|(_, at)| at),
            }),
        },
    )
    .await?;
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
pub async fn probe_step(
    tx: &mut PgConnection,
    channel_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<ProbeStep> {
    Ok(probe_watch(tx, channel_id, cfg).await?.0)
}

/// Gives the (empty) probe role of half-open channel `channel_id` to one parked delivery: wakes
/// exactly one waiting delivery job of the channel's group at urgent priority (the group's probe
/// slot lets the fetch take exactly that one), names its delivery the probe, starts its lease
/// (`lease_ms`, database clock) and puts the delivery back to `pending`. Returns the delivery and
/// the lease's end, or `None` when nothing is waiting: the slot stays granted and the role empty,
/// for the next delivery that arrives ([`admit`]). The caller holds the channel row and has just
/// moved its generation (the fence of this probe).
async fn choose_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    lease_ms: i64,
) -> Result<Option<(Uuid, DateTime<Utc>)>> {
    let woken =
        breakwater_queue::wake_one(&mut *tx, channel_id, JOB_DELIVER, PRIORITY_URGENT).await?;
    let Some(d) = woken
        .as_ref()
        .and_then(|(_, args)| args.get("delivery_id")?.as_str()?.parse::<Uuid>().ok())
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
    sqlx::query(
        "UPDATE deliveries SET status = 'pending', updated_at = now() WHERE id = $1 AND status = 'paused'",
    )
    .bind(d)
    .execute(&mut *tx)
    .await?;
    Ok(Some((d, deadline)))
}

/// What a successful probe (or trial) delivery does to a half-open circuit that needs `needed`
/// consecutive successes and had `passed_before` of them (module doc, "Careful closing").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSuccess {
    /// This was the `needed`-th success: close.
    Close,
    /// Stay half-open; `passed` successes so far, the next trial goes.
    Trial {
        /// Successes so far, this one included.
        passed: i32,
    },
}

/// The pure rule of careful closing: close on the `needed`-th consecutive success (a `needed`
/// below 1 counts as 1), else run another trial.
pub fn after_success(passed_before: i32, needed: i32) -> AfterSuccess {
    let passed = passed_before.max(0) + 1;
    if passed >= needed.max(1) {
        AfterSuccess::Close
    } else {
        AfterSuccess::Trial { passed }
    }
}

/// What [`probe_succeeded`] did (returned to the winner only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeSuccess {
    /// The circuit closed: the backlog was released, audited, alerted.
    Closed(Transition),
    /// The circuit stays half-open for another trial (`close_after_successes` > 1).
    Trial {
        /// The generation the next trial runs under.
        generation: i64,
        /// Consecutive successes so far.
        passed: i32,
        /// Successes needed to close.
        needed: i32,
        /// The delivery woken as the next trial, or `None`: the next delivery to arrive is it.
        next_delivery_id: Option<Uuid>,
    },
}

impl ProbeSuccess {
    /// The transition as counted in the metrics: the close, or `half_open` → `half_open` for a
    /// trial (audited as `circuit.trial_passed`).
    pub fn counted(&self) -> audit::Transitioned {
        match self {
            ProbeSuccess::Closed(t) => t.counted(),
            ProbeSuccess::Trial { .. } => audit::Transitioned {
                from: State::HalfOpen.as_str(),
                to: State::HalfOpen.as_str(),
            },
        }
    }
}

/// The probe (or trial) delivery of `generation` succeeded. Reads the circuit under its row lock
/// (conditional on `half_open` and the generation: a stale result changes nothing and returns
/// `None`), then applies [`after_success`] with the channel's `close_after_successes` (override,
/// else `circuit_defaults`, else `cfg`):
/// - the k-th consecutive success closes the circuit; the winner releases the whole backlog in
///   one UPDATE, audits, alerts, and optionally replays the channel's dead letters of the last
///   `replay_window_ms` (window on the database clock);
/// - an earlier one counts the success, bumps the generation (the next trial's fence), wakes
///   exactly one parked delivery as the next trial with a fresh lease and schedules the watcher
///   for it, and writes one `circuit.trial_passed` audit row; no alert.
///
/// `max_attempts` is the attempts of a replayed delivery's new job.
pub async fn probe_succeeded(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    max_attempts: i32,
    cfg: &CircuitConfig,
) -> Result<Option<ProbeSuccess>> {
    // The row lock serialises this with every other transition of the channel; the generation
    // check makes a late or duplicate result a no-op.
    let current: Option<(i32, i32)> = sqlx::query_as(
        "SELECT c.trial_successes,
                coalesce(c.close_after_successes, d.close_after_successes, $3)
         FROM channels c CROSS JOIN circuit_defaults d
         WHERE c.id = $1 AND c.circuit_state = 'half_open' AND c.circuit_generation = $2
           AND c.deleted_at IS NULL
         FOR UPDATE OF c",
    )
    .bind(channel_id)
    .bind(generation)
    .bind(cfg.close_after_successes)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((passed_before, needed)) = current else {
        return Ok(None);
    };
    if let AfterSuccess::Trial { passed } = after_success(passed_before, needed) {
        return next_trial(tx, channel_id, passed, needed, cfg)
            .await
            .map(Some);
    }
    let row: Option<TransitionRow> = sqlx::query_as(
        "UPDATE channels
         SET circuit_state = 'closed', circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             consecutive_failures = 0, probe_failures = 0, next_probe_at = NULL,
             probe_delivery_id = NULL, probe_deadline = NULL, health_unhealthy = false,
             trial_successes = 0, updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL
         RETURNING tenant_id, circuit_generation, consecutive_failures, next_probe_at",
    )
    .bind(channel_id)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let t = transition(channel_id, State::HalfOpen, State::Closed, row);
    on_closed(
        tx,
        &t,
        "circuit.closed",
        ACTOR_CIRCUIT_BREAKER,
        "probe delivery succeeded",
        Some("channel.circuit_closed"),
    )
    .await?;
    // Optionally replay the channel's recent dead letters (a channel option). The window ends at
    // the database's now() (this transaction's), never the node's clock.
    let replay: Option<(bool, i64, DateTime<Utc>)> = sqlx::query_as(
        "SELECT replay_dead_letters_on_close, replay_window_ms, now() FROM channels WHERE id = $1",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some((true, window_ms, now)) = replay {
        let from = now - chrono::Duration::milliseconds(window_ms);
        let replayed = crate::deliveries::replay(
            tx,
            crate::deliveries::ReplaySelector::ChannelWindow {
                tenant_id: t.tenant_id,
                channel_id,
                from,
                to: now,
            },
            max_attempts,
        )
        .await?;
        audit::record(
            &mut *tx,
            &audit::Entry {
                tenant_id: Some(t.tenant_id),
                channel_id: Some(channel_id),
                actor: ACTOR_CIRCUIT_BREAKER,
                action: "deliveries.replayed",
                reason: Some("replay_dead_letters_on_close"),
                details: serde_json::json!({
                    "replayed": replayed, "window_ms": window_ms, "from": from, "to": now,
                }),
                ..Default::default()
            },
        )
        .await?;
    }
    Ok(Some(ProbeSuccess::Closed(t)))
}

/// The probe (or trial) delivery of `generation` failed permanently (a 4xx other than 408/429:
/// the endpoint answered, but not with a success). Such a failure never moves the breaker
/// (DESIGN.md), so it neither counts as a success nor reopens the circuit; the delivery is
/// finished (dead), so the probe role passes at once to the next parked delivery, with a fresh
/// lease — instead of sitting with a finished delivery until its lease expires and a takeover.
/// Conditional on `half_open` and the generation (a stale result changes nothing); the
/// generation moves, fencing the next probe. No audit row (nothing changed state) and no alert.
/// Returns the next probe delivery (`Some(None)`: nothing waiting, the next delivery to arrive
/// is the probe), or `None` for a stale result.
pub async fn probe_inconclusive(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    cfg: &CircuitConfig,
) -> Result<Option<Option<Uuid>>> {
    let moved = sqlx::query(
        "UPDATE channels
         SET circuit_generation = circuit_generation + 1, probe_delivery_id = NULL,
             probe_deadline = NULL, updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL",
    )
    .bind(channel_id)
    .bind(generation)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !moved {
        return Ok(None);
    }
    let chosen = choose_probe(tx, channel_id, cfg.probe_lease_ms).await?;
    if let Some((_, deadline)) = chosen {
        schedule_probe(tx, channel_id, Some(deadline)).await?;
    }
    let next = chosen.map(|(d, _)| d);
    tracing::info!(%channel_id, ?next, "probe answered with a permanent failure; the role passes on");
    Ok(Some(next))
}

/// A success short of `needed` (the caller holds the half-open row, generation checked): count
/// it, move the generation, hand the probe role to the next trial, audit.
async fn next_trial(
    tx: &mut PgConnection,
    channel_id: Uuid,
    passed: i32,
    needed: i32,
    cfg: &CircuitConfig,
) -> Result<ProbeSuccess> {
    let (tenant_id, generation): (Uuid, i64) = sqlx::query_as(
        "UPDATE channels
         SET trial_successes = $2, circuit_generation = circuit_generation + 1,
             probe_delivery_id = NULL, probe_deadline = NULL, updated_at = now()
         WHERE id = $1
         RETURNING tenant_id, circuit_generation",
    )
    .bind(channel_id)
    .bind(passed)
    .fetch_one(&mut *tx)
    .await?;
    let chosen = choose_probe(tx, channel_id, cfg.probe_lease_ms).await?;
    if let Some((_, deadline)) = chosen {
        schedule_probe(tx, channel_id, Some(deadline)).await?;
    }
    let next_delivery_id = chosen.map(|(d, _)| d);
    let reason = format!(
        "probe delivery succeeded ({passed} of {needed} consecutive successes); {}",
        if next_delivery_id.is_some() {
            "next trial woken"
        } else {
            "nothing is waiting: the next delivery to arrive is the next trial"
        }
    );
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            channel_id: Some(channel_id),
            actor: ACTOR_CIRCUIT_BREAKER,
            action: "circuit.trial_passed",
            from_state: Some(State::HalfOpen.as_str()),
            to_state: Some(State::HalfOpen.as_str()),
            reason: Some(&reason),
            details: serde_json::json!({
                "generation": generation,
                "passed": passed,
                "needed": needed,
                "probe_delivery_id": next_delivery_id,
                "deadline": chosen.map(|(_, at)| at),
            }),
        },
    )
    .await?;
    tracing::info!(%channel_id, passed, needed, ?next_delivery_id, "circuit trial passed");
    Ok(ProbeSuccess::Trial {
        generation,
        passed,
        needed,
        next_delivery_id,
    })
}

/// The probe (or trial) delivery of `generation` failed: re-opens the circuit (conditional on
/// `half_open` and the generation) with a cooldown that doubles with each failed probe, capped at
/// `max_cooldown_ms`, and drops the trial count; the winner parks the backlog again and
/// reschedules the watcher.
pub async fn probe_failed(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    reason: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let row: Option<TransitionRow> = sqlx::query_as(
        concat!(
            "UPDATE channels
         SET circuit_state = 'open', circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             probe_failures = probe_failures + 1, probe_delivery_id = NULL, probe_deadline = NULL,
             trial_successes = 0, last_failure_at = now(), last_failure_reason = $3,
             next_probe_at = greatest(
                 now() + (least(",
            cooldown_ms_sql!("cooldown_ms", "$4"),
            "::float8 * power(2, least(probe_failures + 1, 30)), $5::float8)
                          * interval '1 millisecond'),
                 coalesce(retry_after_until, now())),
             updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL
         RETURNING tenant_id, circuit_generation, consecutive_failures, next_probe_at"
        ),
    )
    .bind(channel_id)
    .bind(generation)
    .bind(reason)
    .bind(cfg.cooldown_ms)
    .bind(cfg.max_cooldown_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let t = transition(channel_id, State::HalfOpen, State::Open, row);
    let why = format!("probe failed: {reason}");
    on_opened(tx, &t, "circuit.reopened", ACTOR_CIRCUIT_BREAKER, &why).await?;
    Ok(Some(t))
}
