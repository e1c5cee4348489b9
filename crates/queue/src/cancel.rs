//! Cancelling jobs that have not run: a whole group's waiting jobs, or the waiting jobs with
//! given unique keys. Cancelled is final (like completed and discarded): the job is never
//! fetched again and is pruned with the other final jobs.
//!
//! Only waiting jobs (`available`, `scheduled`) are cancelled here. A job already `executing`
//! keeps its claim and finishes; its handler decides what its result means (and may record it
//! with [`crate::cancel`]). So a cancel never pulls a slot or a claim from under a running
//! handler, and the group's `in_flight` stays exact.
//!
//! Safe on several nodes at once: each call is one UPDATE; a job a concurrent fetch is claiming
//! is row-locked by that fetch, so the cancel waits for it, re-reads the row, finds it
//! `executing` and leaves it alone. Parked jobs are waiting jobs of a parked group, so they are
//! cancelled like any other.

use crate::Result;
use sqlx::PgExecutor;
use uuid::Uuid;

/// Cancels the waiting jobs that `$which` selects (a string literal: a SQL condition on `$1`,
/// bound to `$keys`), appending `$reason` (`$2`) to each job's `errors`; evaluates to the number
/// cancelled. One statement text for both cancels below: `sqlx::query!` takes literals joined
/// with `+`, so the statement stays compile-time checked.
macro_rules! cancel_waiting {
    ($exec:expr, $which:literal, $keys:expr, $reason:expr) => {
        sqlx::query!(
            "UPDATE jobs SET state = 'cancelled', finalized_at = now(), \
                 errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $2::text) \
             WHERE "
                + $which
                + " AND state IN ('available', 'scheduled')",
            $keys,
            $reason,
        )
        .execute($exec)
        .await?
        .rows_affected()
    };
}

/// Cancels every waiting job of the groups `group_ids` (one indexed UPDATE), appending `reason`
/// to each job's `errors`. Returns how many were cancelled. Runs in the caller's transaction.
pub async fn cancel_groups(
    exec: impl PgExecutor<'_>,
    group_ids: &[Uuid],
    reason: &str,
) -> Result<u64> {
    if group_ids.is_empty() {
        return Ok(0);
    }
    Ok(cancel_waiting!(
        exec,
        "group_id = ANY($1)",
        group_ids,
        reason
    ))
}

/// Cancels the waiting jobs with these unique keys (at most one live job per key), appending
/// `reason` to their `errors`. Returns how many were cancelled; a key whose job is executing,
/// final or absent counts nothing. Runs in the caller's transaction.
pub async fn cancel_keys(
    exec: impl PgExecutor<'_>,
    unique_keys: &[String],
    reason: &str,
) -> Result<u64> {
    if unique_keys.is_empty() {
        return Ok(0);
    }
    Ok(cancel_waiting!(
        exec,
        "unique_key = ANY($1)",
        unique_keys,
        reason
    ))
}
