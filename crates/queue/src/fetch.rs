//! Claiming jobs: fair across shares and groups, capped per group cluster-wide, at a cost that
//! does not grow with any one group's backlog.

use crate::{GroupLimits, Job, Result};
use sqlx::PgExecutor;
use uuid::Uuid;

/// The fetch statement. Parameters: `$1` queue, `$2` limit, `$3` node id, `$4` initial limit,
/// `$5` floor, `$6` ceiling. See [`fetch`] for what each step does.
const FETCH: &str = r#"
WITH RECURSIVE heads AS (
    -- Loose index scan on jobs_fetch_group_idx: one entry per group with due work (its head,
    -- the job it would run next), however many jobs wait behind it.
    (SELECT group_id, priority, scheduled_at FROM jobs
     WHERE state = 'available' AND group_id IS NOT NULL AND queue = $1
     ORDER BY queue, group_id, priority, scheduled_at, id
     LIMIT 1)
    UNION ALL
    SELECT n.group_id, n.priority, n.scheduled_at
    FROM heads h
    CROSS JOIN LATERAL (
        SELECT group_id, priority, scheduled_at FROM jobs
        WHERE state = 'available' AND group_id IS NOT NULL AND queue = $1 AND group_id > h.group_id
        ORDER BY queue, group_id, priority, scheduled_at, id
        LIMIT 1) n
), ready AS (
    -- Groups that may run more now: not parked (or holding a probe slot) and under their cap.
    SELECT h.group_id, coalesce(g.share_key, g.group_id) AS share, g.in_flight,
           h.priority, h.scheduled_at,
           sum(g.in_flight) OVER (PARTITION BY coalesce(g.share_key, g.group_id)) AS share_load,
           row_number() OVER (PARTITION BY coalesce(g.share_key, g.group_id)
                              ORDER BY h.priority, g.in_flight, h.scheduled_at) AS share_rank
    FROM heads h
    JOIN job_groups g ON g.group_id = h.group_id
    WHERE (NOT g.parked OR g.probe_slots > 0)
      AND g.in_flight < least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6))
), turns AS (
    -- The groups to serve: lowest priority number first, then the share with the fewest jobs
    -- in flight (each further group of a share counts as one more), then the group with the
    -- fewest in flight, then the oldest head. At most one group per job wanted.
    SELECT group_id, share, share_load, priority
    FROM ready
    ORDER BY priority, share_load + share_rank, in_flight, scheduled_at
    LIMIT $2
), locked AS (
    -- Lock those groups' rows, skipping any another fetch (or a result) holds, and re-check the
    -- cap on the row as it is now: two fetches never overshoot a group's cap together.
    SELECT g.group_id, t.share, t.share_load, g.in_flight, g.parked,
           least(least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)) - g.in_flight,
                 CASE WHEN g.parked THEN g.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_groups g
    JOIN turns t ON t.group_id = g.group_id
    WHERE (NOT g.parked OR g.probe_slots > 0)
      AND g.in_flight < least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6))
    FOR UPDATE OF g SKIP LOCKED
), candidates AS (
    -- Each locked group's oldest due jobs, no more than its room (an index range each).
    SELECT c.id, c.priority, c.scheduled_at, l.group_id, l.share, l.share_load,
           l.in_flight + row_number() OVER (PARTITION BY l.group_id
                                            ORDER BY c.priority, c.scheduled_at, c.id) AS group_load
    FROM locked l
    CROSS JOIN LATERAL (
        SELECT id, priority, scheduled_at FROM jobs
        WHERE group_id = l.group_id AND state = 'available' AND queue = $1
        ORDER BY priority, scheduled_at, id
        LIMIT l.room) c
    WHERE l.room > 0
    UNION ALL
    -- Jobs without a group, oldest first, each its own share.
    SELECT id, priority, scheduled_at, NULL::uuid, NULL::uuid, 0::int8,
           row_number() OVER (ORDER BY priority, scheduled_at, id)
    FROM (SELECT id, priority, scheduled_at FROM jobs
          WHERE state = 'available' AND group_id IS NULL AND queue = $1
          ORDER BY queue, priority, scheduled_at, id
          LIMIT $2) u
), chosen AS (
    -- Water-filling: a share's k-th job goes after every share's (k-1)-th, counting what each
    -- share already runs.
    SELECT id FROM (
        SELECT id, priority, scheduled_at, group_load,
               CASE WHEN share IS NULL THEN 1
                    ELSE share_load + row_number() OVER (PARTITION BY share
                                                         ORDER BY group_load, scheduled_at, id)
               END AS turn
        FROM candidates) x
    ORDER BY priority, turn, group_load, scheduled_at, id
    LIMIT $2
), picked AS (
    SELECT j.id FROM jobs j JOIN chosen c ON c.id = j.id
    WHERE j.state = 'available'
    FOR UPDATE OF j SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET state = 'executing',
        attempt = j.attempt + 1,
        attempted_at = now(),
        attempted_by = $3,
        claim_token = gen_random_uuid()
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.attempt, j.max_attempts,
              j.claim_token, j.unique_key, j.group_id, j.created_at
), counted AS (
    -- Take the slots (and a parked group's probe slots) in the same statement.
    UPDATE job_groups g
    SET in_flight = g.in_flight + c.n,
        probe_slots = CASE WHEN g.parked THEN greatest(g.probe_slots - c.n, 0) ELSE g.probe_slots END
    FROM (SELECT group_id, count(*)::int AS n FROM claimed WHERE group_id IS NOT NULL GROUP BY group_id) c
    WHERE g.group_id = c.group_id
)
SELECT id, queue, kind, args, priority, attempt, max_attempts, claim_token, unique_key, group_id,
       created_at, NULL::text AS held
FROM claimed
UNION ALL
-- Groups with due work this fetch leaves at their cap ('capped', including those it just filled
-- to it: a slot frees when one of their jobs finishes), or did not serve for another reason
-- ('waiting': locked by another fetch, or past this fetch's limit). Parked groups are neither:
-- only a release wakes them.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.group_id, NULL,
       CASE WHEN g.in_flight + coalesce(c.n, 0)
                 >= least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6))
            THEN 'capped' ELSE 'waiting' END
FROM heads h
JOIN job_groups g ON g.group_id = h.group_id
LEFT JOIN (SELECT group_id, count(*)::int AS n FROM claimed GROUP BY group_id) c
       ON c.group_id = h.group_id
WHERE NOT g.parked
  AND (c.n IS NULL
       OR g.in_flight + c.n >= least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)))
"#;

/// Claims up to `limit` available jobs of `queue` for node `node_id`.
///
/// **Order.** Lowest priority number first ([`crate::PRIORITY_URGENT`] before
/// [`crate::PRIORITY_NORMAL`]). Among equal priorities the jobs are shared out fairly:
/// - across **shares** (a group's `share_key`; for Breakwater, the tenant) by the fewest jobs in
///   flight cluster-wide, counting each job this fetch gives a share as one more (max-min fair
///   share of the slots: a share with many groups or a huge burst gets its turn and no more
///   while others wait);
/// - inside a share, across its **groups** the same way;
/// - inside a group, oldest first (`priority, scheduled_at, id`).
///
/// Jobs without a group are each their own share.
///
/// **Caps.** A group never has more than its cap in state `executing`, cluster-wide: the cap is
/// its adaptive limit ([`crate::adapt_limit`]; `limits.initial` until it has one) clamped to
/// `[limits.floor, max_in_flight or limits.ceiling]`. The fetch locks the rows of the groups it
/// serves (`FOR UPDATE SKIP LOCKED`: another fetch skips them rather than waiting), re-checks the
/// cap on the current row, and raises `in_flight` in the same statement; a trigger lowers it when
/// a job leaves `executing` by any path, including rescue, so a crashed node's slots come back
/// when its jobs are rescued. A **parked** group ([`crate::park_group`]) gives none of its jobs,
/// except up to its `probe_slots` ([`crate::wake_one`]).
///
/// **Cost.** The fetch reads one index entry per group with due work (a loose index scan of
/// `jobs_fetch_group_idx`), the group rows of those, then at most `room` index entries of each
/// group it serves. It never walks the jobs waiting behind a group's head, so a group that is
/// parked, at its cap, or holding 100 000 jobs costs it one index probe, not 100 000 rows.
///
/// One statement: the jobs are locked `FOR UPDATE SKIP LOCKED` and re-checked as `available`,
/// so two fetchers (on this node or any other) never get the same job. Each claimed job gets a
/// fresh fencing token ([`Job::claim_token`]) and its `attempt` counted.
///
/// The returned jobs are sorted by priority, then id.
pub async fn fetch(
    exec: impl PgExecutor<'_>,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<Vec<Job>> {
    Ok(fetch_batch(exec, queue, node_id, limit, limits).await?.jobs)
}

/// What one [`fetch_batch`] claimed, and what it left waiting.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// The claimed jobs, sorted by priority, then id.
    pub jobs: Vec<Job>,
    /// Groups with due jobs that were at their cap: one of their running jobs finishing frees
    /// a slot, so a runner fetches again when one of *its* jobs of these groups finishes.
    pub capped: Vec<Uuid>,
    /// Whether some group with due jobs, under its cap, got nothing (another fetch held its
    /// row, or the limit was reached): fetch again soon.
    pub waiting: bool,
}

#[derive(sqlx::FromRow)]
struct FetchRow {
    id: Option<i64>,
    queue: Option<String>,
    kind: Option<String>,
    args: Option<serde_json::Value>,
    priority: Option<i16>,
    attempt: Option<i32>,
    max_attempts: Option<i32>,
    claim_token: Option<Uuid>,
    unique_key: Option<String>,
    group_id: Option<Uuid>,
    created_at: Option<chrono::DateTime<chrono::Utc>>,
    held: Option<String>,
}

/// [`fetch`], also telling which groups it left waiting (for a runner's decision when to fetch
/// again, see [`Fetched`]).
pub async fn fetch_batch(
    exec: impl PgExecutor<'_>,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<Fetched> {
    // Not a prepared statement: a cached generic plan, chosen once the backlog grows, runs this
    // statement several times slower than a plan made for the actual parameters (measured:
    // 3.3 ms against 0.65 ms beside a 10 000-job parked group; BENCHMARKS.md).
    let rows: Vec<FetchRow> = sqlx::query_as(FETCH)
        .persistent(false)
        .bind(queue)
        .bind(limit.max(0))
        .bind(node_id)
        .bind(limits.initial as f32)
        .bind(limits.floor as f32)
        .bind(limits.ceiling as i32)
        .fetch_all(exec)
        .await?;
    let mut out = Fetched::default();
    for r in rows {
        match (r.held.as_deref(), r.id) {
            (Some("capped"), _) => out.capped.extend(r.group_id),
            (Some(_), _) => out.waiting = true,
            (None, Some(id)) => out.jobs.push(Job {
                id,
                queue: r.queue.unwrap_or_default(),
                kind: r.kind.unwrap_or_default(),
                args: r.args.unwrap_or_default(),
                priority: r.priority.unwrap_or_default(),
                attempt: r.attempt.unwrap_or_default(),
                max_attempts: r.max_attempts.unwrap_or_default(),
                claim_token: r.claim_token.unwrap_or_default(),
                unique_key: r.unique_key,
                group_id: r.group_id,
                created_at: r.created_at.unwrap_or_default(),
            }),
            (None, None) => {}
        }
    }
    out.jobs.sort_by_key(|j| (j.priority, j.id));
    Ok(out)
}

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of [`fetch`] with the same arguments, run in a
/// transaction that is rolled back (nothing is claimed). For tests and benchmarks that check
/// what a fetch reads: see [`index_rows`].
pub async fn explain_fetch(
    conn: &mut sqlx::PgConnection,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<serde_json::Value> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let (plan,): (serde_json::Value,) =
        sqlx::query_as(&format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {FETCH}"))
            .bind(queue)
            .bind(limit.max(0))
            .bind(node_id)
            .bind(limits.initial as f32)
            .bind(limits.floor as f32)
            .bind(limits.ceiling as i32)
            .fetch_one(&mut *tx)
            .await?;
    tx.rollback().await?;
    Ok(plan)
}

/// Index entries of `jobs` a plan from [`explain_fetch`] read to choose its jobs: over every
/// scan of a `jobs` index other than the primary key (whose lookups are one per claimed job),
/// the rows it returned plus the rows its filter removed, times its loops.
pub fn index_rows(plan: &serde_json::Value) -> u64 {
    fn walk(node: &serde_json::Value) -> u64 {
        let here = match node["Node Type"].as_str() {
            Some("Index Scan" | "Index Only Scan")
                if node["Relation Name"] == "jobs" && node["Index Name"] != "jobs_pkey" =>
            {
                let loops = node["Actual Loops"].as_f64().unwrap_or(1.0);
                let rows = node["Actual Rows"].as_f64().unwrap_or(0.0)
                    + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0);
                (rows * loops).round() as u64
            }
            _ => 0,
        };
        here + node["Plans"]
            .as_array()
            .into_iter()
            .flatten()
            .map(walk)
            .sum::<u64>()
    }
    plan.as_array()
        .and_then(|a| a.first())
        .map_or(0, |top| walk(&top["Plan"]))
}
