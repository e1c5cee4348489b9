//! Checks and repairs of the queue's own bookkeeping (the `in_flight` counters of job groups and
//! gates: [`slots_drift`], [`recount_group_slots`], [`recount_gate_slots`]), and the few
//! statements other crates need on `jobs` and `job_groups` that are not part of a job's life
//! cycle: moving waiting jobs to
//! another queue, cancelling one waiting job by id, reading the newest job of a unique key, and
//! the SQL fragments for a caller's statement over many rows at once (a group's waiting count, a
//! key's newest job state, whether a key has a live or an executing job, the waiting jobs).
//!
//! Every statement on the queue's tables lives in this crate (SQL lives with its table's
//! owner); callers pass ids, never SQL on `jobs`. Where a caller's statement must read `jobs`
//! row by row (a check over every delivery), it splices in a fragment from here, so every
//! job-state predicate ("waiting", "live", "executing", "newest") is still written here.

use crate::{JobState, Result};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// What a reconciler of parking repaired: the job groups or gates whose `parked` flag it set
/// again to agree with their owner's state (for Breakwater, a channel's circuit and its job
/// group, or a host circuit and its gate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Groups or gates that were still parked though their owner no longer holds them (a
    /// closed circuit, a deleted channel): released.
    pub released: u64,
    /// Groups or gates that were not parked though their owner holds them (an open, half-open
    /// or paused circuit): parked.
    pub parked: u64,
}

/// Moves the waiting (`available` or `scheduled`) jobs of kind `kind` of the groups `group_ids`
/// that sit in one of `from_queues` to queue `to_queue` (one UPDATE of their `queue` column; a
/// job is moved, never copied, so a unique key never gets a second live job). Jobs already in
/// `to_queue` and executing jobs stay where they are. Does not wake `to_queue` (the caller
/// calls [`crate::notify_queues`] once it is done). Returns how many moved. Runs in the caller's
/// transaction.
pub async fn move_waiting(
    exec: impl PgExecutor<'_>,
    group_ids: &[Uuid],
    kind: &str,
    from_queues: &[String],
    to_queue: &str,
) -> Result<u64> {
    let r = sqlx::query!(
        "UPDATE jobs SET queue = $2
         WHERE group_id = ANY($1)
           AND state IN ('available', 'scheduled') AND kind = $3 AND queue = ANY($4) AND queue <> $2",
        group_ids,
        to_queue,
        kind,
        from_queues,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected())
}

/// Cancels job `job_id` if it is still waiting (`available` or `scheduled`): final, with
/// `finalized_at` now and nothing appended to its `errors` (a repair, unlike
/// [`crate::cancel_keys`]). Returns whether it was cancelled; an executing or final job is left
/// alone.
pub async fn cancel_waiting_job(exec: impl PgExecutor<'_>, job_id: i64) -> Result<bool> {
    let r = sqlx::query!(
        "UPDATE jobs SET state = 'cancelled', finalized_at = now()
                     WHERE id = $1 AND state IN ('available', 'scheduled')",
        job_id,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected() > 0)
}

/// The newest job (highest id) with unique key `unique_key`, live or final: its state and the
/// error of its last recorded attempt (`errors[-1].error`), or `None` if the key never had one.
pub async fn last_job(
    exec: impl PgExecutor<'_>,
    unique_key: &str,
) -> Result<Option<(JobState, Option<String>)>> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: JobState", errors->-1->>'error' AS error
         FROM jobs WHERE unique_key = $1::text
         ORDER BY id DESC LIMIT 1"#,
        unique_key,
    )
    .fetch_optional(exec)
    .await?;
    Ok(row.map(|r| (r.state, r.error)))
}

/// Whose `in_flight` counter a [`SlotsDrift`] is about: a job group's (`job_groups`) or a
/// gate's (`job_gates`, see [`crate::set_group_gate`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SlotOwner {
    /// Job group `group_id`: its counter is its jobs in state `executing`.
    Group(Uuid),
    /// Gate `gate_key`: its counter is the executing jobs counted in it (`jobs.gate_slot` = the
    /// key), whatever gate their group is in now.
    Gate(String),
}

/// A counter of jobs in flight that differs from the jobs it counts (a bug, a hand edit, a
/// restore; on a live cluster also a claim or result in progress, for an instant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsDrift {
    /// The group or gate the counter belongs to.
    pub owner: SlotOwner,
    /// The counter (`in_flight`).
    pub in_flight: i32,
    /// The executing jobs it should equal.
    pub executing: i64,
}

/// Job groups and gates whose `in_flight` differs from the executing jobs it counts, at most
/// `limit` of each (groups first, then gates by key). Reads only; [`recount_group_slots`] and
/// [`recount_gate_slots`] repair one.
///
/// One statement: the executing jobs are read once (the `jobs_executing_idx` partial index) and
/// counted twice with `GROUPING SETS` — by group, and by the gate each was counted in — then
/// compared with each table's counters. Takes no locks; safe on a live cluster.
pub async fn slots_drift(exec: impl PgExecutor<'_>, limit: i64) -> Result<Vec<SlotsDrift>> {
    let rows = sqlx::query!(
        r#"WITH executing AS (
             SELECT group_id, gate_slot, count(*) AS n FROM jobs
             WHERE state = 'executing'
             GROUP BY GROUPING SETS ((group_id), (gate_slot)))
         (SELECT g.group_id AS "group_id?", NULL::text AS "gate_key?", g.in_flight AS "in_flight!",
                 coalesce(e.n, 0) AS "executing!"
          FROM job_groups g LEFT JOIN executing e ON e.group_id = g.group_id
          WHERE g.in_flight <> coalesce(e.n, 0)
          LIMIT $1)
         UNION ALL
         (SELECT NULL::uuid, x.gate_key, x.in_flight, coalesce(e.n, 0)
          FROM job_gates x LEFT JOIN executing e ON e.gate_slot = x.gate_key
          WHERE x.in_flight <> coalesce(e.n, 0)
          ORDER BY x.gate_key
          LIMIT $1)"#,
        limit,
    )
    .fetch_all(exec)
    .await?;
    // Each arm sets exactly one of the two keys (both are primary keys, never NULL), so no row
    // is dropped here.
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let owner = match (r.group_id, r.gate_key) {
                (Some(group_id), None) => SlotOwner::Group(group_id),
                (None, Some(gate_key)) => SlotOwner::Gate(gate_key),
                _ => return None,
            };
            Some(SlotsDrift {
                owner,
                in_flight: r.in_flight,
                executing: r.executing,
            })
        })
        .collect())
}

/// Sets group `group_id`'s `in_flight` to its executing jobs (one UPDATE, under the group's row
/// lock). Returns whether the group exists.
pub async fn recount_group_slots(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<bool> {
    let r = sqlx::query!(
        "UPDATE job_groups g
                     SET in_flight = (SELECT count(*) FROM jobs
                                      WHERE group_id = g.group_id AND state = 'executing')
                     WHERE g.group_id = $1",
        group_id,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected() > 0)
}

/// Sets gate `gate_key`'s `in_flight` to the number of executing jobs counted in it
/// (`jobs.gate_slot`) (a repair for a counter that went wrong: a bug, a hand edit, a restore).
/// Returns whether it changed.
///
/// Locks the gate's row first, in its own statement, then counts in a second one (a fresh
/// snapshot): a fetch counting in this gate waits meanwhile, and a finishing stamped job's
/// trigger waits for the lock and lowers the count after this one is written, so the result is
/// exact. Runs in a transaction (a savepoint inside the caller's).
pub async fn recount_gate_slots(conn: &mut PgConnection, gate_key: &str) -> Result<bool> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    lock_rows!(&mut *tx, "job_gates", "gate_key = $1", gate_key);
    let changed = sqlx::query!(
        "UPDATE job_gates x
         SET in_flight = c.n
         FROM (SELECT count(*)::int AS n FROM jobs
               WHERE state = 'executing' AND gate_slot = $1) c
         WHERE x.gate_key = $1 AND x.in_flight <> c.n",
        gate_key,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        > 0;
    tx.commit().await?;
    Ok(changed)
}

/// A SQL expression (a scalar subquery, `bigint`) counting the parked jobs of the group whose id
/// is the SQL expression `group_id`: its waiting (`available` or `scheduled`) jobs while the
/// group or its gate is parked (the `job_group_parking` view, the one definition), else 0 (also
/// 0 for a group without a row). The same count as [`crate::Backlog::parked`], for a caller's
/// statement that lists many groups at once (e.g. `parked_count_sql("c.id")`); the jobs are
/// counted only for a parked group (the `CASE` runs its subquery on demand), so a big backlog
/// that is not parked costs nothing. `group_id` must be trusted SQL, never user input.
pub fn parked_count_sql(group_id: &str) -> String {
    format!(
        "coalesce((SELECT CASE WHEN p.parked
                          THEN (SELECT count(*) FROM jobs j
                                WHERE j.group_id = p.group_id
                                  AND j.state IN ('available', 'scheduled'))
                          ELSE 0 END
                   FROM job_group_parking p
                   WHERE p.group_id = {group_id}), 0)"
    )
}

/// A SQL condition that holds while the job with unique key `unique_key` (a SQL expression) is
/// live (`available`, `scheduled` or `executing`), for a caller's statement over many keys. The
/// same "live" as the unique index; `unique_key` must be trusted SQL, never user input.
pub fn live_job_exists_sql(unique_key: &str) -> String {
    key_job_exists_sql(
        unique_key,
        "j.state IN ('available', 'scheduled', 'executing')",
    )
}

/// A SQL condition that holds while the job with unique key `unique_key` (a SQL expression) is
/// executing (claimed by a worker and not yet finished), for a caller's statement over many
/// keys. `unique_key` must be trusted SQL, never user input.
pub fn executing_job_exists_sql(unique_key: &str) -> String {
    key_job_exists_sql(unique_key, "j.state = 'executing'")
}

/// `EXISTS` a job `j` with unique key `unique_key` (a SQL expression) that meets `state` (a
/// condition on `j.state`): the one shape of the two conditions above.
fn key_job_exists_sql(unique_key: &str, state: &str) -> String {
    format!(
        "EXISTS (
                  SELECT 1 FROM jobs j
                  WHERE j.unique_key = {unique_key}
                    AND {state})"
    )
}

/// A SQL expression (a scalar subquery, `text`: a [`JobState`] name; NULL if the key never had
/// a job) giving the state of the newest job (highest id) with unique key `unique_key` (a SQL
/// expression), live or final, for a caller's statement over many keys. The same job as
/// [`last_job`] reads; `unique_key` must be trusted SQL, never user input.
pub fn last_job_state_sql(unique_key: &str) -> String {
    format!(
        "(SELECT j.state FROM jobs j WHERE j.unique_key = {unique_key}
                 ORDER BY j.id DESC LIMIT 1)"
    )
}

/// A SQL relation (a subquery, for a caller's `FROM` or `JOIN` with an alias of its own) of the
/// waiting (`available` or `scheduled`) jobs, with columns `id` (`bigint`) and `unique_key`
/// (`text`, NULL for a job without one): the jobs [`cancel_waiting_job`] would cancel. At most
/// one per unique key (the unique index's "live").
pub const WAITING_JOBS_SQL: &str = "(SELECT j.id, j.unique_key FROM jobs j
          WHERE j.state IN ('available', 'scheduled'))";

/// A live job whose `attempt` counter is out of the range the queue counts in: at the largest
/// `integer` (the fetch keeps it there rather than fail, see [`crate::fetch`]) or negative. A
/// bug, a hand edit or a restore; such a job runs as its last attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutOfRange {
    /// The job.
    pub job_id: i64,
    /// Its queue.
    pub queue: String,
    /// Its counter.
    pub attempt: i32,
}

/// Live (`available`, `scheduled`, `executing`) jobs whose `attempt` is `i32::MAX` or negative,
/// at most `limit`, by id. Reads only (a scan of the jobs table: for `breakwater doctor`, not
/// for a hot path).
pub async fn attempts_out_of_range(
    exec: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<AttemptOutOfRange>> {
    Ok(sqlx::query_as!(
        AttemptOutOfRange,
        r#"SELECT id AS job_id, queue, attempt FROM jobs
           WHERE state IN ('available', 'scheduled', 'executing')
             AND (attempt >= 2147483647 OR attempt < 0)
           ORDER BY id
           LIMIT $1"#,
        limit,
    )
    .fetch_all(exec)
    .await?)
}
