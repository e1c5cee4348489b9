//! Retention: finished deliveries and their attempts are deleted once they are old.
//!
//! A delivery is pruned only when all of these hold, checked in the deleting statement itself:
//! - its status is final ([`crate::deliveries::Status::is_final`]: delivered, dead, cancelled);
//! - it was accepted (`created_at`) **and** last changed (`updated_at`) before the cutoff, so a
//!   dead letter replayed recently is kept;
//! - it has no live job (`available`, `scheduled` or `executing`: the queue's unique key
//!   `delivery:<id>`), so work in progress, parked or waiting is never touched, however old.
//!
//! Each call deletes one small batch in one statement (its own short transaction): the rows are
//! locked `FOR UPDATE SKIP LOCKED`, so a concurrent replay or status change (which locks the
//! same row) is never waited for — the row is skipped and seen again next round — and several
//! nodes pruning at once split the work instead of blocking each other. Nothing else is locked
//! beyond the rows deleted. The finished jobs are the queue's to prune
//! ([`breakwater_queue::maintenance::prune`]); the audit log is kept (it is the record of who did
//! what, and small).

use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use std::time::Duration;

/// What one [`prune_deliveries`] batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Deliveries deleted.
    pub deliveries: u64,
    /// Their attempts deleted.
    pub attempts: u64,
    /// The newest `created_at` among the deliveries deleted: pass it as the next batch's
    /// `from`, so a run walks the retention index once instead of re-reading what it deleted.
    pub last_created_at: Option<DateTime<Utc>>,
}

/// The retention cutoff by the database's clock: `now() - older_than`.
pub async fn cutoff(exec: impl PgExecutor<'_>, older_than: Duration) -> Result<DateTime<Utc>> {
    Ok(
        sqlx::query_scalar("SELECT now() - ($1::float8 * interval '1 millisecond')")
            .bind(older_than.as_secs_f64() * 1000.0)
            .fetch_one(exec)
            .await?,
    )
}

/// Deletes up to `limit` final deliveries accepted and last changed before `cutoff`, with no
/// live job, and their attempts, oldest first, starting at `created_at >= from` (`None` = the
/// oldest). One statement; see the module docs for why it is safe beside live work and on
/// several nodes.
pub async fn prune_deliveries(
    exec: impl PgExecutor<'_>,
    cutoff: DateTime<Utc>,
    from: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Pruned> {
    // The status list is exactly `deliveries_retention_idx`'s predicate (so the index is used)
    // and Status::is_final. The live-job check reads `jobs_unique_live_idx` (one probe per row).
    // `FOR UPDATE OF d SKIP LOCKED` re-checks the status on the row's latest version after
    // locking it, so a row that stopped being final in the meantime is not deleted.
    // The lower bound is left out rather than `$2 IS NULL OR …`, so that any cached plan seeks
    // the index to it.
    let from_cond = if from.is_some() {
        "AND d.created_at >= $3"
    } else {
        ""
    };
    let live_job = breakwater_queue::live_job_exists_sql("'delivery:' || d.id::text");
    let sql = format!(
        r#"
        WITH picked AS (
            SELECT d.id, d.created_at FROM deliveries d
            WHERE d.status IN ('delivered', 'dead', 'cancelled')
              AND d.created_at < $1
              {from_cond}
              AND d.updated_at < $1
              AND NOT {live_job}
            ORDER BY d.created_at
            LIMIT $2
            FOR UPDATE OF d SKIP LOCKED
        ), attempts AS (
            DELETE FROM delivery_attempts a USING picked
            WHERE a.delivery_id = picked.id
            RETURNING 1
        ), gone AS (
            DELETE FROM deliveries d USING picked
            WHERE d.id = picked.id
            RETURNING d.created_at
        )
        SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM attempts),
               (SELECT max(created_at) FROM gone)
        "#
    );
    let mut q = sqlx::query_as::<_, (i64, i64, Option<DateTime<Utc>>)>(&sql)
        .bind(cutoff)
        .bind(limit);
    if let Some(from) = from {
        q = q.bind(from);
    }
    let row = q.fetch_one(exec).await?;
    Ok(Pruned {
        deliveries: row.0 as u64,
        attempts: row.1 as u64,
        last_created_at: row.2,
    })
}
