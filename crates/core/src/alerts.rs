//! The alert policy: which circuit events page a tenant's on-call, and how often. Every transition alert of a channel circuit comes through [`on_transition`] (called
//! by [`crate::circuit::enqueue_alert`], in the transaction of the transition's winner); the
//! endpoint-rejection streak ([`endpoint_rejected`]) and the end of flapping ([`flapping_step`])
//! alert from here too.
//!
//! **Flapping.** A circuit that made more than `flapping_transitions` alerting transitions
//! within `flapping_window_ms` is *flapping*: the transition that crossed the line sends one
//! `channel.flapping` alert instead of its own, and every further transition of that circuit is
//! suppressed (audited as always, not alerted). Each suppressed transition pushes a unique timer
//! job (`flapping:<channel>`) to `last transition + window` (database clock); when it fires and
//! the circuit has made no transition for the window, one `channel.flapping_ended` alert gives
//! the circuit's real state then and the number of transitions that were not alerted one by one
//! (`suppressed`, the one that began flapping included). Counted transitions are the ones that
//! alert: opened, closed, and manual changes that alert (a tenant's own pause or resume counts
//! only when the tenant asked for those alerts, [`manual_alerts`]); a probe start or a failed
//! probe's re-opening alerts nothing and counts nothing.
//!
//! **Why this holds on several nodes.** The policy state (`circuit_alert_state`) is written only
//! by the winner of a transition, which holds the channel row's lock (the transition's
//! conditional UPDATE) until it commits; the timer takes a share lock on the same row first. So
//! the transitions of one circuit and the timer's "quiet for the window" check are serialised:
//! one alert per transition, one `channel.flapping`, one `channel.flapping_ended`, whichever node
//! makes them. The numbers come from the `alert_policy` row, which every node writes from its
//! `[alerts]` configuration at start ([`install_policy`]), so every node applies the same ones.
//!
//! **Endpoint rejections.** A 401 or 403 never moves the circuit, but it is recorded on the
//! channel (`last_failure_at`, `last_failure_reason`) and starts a *streak* (`rejected_since`),
//! by one conditional UPDATE (`WHERE rejected_since IS NULL`): its single winner writes one audit
//! row and one `channel.endpoint_rejected` alert. The next success ends the streak.
//!
//! **Bodies.** The job args are the alert; the worker sends them as `{"type", "timestamp",
//! "data"}` (see `breakwater_worker::alert::body`). `at` is the database's `now()` of the
//! transaction that decided the alert.

use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::Result;
use breakwater_queue::NewJob;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use std::time::Duration;
use uuid::Uuid;

pub mod events;
mod rejection;
pub(crate) use rejection::{endpoint_rejected, rejection_cleared};

pub(crate) use crate::jobs::JOB_FLAPPING_WATCH;
pub use crate::jobs::QUEUE_ALERTS;
use crate::jobs::{AlertArgs, AlertHost, FlappingWatchArgs, JobArgs, TenantGroup};

/// The alert a flapping circuit sends once, instead of its transition alert.
pub(crate) const EVENT_FLAPPING: &str = "channel.flapping";
/// The alert a flapping circuit sends once after it was quiet for the window.
pub(crate) const EVENT_FLAPPING_ENDED: &str = "channel.flapping_ended";
/// The alert of the first 401/403 of a streak.
pub(crate) const EVENT_ENDPOINT_REJECTED: &str = "channel.endpoint_rejected";
/// The audit action of the first 401/403 of a streak.
pub(crate) const ACTION_ENDPOINT_REJECTED: &str = "channel.endpoint_rejected";

/// Alert settings (`[alerts]` in `config/default.toml`; environment
/// `BREAKWATER_ALERTS__<FIELD>`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AlertConfig {
    /// A circuit that makes more than this many alerting transitions within
    /// `flapping_window_ms` is flapping: one `channel.flapping` alert, then silence. At least 1.
    pub flapping_transitions: i32,
    /// The flapping window, and the quiet time (no transition) that ends flapping, ms.
    pub flapping_window_ms: i64,
}

impl Default for AlertConfig {
    fn default() -> Self {
        Self {
            flapping_transitions: 5,
            flapping_window_ms: 600_000,
        }
    }
}

impl AlertConfig {
    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.flapping_transitions < 1 {
            return Err("alerts.flapping_transitions must be at least 1".into());
        }
        if self.flapping_window_ms <= 0 {
            return Err("alerts.flapping_window_ms must be greater than 0".into());
        }
        Ok(())
    }
}

/// Writes `cfg` as the cluster's policy (the `alert_policy` row). Every node does it at start;
/// run every node with the same `[alerts]` settings (the last one started wins).
pub async fn install_policy(exec: impl PgExecutor<'_>, cfg: &AlertConfig) -> Result<()> {
    sqlx::query(
        "INSERT INTO alert_policy (singleton, flapping_transitions, flapping_window_ms)
         VALUES (true, $1, $2)
         ON CONFLICT (singleton) DO UPDATE
         SET flapping_transitions = EXCLUDED.flapping_transitions,
             flapping_window_ms = EXCLUDED.flapping_window_ms, updated_at = now()
         WHERE (alert_policy.flapping_transitions, alert_policy.flapping_window_ms)
               IS DISTINCT FROM (EXCLUDED.flapping_transitions, EXCLUDED.flapping_window_ms)",
    )
    .bind(cfg.flapping_transitions)
    .bind(cfg.flapping_window_ms)
    .execute(exec)
    .await?;
    Ok(())
}

/// The policy in force (the `alert_policy` row; the defaults should the row be missing, so a
/// transition never fails for want of it).
pub async fn policy(exec: impl PgExecutor<'_>) -> Result<AlertConfig> {
    let row: Option<(i32, i64)> =
        sqlx::query_as("SELECT flapping_transitions, flapping_window_ms FROM alert_policy")
            .fetch_optional(exec)
            .await?;
    Ok(row.map_or_else(AlertConfig::default, |(n, w)| AlertConfig {
        flapping_transitions: n,
        flapping_window_ms: w,
    }))
}

/// A transition of a channel's circuit that would alert, as [`on_transition`] needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Change<'a> {
    /// Channel.
    pub channel_id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// State before (`closed`, `open`, `half_open`, `paused`).
    pub from: &'a str,
    /// State after.
    pub to: &'a str,
    /// Circuit generation after the transition.
    pub generation: i64,
    /// Consecutive failures at the transition.
    pub failures: i32,
    /// The alert event of the transition, e.g. `channel.circuit_opened`.
    pub event: &'a str,
    /// Why (no secret, no URL path: the circuit's reasons never carry one).
    pub reason: &'a str,
}

/// What the flapping policy does with one alerting transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Alert it: the circuit is not flapping.
    Alert,
    /// This transition is the one past the limit: send one `channel.flapping` instead.
    StartFlapping,
    /// The circuit is flapping: no alert (the audit row is written as always).
    Suppress,
}

/// The pure rule, given the policy state after recording the transition: whether the circuit
/// is flapping now, and how many transitions were suppressed since it began (the one that began
/// it counts 1).
pub(crate) fn verdict(flapping: bool, suppressed: i32) -> Verdict {
    match (flapping, suppressed) {
        (false, _) => Verdict::Alert,
        (true, 1) => Verdict::StartFlapping,
        (true, _) => Verdict::Suppress,
    }
}

/// Whether a manual pause or resume by `actor` alerts: an operator's always does; a tenant's own
/// (actor `tenant:<key>`) only when the tenant set `alert_on_manual`. Force open and force close
/// are operator actions and always alert (the caller does not ask).
pub(crate) fn manual_alerts(actor: &str, alert_on_manual: bool) -> bool {
    !audit::is_tenant_actor(actor) || alert_on_manual
}

/// [`manual_alerts`] for tenant `tenant_id`'s setting, read in the caller's transaction.
pub(crate) async fn manual_change_alerts(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    actor: &str,
) -> Result<bool> {
    if !audit::is_tenant_actor(actor) {
        return Ok(true);
    }
    let on: Option<bool> = sqlx::query_scalar("SELECT alert_on_manual FROM tenants WHERE id = $1")
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?;
    Ok(manual_alerts(actor, on.unwrap_or(false)))
}

/// The unique key of channel `channel_id`'s flapping timer.
pub(crate) fn flapping_key(channel_id: Uuid) -> String {
    format!("flapping:{channel_id}")
}

/// Whether the tenant has somewhere to send alerts (a deleted tenant has not).
async fn has_alert_url(exec: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<bool> {
    let has: Option<bool> = sqlx::query_scalar(
        "SELECT alert_url IS NOT NULL FROM tenants WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?;
    Ok(has == Some(true))
}

/// Records one alerting transition under the flapping policy and enqueues what it decides: the
/// transition's own alert, one `channel.flapping`, or nothing (and then pushes the flapping timer
/// to last transition + window). Runs in the transition winner's transaction, which holds the
/// channel row; nothing happens when the tenant has no alert URL. Returns the verdict (`None`
/// without an alert URL).
///
/// Alert job args: `{id, event, tenant_id, channel_id, from_state, to_state, reason,
/// failure_count, generation, transition_count, flapping_window_ms, suppressed?, at}`, where
/// `transition_count` is the circuit's alerting transitions within the window (this one
/// included) and `at` the database time of the transition. Unique per (channel, generation,
/// event): a transition alerts at most once, whichever node won it.
pub(crate) async fn on_transition(
    tx: &mut PgConnection,
    c: &Change<'_>,
) -> Result<Option<Verdict>> {
    if !has_alert_url(&mut *tx, c.tenant_id).await? {
        return Ok(None);
    }
    let policy = policy(&mut *tx).await?;
    // The channel row is locked by the caller's transition, so no other transition of this
    // circuit (on any node) runs this upsert before we commit: the window and the flapping flag
    // are read and written by one transition at a time.
    let (in_window, flapping, suppressed, at, quiet_at): (
        i32,
        bool,
        i32,
        DateTime<Utc>,
        DateTime<Utc>,
    ) = sqlx::query_as(
        "INSERT INTO circuit_alert_state AS s (channel_id, recent, last_transition_at)
         VALUES ($1, ARRAY[now()], now())
         ON CONFLICT (channel_id) DO UPDATE SET
             recent = (SELECT coalesce(array_agg(k.x ORDER BY k.x), '{}')
                       FROM (SELECT x FROM unnest(s.recent) AS x
                             WHERE x > now() - $3::float8 * interval '1 millisecond'
                             ORDER BY x DESC LIMIT 999) k) || now(),
             last_transition_at = now(),
             flapping_since = CASE
                 WHEN s.flapping_since IS NOT NULL THEN s.flapping_since
                 WHEN (SELECT count(*) FROM unnest(s.recent) AS x
                       WHERE x > now() - $3::float8 * interval '1 millisecond') + 1 > $2 THEN now()
             END,
             suppressed = CASE
                 WHEN s.flapping_since IS NOT NULL
                   OR (SELECT count(*) FROM unnest(s.recent) AS x
                       WHERE x > now() - $3::float8 * interval '1 millisecond') + 1 > $2
                 THEN s.suppressed + 1 ELSE 0
             END
         RETURNING cardinality(recent), flapping_since IS NOT NULL, suppressed, now(),
                   now() + $3::float8 * interval '1 millisecond'",
    )
    .bind(c.channel_id)
    .bind(policy.flapping_transitions)
    .bind(policy.flapping_window_ms)
    .fetch_one(&mut *tx)
    .await?;
    let v = verdict(flapping, suppressed);
    let mut args = AlertArgs {
        from_state: Some(c.from.to_string()),
        to_state: c.to.to_string(),
        reason: c.reason.to_string(),
        failure_count: Some(c.failures),
        generation: c.generation,
        transition_count: Some(in_window),
        flapping_window_ms: Some(policy.flapping_window_ms),
        at,
        ..channel_alert(tx, c.event, c.tenant_id, c.channel_id).await?
    };
    match v {
        Verdict::Alert => {
            enqueue(tx, c.channel_id, c.generation, c.event, args).await?;
        }
        Verdict::StartFlapping => {
            args.event = EVENT_FLAPPING.to_string();
            args.suppressed = Some(suppressed);
            args.reason = format!(
                "{in_window} transitions within {} ms (more than {}); further transition alerts \
                 are suppressed until the circuit is stable for the window; last: {}",
                policy.flapping_window_ms, policy.flapping_transitions, c.reason
            );
            enqueue(tx, c.channel_id, c.generation, EVENT_FLAPPING, args).await?;
            push_flapping_timer(tx, c.tenant_id, c.channel_id, quiet_at).await?;
        }
        Verdict::Suppress => {
            push_flapping_timer(tx, c.tenant_id, c.channel_id, quiet_at).await?;
            tracing::debug!(channel_id = %c.channel_id, event = c.event, suppressed, "alert suppressed: circuit is flapping");
        }
    }
    Ok(Some(v))
}

/// A new alert (fresh id) of `event` about `tenant_id`'s channel `channel_id`, with the channel's
/// host circuit ([`channel_host`]); the caller sets the rest with struct update syntax.
async fn channel_alert(
    tx: &mut PgConnection,
    event: &str,
    tenant_id: Uuid,
    channel_id: Uuid,
) -> Result<AlertArgs> {
    Ok(AlertArgs {
        id: Uuid::now_v7(),
        event: event.to_string(),
        tenant_id,
        channel_id: Some(channel_id),
        host: Some(channel_host(tx, channel_id).await?),
        ..AlertArgs::default()
    })
}

/// The channel's host circuit for an alert body: `{"host_key", "state"}` (`state` of the host
/// circuit, `closed` when it has no row yet), or `None` (`null`) for a channel without a host key.
async fn channel_host(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<AlertHost>> {
    let row: Option<(Option<String>, Option<crate::hosts::State>)> = sqlx::query_as(
        "SELECT c.host_key, h.state FROM channels c
         LEFT JOIN host_circuits h ON h.host_key = c.host_key WHERE c.id = $1",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(match row {
        Some((Some(host_key), state)) => Some(AlertHost {
            host_key,
            state: state
                .unwrap_or(crate::hosts::State::Closed)
                .as_str()
                .to_string(),
        }),
        _ => None,
    })
}

/// Enqueues alert `args` of `event`, unique per (channel, generation, event).
async fn enqueue(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    event: &str,
    args: AlertArgs,
) -> Result<()> {
    let key = format!("alert:{channel_id}:{generation}:{event}");
    crate::jobs::enqueue_alert_job(tx, &args, key).await
}

/// Makes the channel's flapping timer due at `at` (database time), later or earlier. A new
/// timer goes in its tenant's timer group ([`TenantGroup::AlertTimers`]).
async fn push_flapping_timer(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    channel_id: Uuid,
    at: DateTime<Utc>,
) -> Result<()> {
    let args = FlappingWatchArgs { channel_id }.to_json();
    let key = flapping_key(channel_id);
    let job = timer_job(tx, tenant_id, JOB_FLAPPING_WATCH, args, key, at).await?;
    breakwater_queue::reschedule_unique(&mut *tx, &job).await?;
    Ok(())
}

/// A channel's alert timer job of `kind` (`args`, unique key `key`), due at `at` (database
/// time), in its tenant's timer group ([`TenantGroup::AlertTimers`]); the caller schedules it
/// (sooner only, or either way).
pub(crate) async fn timer_job(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    kind: &str,
    args: serde_json::Value,
    key: String,
    at: DateTime<Utc>,
) -> Result<NewJob> {
    let job = NewJob::new(QUEUE_ALERTS, kind, args)
        .unique_key(key)
        .max_attempts(1_000);
    let mut job = TenantGroup::AlertTimers
        .assign(&mut *tx, tenant_id, job)
        .await?;
    job.scheduled_at = Some(at);
    Ok(job)
}

/// What the flapping timer should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlappingStep {
    /// The circuit is not flapping (any more), or the channel is gone: the timer is done.
    Done,
    /// Still flapping: look again after this long (database clock).
    Wait(Duration),
    /// This call ended the flapping and enqueued `channel.flapping_ended`.
    Ended {
        /// Transitions not alerted one by one during the flapping.
        suppressed: i32,
    },
}

/// The flapping timer's step for a channel, in the caller's transaction: if the circuit has
/// made no transition for the window, ends the flapping (one conditional UPDATE, `WHERE
/// flapping_since IS NOT NULL AND last_transition_at <= now() - window`) and enqueues one
/// `channel.flapping_ended` alert with the circuit's state now and the suppressed count.
///
/// Takes a share lock on the channel row first: a transition (which updates that row) either
/// committed before, and is seen, or waits until this step commits, and then counts in a fresh
/// window.
pub async fn flapping_step(tx: &mut PgConnection, channel_id: Uuid) -> Result<FlappingStep> {
    let channel: Option<(Uuid, String, i64, i32)> = sqlx::query_as(
        "SELECT tenant_id, circuit_state, circuit_generation, consecutive_failures
         FROM channels WHERE id = $1 AND deleted_at IS NULL FOR SHARE",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((tenant_id, state, generation, failures)) = channel else {
        return Ok(FlappingStep::Done);
    };
    let policy = policy(&mut *tx).await?;
    let ended: Option<(i32, DateTime<Utc>, i32, DateTime<Utc>)> = sqlx::query_as(
        "WITH before AS (
             SELECT channel_id, suppressed, flapping_since, last_transition_at, recent
             FROM circuit_alert_state WHERE channel_id = $1 FOR UPDATE
         )
         UPDATE circuit_alert_state s SET flapping_since = NULL, suppressed = 0
         FROM before
         WHERE s.channel_id = before.channel_id AND before.flapping_since IS NOT NULL
           AND before.last_transition_at <= now() - $2::float8 * interval '1 millisecond'
         RETURNING before.suppressed, before.flapping_since,
                   (SELECT count(*) FROM unnest(before.recent) AS x
                    WHERE x > before.last_transition_at - $2::float8 * interval '1 millisecond')::int4,
                   now()",
    )
    .bind(channel_id)
    .bind(policy.flapping_window_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((suppressed, since, in_window, at)) = ended else {
        let waiting: Option<(bool, f64)> = sqlx::query_as(
            "SELECT flapping_since IS NOT NULL,
                    extract(epoch FROM last_transition_at
                        + $2::float8 * interval '1 millisecond' - now())::float8
             FROM circuit_alert_state WHERE channel_id = $1",
        )
        .bind(channel_id)
        .bind(policy.flapping_window_ms)
        .fetch_optional(&mut *tx)
        .await?;
        return Ok(match waiting {
            Some((true, secs)) => FlappingStep::Wait(Duration::from_secs_f64(secs.max(0.0))),
            _ => FlappingStep::Done,
        });
    };
    let quiet_ms = policy.flapping_window_ms;
    let reason = format!(
        "stable for {quiet_ms} ms: flapping since {since} is over; {suppressed} transitions were \
         not alerted one by one; the circuit is {state}"
    );
    audit::record(
        &mut *tx,
        &audit::Entry {
            reason: Some(&reason),
            details: serde_json::json!({
                "suppressed": suppressed,
                "flapping_since": since,
                "state": state,
            }),
            ..audit::Entry::channel(
                tenant_id,
                channel_id,
                ACTOR_CIRCUIT_BREAKER,
                "alerts.flapping_ended",
            )
        },
    )
    .await?;
    if has_alert_url(&mut *tx, tenant_id).await? {
        let args = AlertArgs {
            from_state: None,
            to_state: state.to_string(),
            reason,
            failure_count: Some(failures),
            generation,
            transition_count: Some(in_window),
            flapping_window_ms: Some(quiet_ms),
            suppressed: Some(suppressed),
            flapping_since: Some(since),
            at,
            ..channel_alert(tx, EVENT_FLAPPING_ENDED, tenant_id, channel_id).await?
        };
        enqueue(tx, channel_id, generation, EVENT_FLAPPING_ENDED, args).await?;
    }
    Ok(FlappingStep::Ended { suppressed })
}

#[cfg(test)]
mod tests;
