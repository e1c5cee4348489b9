//! Background upkeep every node runs: heartbeats, promotion of due jobs, rescue, pruning.
//!
//! Every statement here is safe for several nodes to run at once: promotion and rescue lock the
//! rows they move with `FOR UPDATE SKIP LOCKED` (two nodes split the work, never double it), and
//! the heartbeat is an upsert of the node's own row.
//!
//! None of it waits for live work: a transaction of a node that froze inside it
//! holds its rows until the server ends it, and upkeep that waited for them would stop too —
//! the rescuer, and with it (when they shared a loop) the node's own heartbeat. So:
//! - every row upkeep locks is locked `SKIP LOCKED` (promotion, rescue, pruning), and the
//!   rescuer takes the slot rows of the jobs it rescues the same way ([`rescue`]): a job whose
//!   group or gate row is held is left for a later round;
//! - what a statement's triggers touch (a rescued delivery job's delivery row) is bounded by a
//!   short `lock_timeout` ([`UPKEEP_LOCK_TIMEOUT`]; [`upkeep_pool`] gives every session of the
//!   upkeep loop that bound): a step that would wait longer fails and runs again next period;
//! - the heartbeat runs in a task of its own on a connection of its own ([`beat`]), so no
//!   upkeep step, however stuck, delays it.
//!
//! **A node judges others only from a continuous heartbeat of its own**. During a
//! database outage (or a failover, or while this node was frozen) no node can beat, so right
//! after it every heartbeat is old: a rescuer that judged then would take the claims of nodes
//! that are alive and already sent those requests. So each node's row keeps `beating_since`,
//! when its current unbroken run of heartbeats began ([`heartbeat`]: a failed beat, or a gap
//! longer than [`MaintenanceConfig::max_beat_gap`], starts a new run), and [`rescue`] takes
//! nothing until the rescuer's own run is as long as the rescue horizon: by then every live
//! node has beaten again, and only the silent ones look dead. A node that really died is still
//! rescued, one horizon later than its death at the earliest, as before.

use crate::outcome::millis;
use crate::slots::try_lock_slots;
use crate::wake::{notify_moved, Moved};
use crate::Result;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgExecutor, PgPool};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The longest an upkeep statement waits for a row lock (the `lock_timeout` of
/// [`upkeep_pool`]'s sessions and of [`rescue`]'s transaction). Longer than a result
/// transaction's commit under load, far shorter than a frozen node's transaction.
pub const UPKEEP_LOCK_TIMEOUT: Duration = Duration::from_millis(500);

/// A small pool (`max` connections, opened lazily) on the same database, with the same session
/// settings as `pool` plus `lock_timeout` = [`UPKEEP_LOCK_TIMEOUT`]: for loops that run beside
/// live work (upkeep, reconcilers, retention), so none of them waits long for a row a live
/// transaction holds, and none takes a connection the pools of handlers need.
pub fn upkeep_pool(pool: &PgPool, max: u32) -> PgPool {
    let opts = (*pool.connect_options()).clone().options([(
        "lock_timeout",
        format!("{}ms", UPKEEP_LOCK_TIMEOUT.as_millis()),
    )]);
    PgPoolOptions::new()
        .max_connections(max.max(1))
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(opts)
}

/// Records that `node_id` is alive (database time). Its run of heartbeats (`beating_since`,
/// read by [`rescue`]) goes on if its previous beat is at most `max_gap` old, and starts anew
/// otherwise: pass [`Duration::ZERO`] for a beat after a failed one (the node could not reach
/// the database, so it may have missed what others did meanwhile), and
/// [`MaintenanceConfig::max_beat_gap`] for a beat on time. A node's first beat starts a run.
pub async fn heartbeat(exec: impl PgExecutor<'_>, node_id: &str, max_gap: Duration) -> Result<()> {
    sqlx::query!(
        "INSERT INTO queue_nodes (id) VALUES ($1)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(),
             beating_since = CASE
                 WHEN queue_nodes.heartbeat_at >= now() - ($2::float8 * interval '1 millisecond')
                 THEN queue_nodes.beating_since ELSE now() END",
        node_id,
        millis(max_gap) as _,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Beats `node_id`'s heartbeat every `interval` until `shutdown`, in the caller's task, on a
/// connection of its own (opened from `pool`'s settings, never taken from the pool; reopened
/// after an error), each beat bounded by `interval` (at least 1 s): nothing else the node runs
/// — an upkeep step waiting for a lock, a pool with every connection busy — delays it, so a
/// node looks alive exactly as long as it runs. Failures are logged and retried next period;
/// the first beat after a failure, and one more than `max_gap` after the previous, starts a new
/// run of heartbeats ([`heartbeat`]), so this node rescues nothing for a rescue horizon.
pub async fn beat(
    pool: PgPool,
    node_id: String,
    interval: Duration,
    max_gap: Duration,
    shutdown: CancellationToken,
) {
    let bound = interval.max(Duration::from_secs(1));
    let opts = (*pool.connect_options()).clone().options([
        ("lock_timeout", format!("{}ms", bound.as_millis())),
        ("statement_timeout", format!("{}ms", bound.as_millis())),
    ]);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut conn: Option<PgConnection> = None;
    let mut failed = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let gap = if failed { Duration::ZERO } else { max_gap };
        let beaten = tokio::time::timeout(bound, async {
            if conn.is_none() {
                conn = Some(PgConnection::connect_with(&opts).await?);
            }
            heartbeat(conn.as_mut().expect("connected above"), &node_id, gap).await
        })
        .await;
        let error = match beaten {
            Ok(Ok(())) => {
                failed = false;
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} ms", bound.as_millis()),
        };
        tracing::warn!(error = %error, "heartbeat failed; reconnecting");
        failed = true;
        conn = None;
    }
    if let Some(conn) = conn {
        let _ = conn.close().await;
    }
}

/// Removes `node_id`'s heartbeat row (clean shutdown, after its jobs were handed back).
pub async fn deregister(exec: impl PgExecutor<'_>, node_id: &str) -> Result<()> {
    sqlx::query!("DELETE FROM queue_nodes WHERE id = $1", node_id)
        .execute(exec)
        .await?;
    Ok(())
}

/// Moves up to `limit` due `scheduled` jobs to `available` and wakes their queues. Returns how
/// many moved.
pub async fn promote_due(conn: &mut sqlx::PgConnection, limit: i64) -> Result<u64> {
    let moved = sqlx::query_as!(
        Moved,
        r#"
        WITH due AS (
            SELECT id FROM jobs
            WHERE state = 'scheduled' AND scheduled_at <= now()
            ORDER BY scheduled_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        ), moved AS (
            UPDATE jobs j SET state = 'available'
            FROM due WHERE j.id = due.id
            RETURNING j.queue
        )
        SELECT queue AS "queue!", count(*) AS "n!" FROM moved GROUP BY queue
        "#,
        limit,
    )
    .fetch_all(&mut *conn)
    .await?;
    notify_moved(&mut *conn, moved).await
}

/// Which `executing` jobs [`rescue`] takes back.
#[derive(Debug, Clone)]
pub struct RescuePolicy {
    /// A node silent this long is presumed dead: its executing jobs are rescued.
    pub stale_after: Duration,
    /// A claim older than this is abandoned even if its node still heartbeats (a result that
    /// could not be written, a run stuck past every timeout), counted from the later of the
    /// claim and the start of its node's current run of heartbeats ([`rescue`]). Set it above
    /// the longest a run may take; the claim token fences the late result of a run that was
    /// only slow.
    pub max_run: Duration,
    /// The rescuing node: it never rescues its own claims (it knows which it still runs; see
    /// the runner), so a node waking from a freeze cannot take back jobs it is running.
    pub own_node: String,
}

/// Rescues jobs left `executing` by another node whose last heartbeat is older than
/// `policy.stale_after` (or that has no heartbeat row at all), or claimed longer ago than
/// `policy.max_run`: each becomes `available` again, or `discarded` if that run was its last
/// attempt. The claim token is cleared, so the abandoned run's late result changes nothing.
/// Returns how many jobs were rescued.
///
/// A run's age (against `policy.max_run`) counts from its claim or from the start of its
/// node's current run of heartbeats, whichever is later: time its node spent unable to reach
/// the database (an outage, a failover) is not held against it, so the result it kept through
/// an outage is written, not refused. (A claim of a node without a heartbeat row is
/// rescued as that of a silent node.)
///
/// Takes nothing unless the rescuer's own run of heartbeats (`policy.own_node`'s
/// `beating_since`, [`heartbeat`]) is at least `policy.stale_after` long (module doc): right
/// after an outage, when every heartbeat is old, it waits until the live nodes have beaten
/// again. A rescuer without a heartbeat row takes nothing.
///
/// Waits for no live work: the jobs and then their group and gate rows are locked
/// `SKIP LOCKED` (in the order everyone uses: group rows, then gate rows); a job whose row, or
/// whose group's or gate's row, another transaction holds (a result in progress, or one a
/// frozen node left open) is left for a later call. The rescue's own triggers (a delivery job's
/// delivery row) wait at most [`UPKEEP_LOCK_TIMEOUT`] (`lock_timeout`, local to its
/// transaction); past that the call fails and changes nothing.
pub async fn rescue(conn: &mut sqlx::PgConnection, policy: &RescuePolicy) -> Result<u64> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query_scalar!(
        "SELECT set_config('lock_timeout', $1, true)",
        format!("{}ms", UPKEEP_LOCK_TIMEOUT.as_millis()),
    )
    .fetch_one(&mut *tx)
    .await?;
    let stale = sqlx::query!(
        r#"
        SELECT j.id, j.group_id, j.gate_slot FROM jobs j
        WHERE j.state = 'executing'
          AND j.attempted_by IS DISTINCT FROM $3
          AND EXISTS (
              SELECT 1 FROM queue_nodes me
              WHERE me.id = $3
                AND me.beating_since <= now() - ($1::float8 * interval '1 millisecond'))
          AND (NOT EXISTS (
                   SELECT 1 FROM queue_nodes n
                   WHERE n.id = j.attempted_by
                     AND n.heartbeat_at > now() - ($1::float8 * interval '1 millisecond'))
               OR EXISTS (
                   SELECT 1 FROM queue_nodes n
                   WHERE n.id = j.attempted_by
                     AND greatest(j.attempted_at, n.beating_since)
                         < now() - ($2::float8 * interval '1 millisecond')))
        FOR UPDATE OF j SKIP LOCKED
        "#,
        millis(policy.stale_after) as _,
        millis(policy.max_run) as _,
        &policy.own_node,
    )
    .fetch_all(&mut *tx)
    .await?;
    if stale.is_empty() {
        tx.commit().await?;
        return forget_old_nodes(conn, policy).await.map(|()| 0);
    }
    // Their slot rows, taken before the UPDATE releases the slots (see slots::lock_slots for
    // why up front), skipping those another transaction holds: those jobs stay for later.
    let held = try_lock_slots(
        &mut tx,
        stale.iter().filter_map(|s| s.group_id),
        stale.iter().filter_map(|s| s.gate_slot.clone()),
    )
    .await?;
    let ids: Vec<i64> = stale
        .iter()
        .filter(|s| held.frees(s.group_id, s.gate_slot.as_deref()))
        .map(|s| s.id)
        .collect();
    if ids.len() < stale.len() {
        tracing::info!(
            left = stale.len() - ids.len(),
            groups = ?held.groups,
            gates = ?held.gates,
            "rescue: jobs whose group or gate row another transaction holds are left for later"
        );
    }
    let moved = sqlx::query_as!(
        Moved,
        r#"
        WITH rescued AS (
            UPDATE jobs j
            SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END,
                finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
                errors = j.errors || jsonb_build_object(
                    'attempt', j.attempt, 'at', now(),
                    'error', CASE WHEN j.attempted_at < now() - ($2::float8 * interval '1 millisecond')
                                  THEN 'rescued: the run outlived the longest a run may take'
                                  ELSE 'rescued: its node stopped heartbeating' END),
                claim_token = NULL,
                attempted_by = NULL
            WHERE j.id = ANY($1) AND j.state = 'executing'
            RETURNING j.queue, j.state
        )
        SELECT queue AS "queue!", count(*) AS "n!" FROM rescued WHERE state = 'available' GROUP BY queue
        "#,
        &ids,
        millis(policy.max_run) as _,
    )
    .fetch_all(&mut *tx)
    .await?;
    let n = notify_moved(&mut *tx, moved).await?;
    tx.commit().await?;
    forget_old_nodes(conn, policy).await?;
    Ok(n)
}

/// Forgets nodes long gone, so the `queue_nodes` table stays small.
async fn forget_old_nodes(conn: &mut sqlx::PgConnection, policy: &RescuePolicy) -> Result<()> {
    // Forget nodes long gone, so the table stays small.
    sqlx::query!(
        "DELETE FROM queue_nodes WHERE heartbeat_at < now() - ($1::float8 * interval '1 millisecond') * 10",
        millis(policy.stale_after) as _,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Deletes up to `limit` finished jobs (completed, discarded, cancelled) finalized more than
/// `retention` ago (database clock), in one short statement: live jobs (available, scheduled,
/// executing) are never touched, and rows another transaction holds are skipped (`SKIP
/// LOCKED`), so several nodes can prune at once. Call it repeatedly to drain a large backlog in
/// small batches. Returns how many were deleted.
pub async fn prune(exec: impl PgExecutor<'_>, retention: Duration, limit: i64) -> Result<u64> {
    let r = sqlx::query!(
        r#"
        DELETE FROM jobs WHERE id IN (
            SELECT id FROM jobs
            WHERE finalized_at IS NOT NULL
              AND state IN ('completed', 'discarded', 'cancelled')
              AND finalized_at < now() - ($1::float8 * interval '1 millisecond')
            LIMIT $2
            FOR UPDATE SKIP LOCKED)
        "#,
        millis(retention) as _,
        limit,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected())
}

/// How often each upkeep step runs, and its limits.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// This node's id (as used in fetch).
    pub node_id: String,
    /// Heartbeat period. Must be well below `rescue_after`.
    pub heartbeat_interval: Duration,
    /// Period of the due-job promoter (the lag of a snoozed job past its time is at most this).
    pub promote_interval: Duration,
    /// A node silent this long is presumed dead and its executing jobs are rescued.
    pub rescue_after: Duration,
    /// A claim older than this is rescued even if its node heartbeats (see [`RescuePolicy`]).
    pub max_run: Duration,
    /// Period of the rescuer.
    pub rescue_interval: Duration,
    /// Final jobs are deleted after this long.
    pub retention: Duration,
    /// Period of the pruner.
    pub prune_interval: Duration,
}

impl MaintenanceConfig {
    /// The longest silence between two of this node's beats that still counts as one unbroken
    /// run of heartbeats ([`heartbeat`]): a beat's period plus the most a beat may take
    /// ([`beat`]: the period, at least 1 s), but at most half of `rescue_after`, so a node
    /// whose run goes on never saw a gap in which a live node's heartbeat could age past the
    /// rescue horizon.
    pub fn max_beat_gap(&self) -> Duration {
        (self.heartbeat_interval + self.heartbeat_interval.max(Duration::from_secs(1)))
            .min(self.rescue_after / 2)
    }
}

/// Runs heartbeat, promotion, rescue and pruning until `shutdown`. Errors are logged and the
/// step is tried again next period.
///
/// The heartbeat runs in a task of its own on a connection of its own ([`beat`]); promotion,
/// rescue and pruning run one after another on [`upkeep_pool`] sessions of `pool` (a short
/// `lock_timeout`), so a step that meets a held row fails fast or skips it, and never stops the
/// heartbeat.
pub async fn run(pool: PgPool, cfg: MaintenanceConfig, shutdown: CancellationToken) {
    let beating = tokio::spawn(beat(
        pool.clone(),
        cfg.node_id.clone(),
        cfg.heartbeat_interval,
        cfg.max_beat_gap(),
        shutdown.clone(),
    ));
    let pool = upkeep_pool(&pool, 2);
    upkeep(&pool, &cfg, &shutdown).await;
    let _ = beating.await;
    pool.close().await;
}

/// The upkeep steps of [`run`], one at a time, until `shutdown`.
async fn upkeep(pool: &PgPool, cfg: &MaintenanceConfig, shutdown: &CancellationToken) {
    let mut promote_t = tokio::time::interval(cfg.promote_interval);
    let mut rescue_t = tokio::time::interval(cfg.rescue_interval);
    let mut prune_t = tokio::time::interval(cfg.prune_interval);
    for t in [&mut promote_t, &mut rescue_t, &mut prune_t] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = promote_t.tick() => {
                let r = async {
                    let mut conn = pool.acquire().await?;
                    // Drain in chunks so one tick can promote a large released batch.
                    loop {
                        let n = promote_due(&mut conn, 5_000).await?;
                        if n < 5_000 { break; }
                    }
                    Ok::<_, crate::Error>(())
                }.await;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "promoting due jobs failed");
                }
            }
            _ = rescue_t.tick() => {
                let r = async {
                    let mut conn = pool.acquire().await?;
                    // Beat first: a node that was frozen past the rescue time is alive again
                    // before it judges anyone else's, and its frozen gap starts a new run of
                    // heartbeats, so it judges nobody for a rescue horizon.
                    heartbeat(&mut *conn, &cfg.node_id, cfg.max_beat_gap()).await?;
                    rescue(&mut conn, &RescuePolicy {
                        stale_after: cfg.rescue_after,
                        max_run: cfg.max_run,
                        own_node: cfg.node_id.clone(),
                    }).await
                }.await;
                match r {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(jobs = n, "rescued jobs from nodes that stopped heartbeating"),
                    Err(e) => tracing::warn!(error = %e, "rescue failed"),
                }
            }
            _ = prune_t.tick() => {
                if let Err(e) = prune(pool, cfg.retention, 10_000).await {
                    tracing::warn!(error = %e, "pruning failed");
                }
            }
        }
    }
}
