//! Host transitions and their effects: open (from a failure count, a failed probe or the
//! operator) and close (a probe's success or the operator), each parking or releasing the host's
//! jobs, auditing and alerting; the host probe's wake-up and its watcher job.

use super::{
    excuse_failing_channels, forget_failures, HostRow, HostsConfig, State, Transition,
    EVENT_CLOSED, EVENT_OPENED,
};
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::jobs::{AlertArgs, DeliverArgs, HostProbeArgs, JobArgs};
use crate::{Result, JOB_DELIVER};
use breakwater_queue::PRIORITY_URGENT;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Opens host `key` from one of `from` with one conditional UPDATE; `reopen` doubles the
/// cooldown (a failed probe). The winner parks the host's channels, schedules the watcher,
/// audits and alerts.
pub(super) async fn open(
    tx: &mut PgConnection,
    key: &str,
    from: &[State],
    reopen: bool,
    reason: &str,
    actor: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let row: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'open', changed_at = now(), generation = h.generation + 1,
             probe_failures = CASE WHEN $3 THEN h.probe_failures + 1 ELSE 0 END,
             probe_delivery_id = NULL, probe_channel_id = NULL, probe_deadline = NULL,
             last_failure_at = now(), last_failure_reason = $6,
             next_probe_at = now() + (least(coalesce(h.cooldown_ms, $4)::float8
                 * power(2, CASE WHEN $3 THEN least(h.probe_failures + 1, 30) ELSE 0 END), $5::float8)
                 * interval '1 millisecond'),
             updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key AND before.state = ANY($2)
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(&from)
    .bind(reopen)
    .bind(cfg.cooldown_ms)
    .bind(cfg.max_cooldown_ms)
    .bind(reason)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let t = r.into_transition(State::Open);
    forget_failures(tx, key).await?;
    let parked = park_host_jobs(tx, key).await?;
    schedule_watcher(tx, key, t.next_probe_at).await?;
    let action = match (actor == ACTOR_CIRCUIT_BREAKER, reopen) {
        (false, _) => "host.forced_open",
        (true, true) => "host.reopened",
        (true, false) => "host.opened",
    };
    effects(tx, &t, action, actor, reason, EVENT_OPENED, parked).await?;
    tracing::warn!(host_key = %t.host_key, generation = t.generation, parked, reason, "host circuit opened");
    Ok(Some(t))
}

/// The winner's audit row and alerts of a transition. `jobs` is what was parked or released.
pub(super) async fn effects(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
    event: &str,
    jobs: u64,
) -> Result<()> {
    let (channels, tenants): (i64, Vec<Uuid>) = sqlx::query_as(
        "SELECT count(*), coalesce(array_agg(DISTINCT tenant_id), '{}') FROM channels
         WHERE host_key = $1 AND deleted_at IS NULL",
    )
    .bind(&t.host_key)
    .fetch_one(&mut *tx)
    .await?;
    let details = serde_json::json!({
        "host_key": t.host_key,
        "generation": t.generation,
        "channels": channels,
        "tenants": tenants.len(),
        "jobs": jobs,
        "next_probe_at": t.next_probe_at,
    });
    audit::record(
        &mut *tx,
        &audit::Entry::new(actor, action).transition(
            t.from.as_str(),
            t.to.as_str(),
            reason,
            details,
        ),
    )
    .await?;
    // A failed host probe re-opening the host is audited but not alerted (as a channel's: the
    // tenants already heard it open, and a host that stays dead would page every tenant on it at
    // every probe).
    if actor == ACTOR_CIRCUIT_BREAKER && t.from == State::HalfOpen && t.to == State::Open {
        return Ok(());
    }
    // One alert per tenant with channels on the host and an alert URL, unique per (host,
    // generation, tenant, event): whichever node wins the transition, each is enqueued once.
    let with_url: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT t.id, count(*) FROM channels c JOIN tenants t ON t.id = c.tenant_id
         WHERE c.host_key = $1 AND c.deleted_at IS NULL AND t.alert_url IS NOT NULL
         GROUP BY t.id",
    )
    .bind(&t.host_key)
    .fetch_all(&mut *tx)
    .await?;
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *tx)
        .await?;
    for (tenant_id, n) in with_url {
        let args = AlertArgs {
            id: Uuid::now_v7(),
            event: event.to_string(),
            tenant_id,
            channel_id: None,
            host_key: Some(t.host_key.clone()),
            channels: Some(n),
            from_state: Some(t.from.as_str().to_string()),
            to_state: t.to.as_str().to_string(),
            reason: reason.to_string(),
            generation: t.generation,
            at,
            ..AlertArgs::default()
        };
        let key = format!(
            "alert:host:{}:{}:{tenant_id}:{event}",
            t.host_key, t.generation
        );
        crate::jobs::enqueue_alert_job(&mut *tx, &args, key).await?;
    }
    Ok(())
}

/// Parks every job of the host: its gate's parked flag (one row update). Returns the waiting
/// jobs of the host.
pub(super) async fn park_host_jobs(tx: &mut PgConnection, key: &str) -> Result<u64> {
    Ok(breakwater_queue::park_gate(&mut *tx, key).await?)
}

/// Releases the host's gate (one row update); channels whose own circuit is not closed stay
/// parked by their own group flag. Returns the waiting jobs of the host.
pub(super) async fn release_host_jobs(tx: &mut PgConnection, key: &str) -> Result<u64> {
    Ok(breakwater_queue::release_gate(&mut *tx, key).await?)
}

/// How many of a host's channels [`wake_host_probe`] ranks (in turn, then the healthiest, by
/// consecutive failures); the others follow in fetch order.
const PROBE_RANKED_CHANNELS: i64 = 1000;

/// Wakes exactly one waiting delivery of the host (among channels whose own circuit does not
/// park them and that are not under a `Retry-After` hold) as its probe through the gate's one
/// probe slot, and returns `(delivery, channel)`; `None` when none waits: the slot then goes to
/// the next delivery that arrives, which claims the role in the admission.
///
/// The channels take the role **in turn** since the host last closed
/// (`host_circuits.probed_channels`, appended by `set_probe` and [`claim_probe`]): first the
/// channels not tried yet, the one with the fewest consecutive failures first (ties: channel
/// id), so a host that answers its healthy channels is tested with one of them, not with a
/// channel that fails on its own; then the one tried longest ago. The delivery is that channel's
/// oldest waiting one. Why not simply the oldest delivery of the whole host, or the fewest
/// failures alone: both keep choosing channels that fail for themselves (a failed probe adds
/// one failure to a channel with few), while a channel that has recovered, with more failures,
/// waits minutes as the cooldown doubles.
///
/// A channel under a hold is never chosen: it would not send the probe before the hold ends (up
/// to `circuit.retry_after_cap_ms`, 1 h by default) and every channel of the host would wait
/// for it (a held probe would be re-taken by the same held delivery at each lease, keeping the
/// host half-open for minutes).
pub(super) async fn wake_host_probe(
    tx: &mut PgConnection,
    key: &str,
) -> Result<Option<(Uuid, Uuid)>> {
    let ranked: Vec<Uuid> = sqlx::query_scalar(
        "SELECT c.id FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.host_key = $1 AND c.deleted_at IS NULL AND c.circuit_state = 'closed'
           AND NOT coalesce(c.retry_after_until > now(), false)
         ORDER BY coalesce(array_position(h.probed_channels, c.id), 0), c.consecutive_failures,
                  c.id
         LIMIT $2",
    )
    .bind(key)
    .bind(PROBE_RANKED_CHANNELS)
    .fetch_all(&mut *tx)
    .await?;
    let held: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM channels
         WHERE host_key = $1 AND deleted_at IS NULL AND retry_after_until > now()",
    )
    .bind(key)
    .fetch_all(&mut *tx)
    .await?;
    let woken = breakwater_queue::wake_one_in_gate(
        &mut *tx,
        key,
        JOB_DELIVER,
        PRIORITY_URGENT,
        &ranked,
        &held,
    )
    .await?;
    Ok(woken.and_then(|(_, channel, args)| {
        let d = DeliverArgs::from_json(&args).ok()?.delivery_id;
        Some((d, channel))
    }))
}

/// The unique key of host `key`'s probe watcher job.
pub(crate) fn watcher_key(key: &str) -> String {
    format!("host_probe:{key}")
}

/// Makes sure the host's probe watcher (unique per host) runs no later than `at`. It has no
/// group: a host is shared by tenants (see `crate::jobs`).
pub(super) async fn schedule_watcher(
    tx: &mut PgConnection,
    key: &str,
    at: Option<DateTime<Utc>>,
) -> Result<()> {
    let args = HostProbeArgs {
        host_key: key.to_string(),
    };
    crate::jobs::schedule_watcher(tx, &args, watcher_key(key), at, None).await
}

/// Closes host `key` from one of `from` (and, for a probe result, `generation`, the probe's
/// channel `probe_channel`): one conditional UPDATE; the winner excuses the channels still
/// failing on their own ([`excuse_failing_channels`]), releases the host's channels, audits and
/// alerts.
pub(super) async fn close(
    tx: &mut PgConnection,
    key: &str,
    from: &[State],
    probe: Option<(i64, Uuid)>,
    reason: &str,
    actor: &str,
) -> Result<Option<Transition>> {
    let (generation, probe_channel) = probe.unzip();
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let row: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state, generation FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'closed', changed_at = now(), generation = h.generation + 1,
             probe_failures = 0, next_probe_at = NULL, probe_deadline = NULL,
             probe_delivery_id = NULL, probe_channel_id = NULL, probed_channels = '{}',
             updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key AND before.state = ANY($2)
           AND ($3::int8 IS NULL OR before.generation = $3)
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(&from)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let t = r.into_transition(State::Closed);
    let excused = excuse_failing_channels(tx, key, probe_channel).await?;
    let released = release_host_jobs(tx, key).await?;
    let action = if actor == ACTOR_CIRCUIT_BREAKER {
        "host.closed"
    } else {
        "host.forced_closed"
    };
    effects(tx, &t, action, actor, reason, EVENT_CLOSED, released).await?;
    tracing::info!(host_key = %t.host_key, generation = t.generation, released, excused, "host circuit closed");
    Ok(Some(t))
}
