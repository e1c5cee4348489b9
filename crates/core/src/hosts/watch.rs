//! The host probe watcher's step and the host probe's results (closing or reopening the host
//! through [`close`] and [`open`]).

use super::{close, open, wake_host_probe, HostRow, HostsConfig, State, Transition};
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;
/// What the watcher reads when there is nothing to claim: state, next probe time, probe
/// deadline, database now.
pub(super) type WatchRow = (
    State,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

/// What the host probe watcher should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStep {
    /// The host is closed: the watcher is done.
    Done,
    /// Look again after this long (database clock).
    Wait(Duration),
}

/// The host probe watcher's step (in the caller's transaction):
/// - `open` and the cooldown is over → `half_open` (one conditional UPDATE: generation + 1, a
///   lease), audited once, and one waiting delivery is woken as the probe (or the role waits
///   for the next delivery that arrives);
/// - `half_open`, lease expired, a probe was chosen → a new probe takes over (a transition,
///   audited once);
/// - `half_open`, lease expired, no probe ever chosen → no transition and no audit (see the
///   module doc's lease rule): look for a waiting delivery again, extend the lease;
/// - otherwise wait until the next moment, or stop when closed.
///
/// Returns the step and the transition to count once the caller commits, if one was made.
pub async fn watch(
    tx: &mut PgConnection,
    key: &str,
    cfg: &HostsConfig,
) -> Result<(WatchStep, Option<audit::Transitioned>)> {
    let lease = Duration::from_millis(cfg.probe_lease_ms as u64);
    // A lease over with no probe ever chosen: extend it quietly, try to wake one again.
    let idle: Option<i64> = sqlx::query_scalar(
        "UPDATE host_circuits
         SET probe_deadline = now() + ($2::float8 * interval '1 millisecond')
         WHERE host_key = $1 AND state = 'half_open' AND probe_delivery_id IS NULL
           AND probe_deadline <= now()
         RETURNING generation",
    )
    .bind(key)
    .bind(cfg.probe_lease_ms)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(generation) = idle {
        set_probe(tx, key, generation).await?;
        return Ok((WatchStep::Wait(lease), None));
    }
    let claimed: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'half_open', changed_at = now(), generation = h.generation + 1,
             probe_delivery_id = NULL, probe_channel_id = NULL,
             probe_deadline = now() + ($2::float8 * interval '1 millisecond'), updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key
           AND ((h.state = 'open' AND h.next_probe_at <= now())
             OR (h.state = 'half_open' AND h.probe_deadline <= now()))
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(cfg.probe_lease_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = claimed else {
        let row: Option<WatchRow> =
            sqlx::query_as(
                "SELECT state, next_probe_at, probe_deadline, now() FROM host_circuits WHERE host_key = $1",
            )
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        let until = |at: DateTime<Utc>, now: DateTime<Utc>| {
            WatchStep::Wait((at - now).to_std().unwrap_or(Duration::ZERO))
        };
        let step = match row {
            Some((State::Open, Some(next), _, now)) => until(next, now),
            Some((State::HalfOpen, _, Some(deadline), now)) => until(deadline, now),
            _ => WatchStep::Done,
        };
        return Ok((step, None));
    };
    let probe = set_probe(tx, key, r.generation).await?;
    let t = r.into_transition(State::HalfOpen);
    let reason = if t.from == State::HalfOpen {
        "the host probe's lease expired; another probe takes over"
    } else {
        "cooldown over; probing the host"
    };
    let details = serde_json::json!({
        "host_key": t.host_key,
        "generation": t.generation,
        "probe_delivery_id": probe.map(|(d, _)| d),
    });
    audit::record(
        &mut *tx,
        &audit::Entry {
            channel_id: probe.map(|(_, c)| c),
            ..audit::Entry::new(ACTOR_CIRCUIT_BREAKER, "host.probe_started").transition(
                t.from.as_str(),
                t.to.as_str(),
                reason,
                details,
            )
        },
    )
    .await?;
    tracing::info!(host_key = %t.host_key, generation = t.generation, probe = ?probe, "host probe started");
    Ok((WatchStep::Wait(lease), Some(t.counted())))
}

/// [`watch`] without the transition to count: for callers that do not count metrics.
pub async fn watch_step(tx: &mut PgConnection, key: &str, cfg: &HostsConfig) -> Result<WatchStep> {
    Ok(watch(tx, key, cfg).await?.0)
}

/// Wakes one waiting delivery of the host and records it as the probe of `generation` (if the
/// role is still free), its channel as the last tried ([`wake_host_probe`]'s turn).
pub(super) async fn set_probe(
    tx: &mut PgConnection,
    key: &str,
    generation: i64,
) -> Result<Option<(Uuid, Uuid)>> {
    let woken = wake_host_probe(tx, key).await?;
    if let Some((d, c)) = woken {
        sqlx::query(concat!(
            "UPDATE host_circuits SET probe_delivery_id = $2, probe_channel_id = $3, ",
            probe_turn_sql!("$3"),
            " WHERE host_key = $1 AND generation = $4 AND probe_delivery_id IS NULL",
        ))
        .bind(key)
        .bind(d)
        .bind(c)
        .bind(generation)
        .execute(&mut *tx)
        .await?;
    }
    Ok(woken)
}

/// The host probe of `generation` answered: closes the host (conditional on `half_open` and
/// the generation) and, for the winner, releases its channels, audits and alerts.
pub(super) async fn probe_succeeded(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
) -> Result<Option<Transition>> {
    let key: Option<String> = sqlx::query_scalar("SELECT host_key FROM channels WHERE id = $1")
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?
        .flatten();
    let Some(key) = key else { return Ok(None) };
    close(
        tx,
        &key,
        &[State::HalfOpen],
        Some((generation, channel_id)),
        "host probe answered",
        ACTOR_CIRCUIT_BREAKER,
    )
    .await
}

pub(super) async fn probe_failed(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    let key: Option<String> = sqlx::query_scalar(
        "SELECT h.host_key FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND h.state = 'half_open' AND h.generation = $2",
    )
    .bind(channel_id)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(key) = key else { return Ok(None) };
    // Conditional on the generation too: `open` re-checks the state under the row lock; a
    // takeover in between bumped the generation, checked here first.
    let still: Option<i64> = sqlx::query_scalar(
        "SELECT generation FROM host_circuits WHERE host_key = $1 AND state = 'half_open' AND generation = $2 FOR UPDATE",
    )
    .bind(&key)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    if still.is_none() {
        return Ok(None);
    }
    let why = format!("host probe failed: {reason}");
    open(
        tx,
        &key,
        &[State::HalfOpen],
        true,
        &why,
        ACTOR_CIRCUIT_BREAKER,
        cfg,
    )
    .await
}
