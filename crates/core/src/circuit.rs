//! The channel circuit (DESIGN.md, "The channel circuit"), kept on the `channels` row.
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

use crate::alerts;
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::ratelimit::RateLimit;
use crate::{Error, Result, JOB_DELIVER};
use breakwater_queue::{NewJob, PRIORITY_URGENT};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use std::time::Duration;
use uuid::Uuid;

/// Queue of circuit jobs (probe watchers); each node runs a small pool on it.
pub const QUEUE_CIRCUIT: &str = "circuit";
/// Job kind of a channel's probe watcher; args `{"channel_id"}`, unique key `probe:<channel>`.
pub const JOB_PROBE: &str = "probe";
pub use crate::alerts::{JOB_ALERT, QUEUE_ALERTS};

/// Circuit settings (`[circuit]` in `config/default.toml`; environment
/// `BREAKWATER_CIRCUIT__<FIELD>`). Threshold and cooldown can be overridden per channel.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitConfig {
    /// Consecutive transient failures that open a closed circuit.
    pub failure_threshold: i32,
    /// Wait from opening to the first probe, ms.
    pub cooldown_ms: i64,
    /// Largest cooldown while probes keep failing (it doubles each time), ms.
    pub max_cooldown_ms: i64,
    /// Consecutive successful probe deliveries (1–100) before a half-open circuit closes: the
    /// probe, then `close_after_successes − 1` trials, one at a time (see the module doc,
    /// "Careful closing"). Overridable per channel and at run time (`circuit_defaults`).
    pub close_after_successes: i32,
    /// How long a half-open probe may take before the next probe may take over (a probe whose
    /// node died cannot pin the circuit half-open), ms. Should exceed the request timeout.
    pub probe_lease_ms: i64,
    /// Sliding window of the health check, ms.
    pub health_window_ms: i64,
    /// Fewest attempts in the window before the health check judges a channel.
    pub health_min_attempts: i64,
    /// Failure ratio (transient failures / attempts in the window) at or above which a channel is
    /// unhealthy, 0.0–1.0.
    pub health_failure_ratio: f64,
    /// Period of the health check, ms.
    pub health_check_interval_ms: u64,
    /// Longest wait a `Retry-After` header can impose on a channel, ms.
    pub retry_after_cap_ms: i64,
}

impl Default for CircuitConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
            close_after_successes: 1,
            probe_lease_ms: 60_000,
            health_window_ms: 3_600_000,
            health_min_attempts: 20,
            health_failure_ratio: 0.5,
            health_check_interval_ms: 30_000,
            retry_after_cap_ms: 3_600_000,
        }
    }
}

impl CircuitConfig {
    /// Checks the settings; the error names the field.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let positive = [
            ("circuit.failure_threshold", self.failure_threshold as i64),
            ("circuit.cooldown_ms", self.cooldown_ms),
            ("circuit.max_cooldown_ms", self.max_cooldown_ms),
            ("circuit.probe_lease_ms", self.probe_lease_ms),
            ("circuit.health_window_ms", self.health_window_ms),
            ("circuit.health_min_attempts", self.health_min_attempts),
            (
                "circuit.health_check_interval_ms",
                self.health_check_interval_ms as i64,
            ),
        ];
        for (name, v) in positive {
            if v <= 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if !(1..=MAX_CLOSE_AFTER_SUCCESSES).contains(&self.close_after_successes) {
            return Err(format!(
                "circuit.close_after_successes must be between 1 and {MAX_CLOSE_AFTER_SUCCESSES}"
            ));
        }
        if self.max_cooldown_ms < self.cooldown_ms {
            return Err("circuit.max_cooldown_ms must be at least circuit.cooldown_ms".into());
        }
        if !(0.0..=1.0).contains(&self.health_failure_ratio) || self.health_failure_ratio == 0.0 {
            return Err("circuit.health_failure_ratio must be in (0.0, 1.0]".into());
        }
        if self.retry_after_cap_ms < 0 {
            return Err("circuit.retry_after_cap_ms must not be negative".into());
        }
        Ok(())
    }
}

/// The cluster-wide defaults in force: each value is the operator's edit (table
/// `circuit_defaults`) if there is one, else the configuration's. Returns
/// `(failure_threshold, cooldown_ms, threshold_edited, cooldown_edited)`.
pub async fn effective_defaults(
    exec: impl PgExecutor<'_>,
    cfg: &CircuitConfig,
) -> Result<(i32, i64, bool, bool)> {
    let (t, c): (Option<i32>, Option<i64>) =
        sqlx::query_as("SELECT failure_threshold, cooldown_ms FROM circuit_defaults")
            .fetch_one(exec)
            .await?;
    Ok((
        t.unwrap_or(cfg.failure_threshold),
        c.unwrap_or(cfg.cooldown_ms),
        t.is_some(),
        c.is_some(),
    ))
}

/// Largest `close_after_successes` (per channel, cluster default or configuration).
pub const MAX_CLOSE_AFTER_SUCCESSES: i32 = 100;

/// Checks a `close_after_successes` value (1–[`MAX_CLOSE_AFTER_SUCCESSES`]); the error names the
/// field `close_after_successes`.
pub fn check_close_after_successes(k: Option<i32>) -> Result<()> {
    if k.is_some_and(|k| !(1..=MAX_CLOSE_AFTER_SUCCESSES).contains(&k)) {
        return Err(Error::invalid(
            "close_after_successes",
            format!("must be between 1 and {MAX_CLOSE_AFTER_SUCCESSES}"),
        ));
    }
    Ok(())
}

/// The cluster-wide `close_after_successes` in force: the operator's edit (table
/// `circuit_defaults`) if there is one, else the configuration's. Returns `(value, edited)`.
pub async fn effective_close_after_successes(
    exec: impl PgExecutor<'_>,
    cfg: &CircuitConfig,
) -> Result<(i32, bool)> {
    let k: Option<i32> = sqlx::query_scalar("SELECT close_after_successes FROM circuit_defaults")
        .fetch_one(exec)
        .await?;
    Ok((k.unwrap_or(cfg.close_after_successes), k.is_some()))
}

/// A circuit state (the `channels.circuit_state` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
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

impl State {
    /// The column value.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::Paused => "paused",
        }
    }

    /// Parses the column value.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "closed" => State::Closed,
            "open" => State::Open,
            "half_open" => State::HalfOpen,
            "paused" => State::Paused,
            other => {
                return Err(Error::invalid(
                    "circuit_state",
                    format!("unknown circuit state {other:?}"),
                ))
            }
        })
    }
}

/// What the worker reads of a channel before it touches a delivery (no payload, no secret).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GateRow {
    /// Circuit state column.
    pub circuit_state: String,
    /// Generation.
    pub circuit_generation: i64,
    /// The delivery chosen as the half-open probe, if any.
    pub probe_delivery_id: Option<Uuid>,
    /// No request before this (Retry-After).
    pub retry_after_until: Option<DateTime<Utc>>,
    /// Consecutive failures counted so far.
    pub consecutive_failures: i32,
    /// The channel's rate limit text, if any.
    pub rate_limit: Option<String>,
    /// The send slot the delivery reserved earlier under that limit, if any.
    pub rate_slot_at: Option<DateTime<Utc>>,
    /// Database time of the read.
    pub now: DateTime<Utc>,
    /// The channel's host circuit state (joined in the same read; `None`: no host circuit).
    #[sqlx(default)]
    pub host_state: Option<String>,
    /// Its generation.
    #[sqlx(default)]
    pub host_generation: Option<i64>,
    /// The delivery chosen as the host's half-open probe, if any.
    #[sqlx(default)]
    pub host_probe_delivery_id: Option<Uuid>,
}

/// What the worker should do with a delivery job it picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send it. `probe_generation` is set when this delivery is the half-open probe.
    Send {
        /// The generation the probe runs under, if this is the probe.
        probe_generation: Option<i64>,
        /// Consecutive failures before this attempt (a success resets them only if > 0).
        consecutive_failures: i32,
        /// The channel's rate limit (none for the probe: one request per cooldown), with the
        /// slot the delivery reserved earlier and the database time of the read.
        rate: Option<(RateLimit, Option<DateTime<Utc>>, DateTime<Utc>)>,
        /// The host circuit's generation when this delivery is the host probe
        /// ([`crate::hosts`]).
        host_probe: Option<i64>,
    },
    /// Park it again (open, paused, or half-open and not the probe); no request, no attempt.
    Park,
    /// The channel asked for a pause (Retry-After): snooze this long (database clock); no
    /// request, no attempt.
    Wait(Duration),
    /// Half-open with no probe chosen: try to become the probe.
    ClaimProbe(i64),
    /// The channel lets it go and its host is half-open with no probe chosen: try to become the
    /// host probe (generation of the host circuit).
    ClaimHostProbe(i64),
    /// The channel no longer exists, or was deleted.
    Gone,
}

/// The pure decision for delivery `delivery_id` given its channel's gate row: the channel's
/// circuit, then its host's ([`crate::hosts::decide`]); a delivery goes only if both let it.
pub fn decide(gate: Option<&GateRow>, delivery_id: Uuid) -> Admission {
    use crate::hosts::HostGate;
    let Some(g) = gate else {
        return Admission::Gone;
    };
    let host = crate::hosts::decide(
        g.host_state.as_deref(),
        g.host_generation,
        g.host_probe_delivery_id,
        delivery_id,
    );
    match (decide_channel(g, delivery_id), host) {
        (a, HostGate::Pass) => a,
        (Admission::Send { .. } | Admission::ClaimProbe(_), HostGate::Park) => Admission::Park,
        (
            Admission::Send {
                probe_generation,
                consecutive_failures,
                ..
            },
            HostGate::Probe(h),
        ) => {
            // The host probe: one request per host cooldown, no rate limit.
            Admission::Send {
                probe_generation,
                consecutive_failures,
                rate: None,
                host_probe: Some(h),
            }
        }
        (Admission::Send { .. }, HostGate::Claim(h)) => Admission::ClaimHostProbe(h),
        (Admission::ClaimProbe(_), _) => Admission::Park,
        (other, _) => other,
    }
}

fn decide_channel(g: &GateRow, delivery_id: Uuid) -> Admission {
    match g.circuit_state.as_str() {
        "closed" => match g.retry_after_until {
            Some(until) if until > g.now => {
                Admission::Wait((until - g.now).to_std().unwrap_or(Duration::ZERO))
            }
            _ => Admission::Send {
                probe_generation: None,
                consecutive_failures: g.consecutive_failures,
                rate: g
                    .rate_limit
                    .as_deref()
                    .and_then(|r| RateLimit::parse(r).ok())
                    .map(|r| (r, g.rate_slot_at, g.now)),
                host_probe: None,
            },
        },
        "half_open" => match g.probe_delivery_id {
            Some(p) if p == delivery_id => Admission::Send {
                probe_generation: Some(g.circuit_generation),
                consecutive_failures: g.consecutive_failures,
                rate: None,
                host_probe: None,
            },
            None => Admission::ClaimProbe(g.circuit_generation),
            Some(_) => Admission::Park,
        },
        _ => Admission::Park,
    }
}

/// Reads the gate under a `FOR SHARE` lock, in the caller's transaction: a transition of this
/// channel (which updates the row) waits for the caller to commit, and the caller, if it came
/// second, sees the transition's committed state. Parking on pickup uses it so that a job cannot
/// park itself just after a closing transition released the backlog. `None` for a missing or
/// deleted channel (a deletion that commits while the caller waits for the lock included).
pub async fn lock_gate(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<GateRow>> {
    Ok(sqlx::query_as(
        "SELECT circuit_state, circuit_generation, probe_delivery_id, retry_after_until,
                consecutive_failures, NULL::text AS rate_limit, NULL::timestamptz AS rate_slot_at,
                now() AS now
         FROM channels WHERE id = $1 AND deleted_at IS NULL FOR SHARE",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?)
}

/// Reads the gate (the channel row joined with its host circuit row: one read) and decides;
/// when half-open without a probe (the channel's, or the host's), claims the probe role for
/// this delivery with one conditional UPDATE (`probe_delivery_id IS NULL`), so only one delivery
/// becomes the probe. A channel probe's claim starts its lease (`cfg.probe_lease_ms`, database
/// clock) and schedules the probe watcher for its end, in one transaction: a claimed probe whose
/// node dies is taken over (module doc, "The probe role with nothing waiting"). Never returns
/// [`Admission::ClaimProbe`] or [`Admission::ClaimHostProbe`].
pub async fn admit(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<Admission> {
    let gate: Option<GateRow> = sqlx::query_as(
        "SELECT c.circuit_state, c.circuit_generation, c.probe_delivery_id, c.retry_after_until,
                c.consecutive_failures, c.rate_limit,
                (SELECT rate_slot_at FROM deliveries WHERE id = $2) AS rate_slot_at, now() AS now,
                h.state AS host_state, h.generation AS host_generation,
                h.probe_delivery_id AS host_probe_delivery_id
         FROM channels c LEFT JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND c.deleted_at IS NULL",
    )
    .bind(channel_id)
    .bind(delivery_id)
    .fetch_optional(&mut *conn)
    .await?;
    match decide(gate.as_ref(), delivery_id) {
        Admission::ClaimProbe(generation) => {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let deadline: Option<DateTime<Utc>> = sqlx::query_scalar(
                "UPDATE channels
                 SET probe_delivery_id = $2,
                     probe_deadline = now() + ($4::float8 * interval '1 millisecond')
                 WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $3
                   AND probe_delivery_id IS NULL AND deleted_at IS NULL
                 RETURNING probe_deadline",
            )
            .bind(channel_id)
            .bind(delivery_id)
            .bind(generation)
            .bind(cfg.probe_lease_ms)
            .fetch_optional(&mut *tx)
            .await?;
            let won = deadline.is_some();
            if won {
                schedule_probe(&mut tx, channel_id, deadline).await?;
            }
            tx.commit().await?;
            Ok(if won {
                Admission::Send {
                    probe_generation: Some(generation),
                    consecutive_failures: gate.map_or(0, |g| g.consecutive_failures),
                    rate: None,
                    host_probe: None,
                }
            } else {
                Admission::Park
            })
        }
        Admission::ClaimHostProbe(generation) => {
            let won = crate::hosts::claim_probe(conn, channel_id, delivery_id, generation).await?;
            Ok(if won {
                Admission::Send {
                    probe_generation: None,
                    consecutive_failures: gate.map_or(0, |g| g.consecutive_failures),
                    rate: None,
                    host_probe: Some(generation),
                }
            } else {
                Admission::Park
            })
        }
        other => Ok(other),
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
struct ManualRow {
    #[sqlx(flatten)]
    row: TransitionRow,
    before_state: String,
}

#[derive(sqlx::FromRow)]
struct TransitionRow {
    tenant_id: Uuid,
    circuit_generation: i64,
    consecutive_failures: i32,
    next_probe_at: Option<DateTime<Utc>>,
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
pub async fn record_success(exec: impl PgExecutor<'_>, channel_id: Uuid) -> Result<()> {
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
pub async fn set_retry_after(
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

/// Opens a closed circuit: the conditional UPDATE, then, for the winner only, the effects of
/// opening ([`on_opened`]). `actor` and `reason` go to the audit log.
pub async fn open_from_closed(
    tx: &mut PgConnection,
    channel_id: Uuid,
    reason: &str,
    actor: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let row: Option<TransitionRow> = sqlx::query_as(
        "UPDATE channels
         SET circuit_state = 'open', circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             probe_failures = 0, probe_delivery_id = NULL, probe_deadline = NULL,
             next_probe_at = greatest(now() + (coalesce(cooldown_ms, (SELECT cooldown_ms FROM circuit_defaults), $2)::float8 * interval '1 millisecond'),
                                      coalesce(retry_after_until, now())),
             updated_at = now()
         WHERE id = $1 AND circuit_state = 'closed' AND deleted_at IS NULL
         RETURNING tenant_id, circuit_generation, consecutive_failures, next_probe_at",
    )
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
async fn on_opened(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
) -> Result<()> {
    let parked = park_backlog(tx, t.channel_id).await?;
    schedule_probe(tx, t.channel_id, t.next_probe_at).await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(t.tenant_id),
            channel_id: Some(t.channel_id),
            actor,
            action,
            from_state: Some(t.from.as_str()),
            to_state: Some(t.to.as_str()),
            reason: Some(reason),
            details: serde_json::json!({
                "generation": t.generation,
                "failures": t.failures,
                "parked": parked,
                "next_probe_at": t.next_probe_at,
            }),
        },
    )
    .await?;
    tracing::warn!(channel_id = %t.channel_id, tenant_id = %t.tenant_id, from = t.from.as_str(), parked, reason, "circuit opened");
    Ok(())
}

/// Parks the channel's job group (one row update: its waiting jobs stay put and are not fetched
/// until released, and never wake on their own) and marks its live, not-yet-delivered
/// deliveries `paused`. Returns the number of jobs parked. The caller holds the channel row
/// (channel row before group row, everywhere).
pub async fn park_backlog(tx: &mut PgConnection, channel_id: Uuid) -> Result<u64> {
    let n = breakwater_queue::park_group(&mut *tx, channel_id).await?;
    sqlx::query(
        "UPDATE deliveries SET status = 'paused', updated_at = now()
         WHERE channel_id = $1 AND status IN ('pending', 'failed')",
    )
    .bind(channel_id)
    .execute(&mut *tx)
    .await?;
    Ok(n)
}

/// Releases the channel's job group (one row update; the fetch takes its jobs again, oldest
/// first) and puts its paused deliveries back to `pending`. Returns the number of jobs released.
pub async fn release_backlog(tx: &mut PgConnection, channel_id: Uuid) -> Result<u64> {
    let n = breakwater_queue::release_group(&mut *tx, channel_id).await?;
    sqlx::query(
        "UPDATE deliveries SET status = 'pending', updated_at = now()
         WHERE channel_id = $1 AND status = 'paused'",
    )
    .bind(channel_id)
    .execute(&mut *tx)
    .await?;
    Ok(n)
}

/// What [`reconcile_parking`] repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Closed (or deleted) channels whose job group was still parked: released.
    pub released: u64,
    /// Open, half-open or paused channels whose job group was not parked: parked.
    pub parked: u64,
}

/// The safety net for a park or a release that was missed (DESIGN.md: parked means asleep until
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
        let state: Option<String> = sqlx::query_scalar(
            "SELECT CASE WHEN deleted_at IS NULL THEN circuit_state ELSE 'deleted' END
             FROM channels WHERE id = $1 FOR UPDATE",
        )
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        let needs = match state.as_deref() {
            Some("closed" | "deleted") => !park,
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

/// The unique key of channel `channel_id`'s probe watcher job.
pub fn probe_key(channel_id: Uuid) -> String {
    format!("probe:{channel_id}")
}

/// Makes sure the channel's probe watcher (unique per channel) runs no later than `at`.
async fn schedule_probe(
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
    String,
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
/// transaction.
pub async fn probe_step(
    tx: &mut PgConnection,
    channel_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<ProbeStep> {
    let claimed: Option<(Uuid, i64, String, i32, i32)> = sqlx::query_as(
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
        return Ok(match row {
            // The channel's host circuit is open or half-open: the whole host is parked, so a
            // channel probe could not be fetched (its lease would only expire, again and again).
            // The channel's own probe waits, quietly, until the host's next step.
            Some((s, next, deadline, now, true, host_next))
                if (s == "open" && next.is_some_and(|n| n <= now))
                    || (s == "half_open" && deadline.is_some_and(|d| d <= now)) =>
            {
                ProbeStep::Wait(
                    host_next
                        .map(|at| until(at, now))
                        .unwrap_or_default()
                        .max(HOST_HELD_RECHECK),
                )
            }
            Some((s, Some(next), _, now, _, _)) if s == "open" => ProbeStep::Wait(until(next, now)),
            Some((s, _, Some(deadline), now, _, _)) if s == "half_open" => {
                ProbeStep::Wait(until(deadline, now))
            }
            // Closed, paused, gone, or half-open with the role empty (no lease to watch).
            _ => ProbeStep::Done,
        });
    };
    let chosen = choose_probe(tx, channel_id, cfg.probe_lease_ms).await?;
    let delivery_id = chosen.map(|(d, _)| d);
    let reason = match (before.as_str(), delivery_id) {
        ("half_open", Some(_)) => "the previous probe's lease expired; another probe takes over",
        ("half_open", None) => {
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
            from_state: Some(&before),
            to_state: Some("half_open"),
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
    Ok(ProbeStep::Started {
        generation,
        delivery_id,
        lease: delivery_id.map(|_| Duration::from_millis(cfg.probe_lease_ms as u64)),
    })
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
            from_state: Some("half_open"),
            to_state: Some("half_open"),
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

/// The winner's effects of entering `closed`: release the whole backlog in one UPDATE, audit,
/// alert (unless `alert_event` is `None`: a tenant's own resume, see
/// [`alerts::manual_alerts`]).
async fn on_closed(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
    alert_event: Option<&str>,
) -> Result<()> {
    let released = release_backlog(tx, t.channel_id).await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(t.tenant_id),
            channel_id: Some(t.channel_id),
            actor,
            action,
            from_state: Some(t.from.as_str()),
            to_state: Some("closed"),
            reason: Some(reason),
            details: serde_json::json!({ "generation": t.generation, "released": released }),
        },
    )
    .await?;
    if let Some(event) = alert_event {
        enqueue_alert(tx, t, event, reason).await?;
    }
    tracing::info!(channel_id = %t.channel_id, released, action, "circuit closed");
    Ok(())
}

/// A manual change of a channel's circuit, by a tenant (pause, resume) or an operator (any of
/// them, plus force open / force close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    /// Park the backlog and stop everything; never probed. From any state but `paused`.
    Pause,
    /// Close a paused channel and release its backlog. From `paused` only.
    Resume,
    /// Open the circuit now (park, probe after the cooldown). From `closed`, `half_open`,
    /// `paused`.
    ForceOpen,
    /// Close the circuit now and release the backlog. From `open`, `half_open`, `paused`.
    ForceClose,
}

impl Manual {
    fn target(self) -> State {
        match self {
            Manual::Pause => State::Paused,
            Manual::Resume | Manual::ForceClose => State::Closed,
            Manual::ForceOpen => State::Open,
        }
    }

    fn allowed_from(self) -> &'static [&'static str] {
        match self {
            Manual::Pause => &["closed", "open", "half_open"],
            Manual::Resume => &["paused"],
            Manual::ForceOpen => &["closed", "half_open", "paused"],
            Manual::ForceClose => &["open", "half_open", "paused"],
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

/// Applies a manual change with one conditional UPDATE (`… AND circuit_state = ANY(allowed)`).
/// Returns the transition, or `None` when the channel is already where the change would put it
/// (so repeating a pause or a resume changes nothing and writes no second audit row). The
/// winner parks or releases the backlog, audits with `actor` and `reason`, and alerts.
pub async fn apply_manual(
    tx: &mut PgConnection,
    channel_id: Uuid,
    change: Manual,
    actor: &str,
    reason: &str,
    cfg: &CircuitConfig,
) -> Result<Option<Transition>> {
    let to = change.target();
    let row: Option<ManualRow> = sqlx::query_as(
        "WITH before AS (SELECT id, circuit_state FROM channels WHERE id = $1 AND deleted_at IS NULL FOR UPDATE)
         UPDATE channels c
         SET circuit_state = $2, circuit_changed_at = now(), circuit_generation = c.circuit_generation + 1,
             probe_delivery_id = NULL, probe_deadline = NULL,
             next_probe_at = CASE WHEN $2 = 'open' THEN greatest(
                 now() + (coalesce(c.cooldown_ms, (SELECT cooldown_ms FROM circuit_defaults), $4)::float8
                          * interval '1 millisecond'),
                 coalesce(c.retry_after_until, now())) END,
             consecutive_failures = CASE WHEN $2 = 'closed' THEN 0 ELSE c.consecutive_failures END,
             probe_failures = CASE WHEN $2 = 'paused' THEN c.probe_failures ELSE 0 END,
             health_unhealthy = CASE WHEN $2 = 'closed' THEN false ELSE c.health_unhealthy END,
             updated_at = now()
         FROM before
         WHERE c.id = before.id AND before.circuit_state = ANY($3)
         RETURNING c.tenant_id, c.circuit_generation, c.consecutive_failures, c.next_probe_at,
                   before.circuit_state AS before_state",
    )
    .bind(channel_id)
    .bind(to.as_str())
    .bind(change.allowed_from())
    .bind(cfg.cooldown_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(ManualRow {
        row,
        before_state: from,
    }) = row
    else {
        return Ok(None);
    };
    let (tenant_id, generation, failures, next_probe_at) = (
        row.tenant_id,
        row.circuit_generation,
        row.consecutive_failures,
        row.next_probe_at,
    );
    let t = Transition {
        channel_id,
        tenant_id,
        from: State::parse(&from)?,
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
            audit::record(
                &mut *tx,
                &audit::Entry {
                    tenant_id: Some(tenant_id),
                    channel_id: Some(channel_id),
                    actor,
                    action: change.action(),
                    from_state: Some(t.from.as_str()),
                    to_state: Some("paused"),
                    reason: Some(reason),
                    details: serde_json::json!({ "generation": generation, "parked": parked }),
                },
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
        "UPDATE channels
         SET circuit_state = 'open', circuit_changed_at = now(), circuit_generation = circuit_generation + 1,
             probe_failures = probe_failures + 1, probe_delivery_id = NULL, probe_deadline = NULL,
             trial_successes = 0, last_failure_at = now(), last_failure_reason = $3,
             next_probe_at = greatest(
                 now() + (least(coalesce(cooldown_ms, (SELECT cooldown_ms FROM circuit_defaults), $4)::float8 * power(2, least(probe_failures + 1, 30)), $5::float8)
                          * interval '1 millisecond'),
                 coalesce(retry_after_until, now())),
             updated_at = now()
         WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $2 AND deleted_at IS NULL
         RETURNING tenant_id, circuit_generation, consecutive_failures, next_probe_at",
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

/// Enqueues the tenant's alert webhook for a transition, if the tenant has an `alert_url`,
/// under the alert policy ([`crate::alerts::on_transition`]: a flapping circuit sends one
/// `channel.flapping` instead, then nothing until it is stable). Every transition alert goes
/// through here, in the winner's transaction. Unique per (channel, generation, event): a
/// transition alerts at most once, whichever node won it.
pub async fn enqueue_alert(
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

/// One health-check pass: for every closed channel with attempts since the later of the window
/// start and its last transition, computes the transient-failure ratio, stores the verdict in
/// `health_unhealthy`, and for each channel whose verdict moved from healthy to unhealthy opens
/// the circuit. Only that move trips, and only attempts since the circuit last changed count, so
/// a channel that was just closed is not re-opened by old failures still in the window. Safe on
/// several nodes at once: the verdict update is conditional on the old verdict, so one node wins
/// each move. Returns the transitions made.
pub async fn health_check(conn: &mut PgConnection, cfg: &CircuitConfig) -> Result<Vec<Transition>> {
    let verdicts: Vec<(Uuid, bool, i64, i64)> = sqlx::query_as(
        "SELECT c.id,
                (count(a.*) >= $2 AND count(a.*) FILTER (WHERE a.outcome = 'transient')::float8
                                      / greatest(count(a.*), 1) >= $3) AS unhealthy,
                count(a.*), count(a.*) FILTER (WHERE a.outcome = 'transient')
         FROM channels c
         JOIN delivery_attempts a
           ON a.channel_id = c.id
          AND a.started_at > greatest(now() - ($1::float8 * interval '1 millisecond'), c.circuit_changed_at)
         WHERE c.circuit_state = 'closed' AND c.deleted_at IS NULL
         GROUP BY c.id",
    )
    .bind(cfg.health_window_ms)
    .bind(cfg.health_min_attempts)
    .bind(cfg.health_failure_ratio)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::new();
    for (channel_id, unhealthy, total, failed) in verdicts {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let moved = sqlx::query(
            "UPDATE channels SET health_unhealthy = $2 WHERE id = $1 AND health_unhealthy <> $2",
        )
        .bind(channel_id)
        .bind(unhealthy)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if moved && unhealthy {
            let reason = format!(
                "health check: {failed} of {total} attempts failed in the window (ratio ≥ {})",
                cfg.health_failure_ratio
            );
            if let Some(t) =
                open_from_closed(&mut tx, channel_id, &reason, ACTOR_CIRCUIT_BREAKER, cfg).await?
            {
                out.push(t);
            }
        }
        tx.commit().await?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(state: &str, probe: Option<Uuid>, retry_after_secs: Option<i64>) -> GateRow {
        let now = Utc::now();
        GateRow {
            circuit_state: state.into(),
            circuit_generation: 7,
            probe_delivery_id: probe,
            retry_after_until: retry_after_secs.map(|s| now + chrono::Duration::seconds(s)),
            consecutive_failures: 2,
            rate_limit: None,
            rate_slot_at: None,
            now,
            host_state: None,
            host_generation: None,
            host_probe_delivery_id: None,
        }
    }

    #[test]
    fn closed_sends_unless_retry_after_is_pending() {
        let d = Uuid::new_v4();
        assert_eq!(
            decide(Some(&gate("closed", None, None)), d),
            Admission::Send {
                probe_generation: None,
                consecutive_failures: 2,
                rate: None,
                host_probe: None
            }
        );
        let Admission::Wait(w) = decide(Some(&gate("closed", None, Some(30))), d) else {
            panic!("expected a wait")
        };
        assert_eq!(w, Duration::from_secs(30));
        assert!(matches!(
            decide(Some(&gate("closed", None, Some(-30))), d),
            Admission::Send { .. }
        ));
    }

    #[test]
    fn open_and_paused_park() {
        let d = Uuid::new_v4();
        assert_eq!(decide(Some(&gate("open", None, None)), d), Admission::Park);
        assert_eq!(
            decide(Some(&gate("paused", None, None)), d),
            Admission::Park
        );
    }

    #[test]
    fn half_open_sends_only_the_probe() {
        let d = Uuid::new_v4();
        let other = Uuid::new_v4();
        assert_eq!(
            decide(Some(&gate("half_open", Some(d), None)), d),
            Admission::Send {
                probe_generation: Some(7),
                consecutive_failures: 2,
                rate: None,
                host_probe: None
            }
        );
        assert_eq!(
            decide(Some(&gate("half_open", Some(other), None)), d),
            Admission::Park
        );
        assert_eq!(
            decide(Some(&gate("half_open", None, None)), d),
            Admission::ClaimProbe(7)
        );
    }

    #[test]
    fn careful_closing_closes_on_the_kth_consecutive_success() {
        // k = 1: the first successful probe closes, as before careful closing.
        assert_eq!(after_success(0, 1), AfterSuccess::Close);
        // k = 3: the probe and the first trial keep it half-open; the second trial closes.
        assert_eq!(after_success(0, 3), AfterSuccess::Trial { passed: 1 });
        assert_eq!(after_success(1, 3), AfterSuccess::Trial { passed: 2 });
        assert_eq!(after_success(2, 3), AfterSuccess::Close);
        // A count already past k (k lowered meanwhile) closes; k below 1 counts as 1.
        assert_eq!(after_success(5, 3), AfterSuccess::Close);
        assert_eq!(after_success(0, 0), AfterSuccess::Close);
    }

    #[test]
    fn close_after_successes_is_checked_and_named() {
        assert!(check_close_after_successes(None).is_ok());
        assert!(check_close_after_successes(Some(1)).is_ok());
        assert!(check_close_after_successes(Some(100)).is_ok());
        for bad in [0, -1, 101] {
            let e = check_close_after_successes(Some(bad)).unwrap_err();
            assert!(e.to_string().contains("close_after_successes"), "{e}");
        }
        let c = CircuitConfig {
            close_after_successes: 0,
            ..Default::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .contains("circuit.close_after_successes"));
    }

    #[test]
    fn a_delivery_goes_only_if_both_the_channel_and_its_host_let_it() {
        let d = Uuid::new_v4();
        let with_host = |state: &str, host: &str, probe: Option<Uuid>| GateRow {
            host_state: Some(host.into()),
            host_generation: Some(9),
            host_probe_delivery_id: probe,
            ..gate(state, None, None)
        };
        assert!(matches!(
            decide(Some(&with_host("closed", "closed", None)), d),
            Admission::Send {
                host_probe: None,
                ..
            }
        ));
        assert_eq!(
            decide(Some(&with_host("closed", "open", None)), d),
            Admission::Park
        );
        assert_eq!(
            decide(Some(&with_host("open", "closed", None)), d),
            Admission::Park
        );
        assert_eq!(
            decide(Some(&with_host("closed", "half_open", None)), d),
            Admission::ClaimHostProbe(9)
        );
        assert!(matches!(
            decide(Some(&with_host("closed", "half_open", Some(d))), d),
            Admission::Send {
                host_probe: Some(9),
                rate: None,
                ..
            }
        ));
        assert_eq!(
            decide(
                Some(&with_host("closed", "half_open", Some(Uuid::new_v4()))),
                d
            ),
            Admission::Park
        );
        // A half-open channel does not claim its own probe while its host holds it.
        assert_eq!(
            decide(Some(&with_host("half_open", "open", None)), d),
            Admission::Park
        );
        assert_eq!(
            decide(Some(&with_host("half_open", "closed", None)), d),
            Admission::ClaimProbe(7)
        );
    }

    #[test]
    fn a_missing_channel_is_gone() {
        assert_eq!(decide(None, Uuid::new_v4()), Admission::Gone);
    }

    #[test]
    fn default_config_is_valid_and_bad_values_are_named() {
        assert!(CircuitConfig::default().validate().is_ok());
        let c = CircuitConfig {
            max_cooldown_ms: 1,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("max_cooldown_ms"));
        let c = CircuitConfig {
            failure_threshold: 0,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("failure_threshold"));
    }
}
