//! Claiming jobs.

use crate::{Job, Result};
use sqlx::PgExecutor;
use uuid::Uuid;

/// The claim shared by every fetch: the rows of a `picked` CTE (chosen and locked with
/// `FOR UPDATE SKIP LOCKED`) become `executing` for node `$3`, with the attempt counted and a fresh
/// fencing token. Returns the [`Job`] columns.
const CLAIM: &str = "
        UPDATE jobs j
        SET state = 'executing',
            attempt = j.attempt + 1,
            attempted_at = now(),
            attempted_by = $3,
            claim_token = gen_random_uuid()
        FROM picked
        WHERE j.id = picked.id
        RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.attempt, j.max_attempts,
                  j.claim_token, j.unique_key, j.group_id, j.created_at";

/// Claims up to `limit` available jobs of `queue` for node `node_id`, lowest priority number
/// first, then oldest `scheduled_at`, then id.
///
/// One statement: the inner SELECT locks the chosen rows with `FOR UPDATE SKIP LOCKED`, so two
/// fetchers (on this node or any other) skip each other's rows instead of waiting or getting
/// the same job, and the UPDATE marks them `executing`, increments `attempt` and gives each a
/// fresh `claim_token`. The inner SELECT walks `jobs_fetch_idx`, which holds only `available`
/// rows: parked and future jobs are `scheduled` and cost a fetch nothing.
///
/// The returned jobs are sorted as they were chosen.
pub async fn fetch(
    exec: impl PgExecutor<'_>,
    queue: &str,
    node_id: &str,
    limit: i64,
) -> Result<Vec<Job>> {
    fetch_excluding(exec, queue, node_id, limit, &[]).await
}

/// [`fetch`], skipping jobs of the groups in `exclude` (e.g. groups this node already runs as
/// many jobs of as it allows). The skipped jobs stay available for other nodes and later
/// fetches; the filter is applied while walking the fetch index, so it costs a look at each
/// skipped row but no write.
pub async fn fetch_excluding(
    exec: impl PgExecutor<'_>,
    queue: &str,
    node_id: &str,
    limit: i64,
    exclude: &[Uuid],
) -> Result<Vec<Job>> {
    let sql = format!(
        r#"
        WITH picked AS (
            SELECT id FROM jobs
            WHERE state = 'available' AND queue = $1
              AND (group_id IS NULL OR group_id <> ALL($4))
            ORDER BY priority, scheduled_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        )
        {CLAIM}"#
    );
    let mut jobs: Vec<Job> = sqlx::query_as(&sql)
        .bind(queue)
        .bind(limit)
        .bind(node_id)
        .bind(exclude)
        .fetch_all(exec)
        .await?;
    jobs.sort_by_key(|j| (j.priority, j.id));
    Ok(jobs)
}

/// [`fetch_excluding`], taking at most `per_group` jobs of any one group (jobs without a group
/// are not limited). For a node that caps how many jobs of one group it runs at once: a batch
/// that is mostly one group's jobs (FIFO order often clusters) would otherwise have to hand most
/// of them back. The candidates are the first `limit × 8` available jobs in fetch order, so the
/// cost stays bounded; the locking statement re-checks each row (`state = 'available'`) under
/// `FOR UPDATE SKIP LOCKED`, so two fetchers never take the same job.
pub async fn fetch_per_group(
    exec: impl PgExecutor<'_>,
    queue: &str,
    node_id: &str,
    limit: i64,
    exclude: &[Uuid],
    per_group: i64,
) -> Result<Vec<Job>> {
    let sql = format!(
        r#"
        WITH window_ AS (
            SELECT id, group_id, priority, scheduled_at FROM jobs
            WHERE state = 'available' AND queue = $1
              AND (group_id IS NULL OR group_id <> ALL($4))
            ORDER BY priority, scheduled_at, id
            LIMIT $2 * 8
        ), candidates AS (
            SELECT id, group_id,
                   row_number() OVER (PARTITION BY group_id ORDER BY priority, scheduled_at, id) AS rn
            FROM window_
        ), picked AS (
            SELECT j.id FROM jobs j
            JOIN candidates c ON c.id = j.id
            WHERE j.state = 'available' AND (c.group_id IS NULL OR c.rn <= $5)
            ORDER BY j.priority, j.scheduled_at, j.id
            LIMIT $2
            FOR UPDATE OF j SKIP LOCKED
        )
        {CLAIM}"#
    );
    let mut jobs: Vec<Job> = sqlx::query_as(&sql)
        .bind(queue)
        .bind(limit)
        .bind(node_id)
        .bind(exclude)
        .bind(per_group.max(1))
        .fetch_all(exec)
        .await?;
    jobs.sort_by_key(|j| (j.priority, j.id));
    Ok(jobs)
}
