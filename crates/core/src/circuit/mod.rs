//! The channel circuit (docs/design.md, "The channel circuit"), kept on the `channels` row.
//!
//! ```text
//!  closed ──(failure_threshold consecutive transient failures, or health check → unhealthy)──▶ open
//!  open ──(probe job, after cooldown)──▶ half_open ──(k-th consecutive probe/trial success)──▶ closed
//!                                        half_open ──(probe or trial fails)──▶ open (cooldown ×2, capped)
//!                                        half_open ──(success, fewer than k so far)──▶ half_open (next trial)
//!  any ──(pause)──▶ paused ──(resume)──▶ closed
//! ```
//!
//! Every transition is **one conditional UPDATE** on the channel row (`… WHERE circuit_state =
//! …`, and for probe results `AND circuit_generation = …`), so when several workers or nodes race,
//! the row lock serialises them, Postgres re-checks the condition against the winner's row, and
//! exactly one caller gets the row back. Only that winner parks or releases the backlog, writes
//! the audit row and enqueues the alert — in the same transaction, so a transition and its effects
//! exist together or not at all.
//!
//! Every transition bumps `circuit_generation`; a probe's result names the generation it was
//! started under, so a result that arrives after the circuit moved on changes nothing.
//!
//! ## Careful closing
//!
//! A channel (or the cluster default, or `[circuit] close_after_successes`) may ask for k
//! consecutive successes before closing. With k = 1 the first successful probe closes the
//! circuit. With k > 1 a successful probe keeps the circuit `half_open` and starts a **trial**
//! ([`probe_succeeded`]): under the channel row's lock, and only if the circuit is still
//! `half_open` at the probe's generation (so exactly one result wins, and a stale one changes
//! nothing), the success is counted in `trial_successes` and the generation bumped, and the winner
//! wakes exactly one parked delivery as the next probe, with a fresh lease and the watcher
//! scheduled for it, in the same transaction that records the success. Trials therefore go one at a time, each fenced by its
//! own generation like the probe. The k-th consecutive success closes the circuit and releases the
//! backlog in one update; any transient failure of the probe or of a trial reopens it through
//! [`probe_failed`], with the cooldown doubled as for a failed probe. Each trial success writes
//! one `circuit.trial_passed` audit row (`details.passed` of `details.needed`); alerts are sent
//! on open and close only. A trial whose node dies is taken over at its lease expiry like a probe
//! (the successes so far are kept: a lost trial is not a failure); the count restarts at 0
//! whenever the circuit goes from `open` to `half_open`.
//!
//! ## The probe role with nothing waiting
//!
//! The probe role belongs to a delivery (`probe_delivery_id`), and the lease
//! (`probe_deadline`) only runs while a delivery holds it. When the half-open claim (the watcher
//! after the cooldown, a lease takeover, or the next trial) finds no parked delivery — the
//! backlog was empty, or went dead while the circuit was open — the role stays **empty**: the
//! group's probe slot stays granted, `probe_deadline` is NULL, one `circuit.probe_started` row
//! says so, and the watcher ends quietly instead of re-claiming at every lease expiry. The next
//! delivery that arrives for the channel (new, replayed or retried) is fetched through that slot
//! and claims the role in [`admit`] (one conditional UPDATE, `probe_delivery_id IS NULL`); its
//! lease starts then, and the watcher is scheduled for the lease's end, so a probe whose node
//! died is still taken over. So a circuit with nothing to send sits `half_open` silently (no
//! request, no audit row) until there is something to send, and that something is the probe.
//! A probe that fails permanently (the endpoint answered 4xx) moves nothing but passes the role
//! on at once ([`probe_inconclusive`]): a finished delivery never holds it until a lease expires.
//!
//! A deleted channel (`deleted_at` set, see [`crate::lifecycle`]) has no circuit any more: every
//! statement here is conditional on `deleted_at IS NULL`, so a result that arrives after the
//! deletion (an attempt that was in flight) moves nothing, and the gate calls it gone.

/// The cooldown in force for a channel, as SQL text: the channel's override (`$col`, e.g.
/// `"cooldown_ms"` or `"c.cooldown_ms"`), else the operator's cluster default
/// (`circuit_defaults`), else the configuration's (`$default`, a bind parameter such as `"$2"`).
/// The one copy of this rule; expands to a string literal for `concat!`.
macro_rules! cooldown_ms_sql {
    ($col:literal, $default:literal) => {
        concat!(
            "coalesce(",
            $col,
            ", (SELECT cooldown_ms FROM circuit_defaults), ",
            $default,
            ")"
        )
    };
}

/// The head of a transition's conditional UPDATE of a `channels` row into state `$to` (a
/// string literal, e.g. `"open"`): every transition stamps `circuit_changed_at` and bumps
/// `circuit_generation` (module doc), and a close ends an operator's hold (`operator_hold`,
/// [`apply_manual`]). The statement goes on with its own `SET` items, its
/// `WHERE` and [`returning_transition_sql!`]. Expands to a string literal for `concat!`.
macro_rules! enter_state_sql {
    ($to:literal) => {
        concat!(
            "UPDATE channels
         SET circuit_state = '",
            $to,
            "', circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             operator_hold = (operator_hold AND '",
            $to,
            "' <> 'closed'),"
        )
    };
}

/// The `RETURNING` clause (on its own line) that reads a transition's UPDATE of `channels` back
/// as a [`TransitionRow`]. Expands to a string literal for `concat!`.
macro_rules! returning_transition_sql {
    () => {
        "
         RETURNING tenant_id, circuit_generation, consecutive_failures, next_probe_at"
    };
}

mod attempt;
mod config;
mod explain;
pub(crate) mod gate;
mod health;
mod manual;
pub(crate) mod probe;
pub(crate) mod probe_result;
#[cfg(test)]
mod tests;
pub(crate) mod transitions;

pub use attempt::{
    after_attempt, attempt_inconclusive, locks_channel, AfterAttempt, AttemptResult,
};
pub(crate) use config::{check_close_after_successes, check_overrides};
pub use config::{
    effective_close_after_successes, effective_defaults, set_defaults, CircuitConfig,
    DefaultsChange,
};
pub use explain::{
    explain, BeforeOpen, DeadMode, ExplainInput, ExplainedSettings, Explanation, UntilDead,
    Warning, WhileOpen,
};
pub use gate::{
    admit, admit_and_begin_many, enqueue_parked, hold_left, Admission, Begun, ProbeRole,
};
pub use health::health_check;
pub use manual::{apply_manual, Manual, ManualBy};
pub(crate) use probe::probe_key;
pub(crate) use probe::probe_new_endpoint;
use probe::{audit_half_open, choose_probe, role_details, schedule_probe};
pub use probe::{probe_watch, ProbeStep};
pub(crate) use probe_result::probe_inconclusive;
pub(crate) use probe_result::{probe_failed, probe_succeeded};
pub use transitions::reconcile_parking;
pub(crate) use transitions::{
    drop_retry_after, enqueue_alert, park_backlog, record_success, set_retry_after,
};
use transitions::{on_closed, on_opened};
pub(crate) use transitions::{open_from_closed, record_failure};

use crate::audit;
use crate::Result;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

pub use crate::jobs::{QUEUE_ALERTS, QUEUE_CIRCUIT};

/// A circuit state (the `channels.circuit_state` column).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = CircuitState)]
pub enum State {
    /// Deliveries flow.
    Closed,
    /// The endpoint is considered dead: the backlog is parked, a probe waits for the cooldown.
    Open,
    /// One probe delivery is testing the endpoint.
    HalfOpen,
    /// Paused by the tenant or an operator: parked, never probed.
    Paused,
}

column_text!(State, field "circuit_state", what "circuit state", {
    Closed => "closed",
    Open => "open",
    HalfOpen => "half_open",
    Paused => "paused",
});

impl State {
    /// Whether a delivery enqueued to a channel in this state starts parked (status `paused`,
    /// its job held by the channel's parked job group): open or paused. A half-open channel's
    /// new deliveries start `pending`; its gate parks every one but the probe on pickup.
    pub fn parks_new_deliveries(self) -> bool {
        matches!(self, State::Open | State::Paused)
    }
}

/// A transition that happened (returned to its winner only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Channel.
    pub channel_id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// Generation after.
    pub generation: i64,
    /// Consecutive failures at the transition.
    pub failures: i32,
    /// When the next probe may run (open only).
    pub next_probe_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct TransitionRow {
    tenant_id: Uuid,
    circuit_generation: i64,
    consecutive_failures: i32,
    next_probe_at: Option<DateTime<Utc>>,
}

impl Transition {
    /// Its `(tenant_id, channel_id)`.
    pub(crate) fn ids(&self) -> (Uuid, Uuid) {
        (self.tenant_id, self.channel_id)
    }

    /// The transition as counted in the metrics ([`audit::Transitioned`]).
    pub fn counted(&self) -> audit::Transitioned {
        audit::Transitioned {
            from: self.from.as_str(),
            to: self.to.as_str(),
        }
    }
}

fn transition(channel_id: Uuid, from: State, to: State, r: TransitionRow) -> Transition {
    Transition {
        channel_id,
        tenant_id: r.tenant_id,
        from,
        to,
        generation: r.circuit_generation,
        failures: r.consecutive_failures,
        next_probe_at: r.next_probe_at,
    }
}

/// The winner's audit row of a transition of channel `channel_id` (of `tenant_id`) from `from`
/// to `to` (a trial goes from `half_open` to `half_open`): `actor` did `action` for `reason`,
/// with `details`.
pub(super) async fn audit_transition(
    tx: &mut PgConnection,
    (tenant_id, channel_id): (Uuid, Uuid),
    (from, to): (State, State),
    actor: &str,
    action: &str,
    reason: &str,
    details: serde_json::Value,
) -> Result<()> {
    audit::record(
        &mut *tx,
        &audit::Entry::channel(tenant_id, channel_id, actor, action).transition(
            from.as_str(),
            to.as_str(),
            reason,
            details,
        ),
    )
    .await
}
