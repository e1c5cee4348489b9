//! An attempt's result for its host circuit: counting failures (opening the host through
//! [`open`]) or handing a host probe's answer to the watcher's results.

use super::{open, probe_failed, probe_succeeded, HostsConfig, State, Transition};
use crate::audit::ACTOR_CIRCUIT_BREAKER;
use crate::outcome::Class;
use crate::Result;
use sqlx::PgConnection;
use uuid::Uuid;
/// Records the result of one attempt of `delivery_id` of channel `channel_id` for its host
/// circuit: called by [`crate::circuit::after_attempt`], in the transaction that records the
/// attempt, before the channel circuit's calls. The locks of that transaction, in order: the
/// channel row (`FOR NO KEY UPDATE`, taken before the attempt is recorded whenever a transition
/// may follow), the channel's job group row (here, when a host
/// transition may follow), the host row, and the host's gate row (a host transition, here).
///
/// - the host probe (`host_probe` = its generation): a transient failure re-opens the host, any
///   other answer closes it;
/// - any other delivery: a transient failure is counted (distinct channels in the window, not
///   excused, see the module doc) and may open the host; a success of a channel that had
///   failures (`failures_before > 0`) removes its failure row, and with it any excuse (no write
///   otherwise).
///
/// `class` is the answer's class for the host ([`crate::outcome::host_class`]: a 429 is not a
/// host failure).
///
/// Returns the transition if this call made one.
pub async fn record_result(
    tx: &mut PgConnection,
    channel_id: Uuid,
    host_probe: Option<i64>,
    class: Class,
    failures_before: i32,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    if host_probe.is_some() || class == Class::Transient {
        // Lock order group row → host row → gate row (the fetch and the slot-release trigger
        // take group rows before gate rows): take the channel's group row now, before a
        // transition here parks or releases the host's gate, so a fetch holding this group and
        // waiting for the gate cannot deadlock with us.
        breakwater_queue::lock_group(&mut *tx, channel_id).await?;
    }
    match (host_probe, class) {
        (Some(generation), Class::Transient) => {
            probe_failed(tx, channel_id, generation, reason, cfg).await
        }
        (Some(generation), _) => probe_succeeded(tx, channel_id, generation).await,
        (None, Class::Transient) => {
            record_failure(tx, channel_id, failures_before, reason, cfg).await
        }
        (None, Class::Success) if failures_before > 0 => {
            sqlx::query(
                "DELETE FROM host_failures f USING channels c
                 WHERE c.id = $1 AND f.host_key = c.host_key AND f.channel_id = $1",
            )
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Counts one transient failure of channel `channel_id` against its host and opens the host
/// when distinct failing channels in the window reach the threshold and, on a host several
/// tenants use, they belong to at least two tenants. A channel excused at the host's last close
/// (it kept failing while the host was proven up, [`excuse_failing_channels`]) counts nothing
/// until it succeeds once: its failure row keeps the excuse while this failure continues its
/// streak (`failures_before > 0`), and loses it when the failure starts a new one.
pub(super) async fn record_failure(
    tx: &mut PgConnection,
    channel_id: Uuid,
    failures_before: i32,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    // The host row's lock serialises the counting of one host's failures (see the module doc);
    // a host that is not closed does not count.
    let host: Option<(String, i32)> = sqlx::query_as(
        "SELECT h.host_key, coalesce(h.failure_threshold, $2)
         FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND h.state = 'closed'
         FOR UPDATE OF h",
    )
    .bind(channel_id)
    .bind(cfg.failure_threshold)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((key, threshold)) = host else {
        return Ok(None);
    };
    // The upsert's row is not visible to the count in the same statement: this channel is the
    // `1 +`, counted only when its row is not excused.
    let (excused, distinct): (bool, i64) = sqlx::query_as(
        "WITH up AS (
             INSERT INTO host_failures (host_key, channel_id, failed_at) VALUES ($1, $2, now())
             ON CONFLICT (host_key, channel_id)
             DO UPDATE SET failed_at = now(), excused = host_failures.excused AND $4
             RETURNING excused)
         SELECT (SELECT excused FROM up), 1 + count(*) FROM host_failures
         WHERE host_key = $1 AND channel_id <> $2 AND NOT excused
           AND failed_at > now() - ($3::float8 * interval '1 millisecond')",
    )
    .bind(&key)
    .bind(channel_id)
    .bind(cfg.failure_window_ms)
    .bind(failures_before > 0)
    .fetch_one(&mut *tx)
    .await?;
    if excused || distinct < threshold as i64 {
        return Ok(None);
    }
    // A host several tenants use opens only on failures of at least two of them: one tenant's
    // endpoints alone (failing paths of a host that answers everyone else) must not park every
    // other tenant on it. A host only one tenant uses opens on its channels' failures.
    let (failing_tenants, tenants): (i64, i64) = sqlx::query_as(
        "SELECT count(DISTINCT c.tenant_id) FILTER (WHERE f.channel_id IS NOT NULL),
                count(DISTINCT c.tenant_id)
         FROM channels c
         LEFT JOIN host_failures f
                ON f.host_key = $1 AND f.channel_id = c.id
               AND f.failed_at > now() - ($2::float8 * interval '1 millisecond') AND NOT f.excused
         WHERE c.host_key = $1 AND c.deleted_at IS NULL",
    )
    .bind(&key)
    .bind(cfg.failure_window_ms)
    .fetch_one(&mut *tx)
    .await?;
    if failing_tenants < tenants.min(2) {
        return Ok(None);
    }
    let why = format!(
        "transient failures from {distinct} distinct channels of {failing_tenants} tenant(s) within {} ms (threshold {threshold}); last: {reason}",
        cfg.failure_window_ms
    );
    open(
        tx,
        &key,
        &[State::Closed],
        false,
        &why,
        ACTOR_CIRCUIT_BREAKER,
        cfg,
    )
    .await
}
