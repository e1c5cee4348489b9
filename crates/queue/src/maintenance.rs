//! Background upkeep every node runs: heartbeats, promotion of due jobs, rescue, pruning.
//!
//! Every statement here is safe for several nodes to run at once: promotion and rescue lock the
//! rows they move with `FOR UPDATE SKIP LOCKED` (two nodes split the work, never double it), and
//! the heartbeat is an upsert of the node's own row.

use crate::outcome::millis;
use crate::slots::lock_slots;
use crate::wake::{notify_moved, Moved};
use crate::Result;
use sqlx::{PgExecutor, PgPool};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Records that `node_id` is alive (database time).
pub async fn heartbeat(exec: impl PgExecutor<'_>, node_id: &str) -> Result<()> {
    sqlx::query!(
        "INSERT INTO queue_nodes (id) VALUES ($1)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
        node_id,
    )
    .execute(exec)
    .await?;
    Ok(())
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
    /// could not be written, a run stuck past every timeout). Set it above the longest a run
    /// may take; the claim token fences the late result of a run that was only slow.
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
pub async fn rescue(conn: &mut sqlx::PgConnection, policy: &RescuePolicy) -> Result<u64> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let stale = sqlx::query!(
        r#"
        SELECT j.id, j.group_id, j.gate_slot FROM jobs j
        WHERE j.state = 'executing'
          AND j.attempted_by IS DISTINCT FROM $3
          AND (j.attempted_at < now() - ($2::float8 * interval '1 millisecond')
               OR NOT EXISTS (
                   SELECT 1 FROM queue_nodes n
                   WHERE n.id = j.attempted_by
                     AND n.heartbeat_at > now() - ($1::float8 * interval '1 millisecond')))
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
    let ids: Vec<i64> = stale.iter().map(|s| s.id).collect();
    lock_slots(
        &mut tx,
        stale.iter().filter_map(|s| s.group_id),
        stale.iter().filter_map(|s| s.gate_slot.clone()),
    )
    .await?;
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

/// Runs heartbeat, promotion, rescue and pruning until `shutdown`. Errors are logged and the
/// step is tried again next period.
pub async fn run(pool: PgPool, cfg: MaintenanceConfig, shutdown: CancellationToken) {
    let mut heartbeat_t = tokio::time::interval(cfg.heartbeat_interval);
    let mut promote_t = tokio::time::interval(cfg.promote_interval);
    let mut rescue_t = tokio::time::interval(cfg.rescue_interval);
    let mut prune_t = tokio::time::interval(cfg.prune_interval);
    for t in [
        &mut heartbeat_t,
        &mut promote_t,
        &mut rescue_t,
        &mut prune_t,
    ] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = heartbeat_t.tick() => {
                if let Err(e) = heartbeat(&pool, &cfg.node_id).await {
                    tracing::warn!(error = %e, "heartbeat failed");
                }
            }
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
                    // before it judges anyone else's.
                    heartbeat(&mut *conn, &cfg.node_id).await?;
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
                if let Err(e) = prune(&pool, cfg.retention, 10_000).await {
                    tracing::warn!(error = %e, "pruning failed");
                }
            }
        }
    }
}
