//! An attempt's result for its host circuit: counting failures, opening, and the effects of a
//! transition (park or release the host's gate, audit, alerts, the watcher).

use super::*;
use crate::jobs::{AlertArgs, DeliverArgs, HostProbeArgs, JobArgs};

/// Records the result of one attempt of `delivery_id` of channel `channel_id` for its host
/// circuit: the one call the worker makes, in the transaction that records the attempt, before
/// the channel circuit's calls (lock order: host row, then channel row, then job groups).
///
/// - the host probe (`host_probe` = its generation): a transient failure re-opens the host, any
///   other answer closes it;
/// - any other delivery: a transient failure is counted (distinct channels in the window, see
///   the module doc) and may open the host; a success of a channel that had failures
///   (`failures_before > 0`) removes its failure row (no write otherwise).
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
        (None, Class::Transient) => record_failure(tx, channel_id, reason, cfg).await,
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
/// tenants use, they belong to at least two tenants.
pub(super) async fn record_failure(
    tx: &mut PgConnection,
    channel_id: Uuid,
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
    let distinct: i64 = sqlx::query_scalar(
        "WITH up AS (
             INSERT INTO host_failures (host_key, channel_id, failed_at) VALUES ($1, $2, now())
             ON CONFLICT (host_key, channel_id) DO UPDATE SET failed_at = now()
             RETURNING channel_id)
         SELECT 1 + count(*) FROM host_failures
         WHERE host_key = $1 AND channel_id <> $2
           AND failed_at > now() - ($3::float8 * interval '1 millisecond')",
    )
    .bind(&key)
    .bind(channel_id)
    .bind(cfg.failure_window_ms)
    .fetch_one(&mut *tx)
    .await?;
    if distinct < threshold as i64 {
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
               AND f.failed_at > now() - ($2::float8 * interval '1 millisecond')
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
        }
        .to_json();
        let job = NewJob::new(QUEUE_ALERTS, circuit::JOB_ALERT, args)
            .unique_key(format!(
                "alert:host:{}:{}:{tenant_id}:{event}",
                t.host_key, t.generation
            ))
            .max_attempts(10);
        breakwater_queue::enqueue(&mut *tx, &job).await?;
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

/// Wakes exactly one waiting delivery of the host (among channels whose own circuit does not
/// park them) as its probe through the gate's one probe slot, and returns `(delivery, channel)`;
/// `None` when none waits: the slot then goes to the next delivery that arrives, which claims
/// the role in the admission.
pub(super) async fn wake_host_probe(
    tx: &mut PgConnection,
    key: &str,
) -> Result<Option<(Uuid, Uuid)>> {
    let woken =
        breakwater_queue::wake_one_in_gate(&mut *tx, key, JOB_DELIVER, PRIORITY_URGENT).await?;
    Ok(woken.and_then(|(_, channel, args)| {
        let d = DeliverArgs::from_json(&args).ok()?.delivery_id;
        Some((d, channel))
    }))
}

/// The unique key of host `key`'s probe watcher job.
pub fn watcher_key(key: &str) -> String {
    format!("host_probe:{key}")
}

/// Makes sure the host's probe watcher (unique per host) runs no later than `at`.
pub(super) async fn schedule_watcher(
    tx: &mut PgConnection,
    key: &str,
    at: Option<DateTime<Utc>>,
) -> Result<()> {
    let args = HostProbeArgs {
        host_key: key.to_string(),
    };
    circuit::schedule_watcher_job(tx, &args, watcher_key(key), at).await
}
