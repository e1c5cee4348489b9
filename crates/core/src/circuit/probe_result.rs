//! The probe's (or trial's) results: succeeded (careful closing: close on the k-th consecutive
//! success, else the next trial), failed (re-open, cooldown doubled), inconclusive (a permanent
//! failure passes the role on).

use super::{
    audit_half_open, choose_probe, enqueue_parked, on_closed, on_opened, role_details,
    schedule_probe, transition, CircuitConfig, State, Transition, TransitionRow,
};
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;
/// What a successful probe (or trial) delivery does to a half-open circuit that needs `needed`
/// consecutive successes and had `passed_before` of them (module doc, "Careful closing").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterSuccess {
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
pub(crate) fn after_success(passed_before: i32, needed: i32) -> AfterSuccess {
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
    let row: Option<TransitionRow> = sqlx::query_as(concat!(
        enter_state_sql!("closed"),
        "
             consecutive_failures = 0, probe_failures = 0, next_probe_at = NULL,
             probe_delivery_id = NULL, probe_deadline = NULL, health_unhealthy = false,
             trial_successes = 0, updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL",
        returning_transition_sql!()
    ))
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
        // Closed in this transaction, so not parked; asked all the same, as every enqueue does.
        let parked = enqueue_parked(tx, channel_id).await?.unwrap_or(true);
        let replayed = crate::deliveries::replay(
            tx,
            crate::deliveries::ReplaySelector::ChannelWindow {
                tenant_id: t.tenant_id,
                channel_id,
                from,
                to: now,
            },
            parked,
            max_attempts,
        )
        .await?;
        audit::record(
            &mut *tx,
            &audit::Entry {
                reason: Some("replay_dead_letters_on_close"),
                details: serde_json::json!({
                    "replayed": replayed, "window_ms": window_ms, "from": from, "to": now,
                }),
                ..audit::Entry::channel(
                    t.tenant_id,
                    channel_id,
                    ACTOR_CIRCUIT_BREAKER,
                    "deliveries.replayed",
                )
            },
        )
        .await?;
    }
    Ok(Some(ProbeSuccess::Closed(t)))
}

/// The probe (or trial) delivery of `generation` failed permanently (a 4xx other than 408/429:
/// the endpoint answered, but not with a success). Such a failure never moves the breaker
/// (docs/design.md), so it neither counts as a success nor reopens the circuit; the delivery is
/// finished (dead), so the probe role passes at once to the next parked delivery, with a fresh
/// lease — instead of sitting with a finished delivery until its lease expires and a takeover.
/// Also the answer of a probe whose request went to a URL the channel no longer has
/// ([`after_attempt`]).
/// Conditional on `half_open` and the generation (a stale result changes nothing); the
/// generation moves, fencing the next probe. No audit row (nothing changed state) and no alert.
/// Returns the next probe delivery (`Some(None)`: nothing waiting, the next delivery to arrive
/// is the probe), or `None` for a stale result.
pub(crate) async fn probe_inconclusive(
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
    tracing::info!(%channel_id, ?next, "probe inconclusive (a permanent failure, or an answer from an old URL); the role passes on");
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
    let details = role_details(
        generation,
        chosen,
        serde_json::json!({ "passed": passed, "needed": needed }),
    );
    let (ids, action) = ((tenant_id, channel_id), "circuit.trial_passed");
    audit_half_open(tx, ids, State::HalfOpen, action, &reason, details).await?;
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
            enter_state_sql!("open"),
            "
             probe_failures = probe_failures + 1, probe_delivery_id = NULL, probe_deadline = NULL,
             trial_successes = 0, last_failure_at = now(), last_failure_reason = $3,
             next_probe_at = greatest(
                 now() + (least(",
            cooldown_ms_sql!("cooldown_ms", "$4"),
            "::float8 * power(2, least(probe_failures + 1, 30)), $5::float8)
                          * interval '1 millisecond'),
                 coalesce(retry_after_until, now())),
             updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL",
            returning_transition_sql!()
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
