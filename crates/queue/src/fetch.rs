//! Claiming jobs: fair across shares and groups, capped per group cluster-wide, at a cost that
//! does not grow with any one group's backlog.

use crate::{GroupLimits, Job, Result};
use sqlx::PgExecutor;
use uuid::Uuid;

/// The first CTE of both fetch statements: `heads`, a loose index scan on
/// `jobs_fetch_group_idx` — one entry per group with due work (its head, the job it would run
/// next), however many jobs wait behind it. Parameter `$1`: the queue.
macro_rules! heads_cte {
    () => {
        r#"
WITH RECURSIVE heads AS (
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
"#
    };
}

/// The fetch statement. Parameters: `$1` queue, `$2` limit, `$3` node id, `$4` initial limit,
/// `$5` floor, `$6` ceiling, `$7` gate ceiling (NULL: a gate is capped only by its own
/// `max_in_flight`). See [`fetch`] for what each step does.
///
/// `CAP` below stands for a group's cap:
/// `least(greatest(floor(coalesce(concurrency_limit, $4)), $5), coalesce(max_in_flight, $6))`.
const FETCH: &str = concat!(
    heads_cte!(),
    r#"), headrows AS (
    -- Each head with its group's row and its gate's row (if any), as of this statement's start.
    -- gate_counted: the gate is parked or capped, so this fetch locks and counts it; a gate
    -- neither parked nor capped is never locked, re-checked or counted (its groups cost what a
    -- group without a gate costs).
    -- gate_share_load: the jobs in flight in this gate of this head's share (over the gate's
    -- groups with due work), for sharing the gate's room across shares.
    SELECT h.group_id, h.priority, h.scheduled_at,
           coalesce(g.share_key, g.group_id) AS share, g.in_flight, g.parked, g.probe_slots,
           least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)) AS cap,
           g.gate_key, x.in_flight AS gate_in_flight, x.parked AS gate_parked,
           x.probe_slots AS gate_probe_slots, x.probe_group,
           coalesce(x.max_in_flight, $7) AS gate_cap,
           (x.gate_key IS NOT NULL
            AND (x.parked OR coalesce(x.max_in_flight, $7) IS NOT NULL)) AS gate_counted,
           sum(g.in_flight) OVER (PARTITION BY g.gate_key, coalesce(g.share_key, g.group_id)) AS gate_share_load
    FROM heads h
    JOIN job_groups g ON g.group_id = h.group_id
    LEFT JOIN job_gates x ON x.gate_key = g.gate_key
), ready AS (
    -- Groups that may run more now: not parked (or holding a probe slot) and under their cap,
    -- and, in a counted gate, the gate not parked (or holding a probe slot this group may use)
    -- and under its cap, if it has one.
    SELECT group_id, share, in_flight, priority, scheduled_at, gate_share_load, gate_key,
           gate_counted,
           sum(in_flight) OVER (PARTITION BY share) AS share_load,
           row_number() OVER (PARTITION BY share ORDER BY priority, in_flight, scheduled_at) AS share_rank
    FROM headrows
    WHERE (NOT parked OR probe_slots > 0)
      AND in_flight < cap
      AND (NOT gate_counted
           OR ((gate_cap IS NULL OR gate_in_flight < gate_cap)
               AND (NOT gate_parked
                    OR (gate_probe_slots > 0 AND (probe_group IS NULL OR probe_group = group_id)))))
), turns AS (
    -- The groups to serve: lowest priority number first, then the share with the fewest jobs
    -- in flight (each further group of a share counts as one more), then the group with the
    -- fewest in flight, then the oldest head. At most one group per job wanted.
    SELECT group_id, share, share_load, gate_share_load, priority, gate_key, gate_counted
    FROM ready
    ORDER BY priority, share_load + share_rank, in_flight, scheduled_at
    LIMIT $2
), locked AS (
    -- Lock those groups' rows, skipping any another fetch (or a result) holds, and re-check the
    -- cap on the row as it is now: two fetches never overshoot a group's cap together. The gate
    -- is read from the locked row too: a group changes gate only under this lock. `counted`:
    -- the group's gate is to be locked and counted (parked or capped as of the statement's
    -- start, or a gate the group moved to since, which is re-checked under its lock below).
    SELECT g.group_id, t.share, t.share_load, t.gate_share_load, g.in_flight, g.gate_key,
           (g.gate_key IS NOT NULL
            AND (t.gate_counted OR g.gate_key IS DISTINCT FROM t.gate_key)) AS counted,
           least(least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)) - g.in_flight,
                 CASE WHEN g.parked THEN g.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_groups g
    JOIN turns t ON t.group_id = g.group_id
    WHERE (NOT g.parked OR g.probe_slots > 0)
      AND g.in_flight < least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6))
    FOR UPDATE OF g SKIP LOCKED
), gates AS (
    -- Lock the counted gates of those groups and re-check them as they are now: a gate's room
    -- is its cap (if any) minus its jobs counted in flight, and while it is parked no more than
    -- its probe slots. Unlike a group's row, a gate's row is *waited for*, not skipped: one
    -- capped gate is shared by every group of a host, and every result of its counted jobs
    -- updates it (the slot-release trigger), so under load it is locked much of the time and a
    -- skipping fetch would starve. The wait is one commit at most. Lock order is group rows,
    -- then gate rows, everywhere (fetch, trigger, host transitions), so the wait cannot
    -- deadlock. Uncounted gates are not here: nothing waits for them.
    SELECT x.gate_key, x.parked, x.probe_group,
           least(coalesce(x.max_in_flight, $7) - x.in_flight,
                 CASE WHEN x.parked THEN x.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_gates x
    WHERE x.gate_key IN (SELECT gate_key FROM locked WHERE counted)
    FOR UPDATE OF x
), served AS (
    -- The locked groups the fetch may take jobs of: without a counted gate, or with a locked
    -- gate that has room and, if it is parked, whose probe slot is unbound or bound to this
    -- group. slot_key: the gate the jobs taken here are counted in (jobs.gate_slot), or NULL.
    SELECT l.group_id, l.share, l.share_load, l.gate_share_load, l.in_flight, l.gate_key,
           CASE WHEN l.counted THEN l.gate_key END AS slot_key,
           least(l.room, coalesce(x.room, l.room)) AS room, x.room AS gate_room
    FROM locked l
    LEFT JOIN gates x ON l.counted AND x.gate_key = l.gate_key
    WHERE NOT l.counted
       OR (x.room > 0 AND (NOT x.parked OR x.probe_group IS NULL OR x.probe_group = l.group_id))
), candidates AS (
    -- Each served group's oldest due jobs, no more than its room (an index range each).
    SELECT c.id, c.priority, c.scheduled_at, s.group_id, s.share, s.share_load,
           s.slot_key, s.gate_share_load, s.gate_room,
           s.in_flight + row_number() OVER (PARTITION BY s.group_id
                                            ORDER BY c.priority, c.scheduled_at, c.id) AS group_load
    FROM served s
    CROSS JOIN LATERAL (
        SELECT id, priority, scheduled_at FROM jobs
        WHERE group_id = s.group_id AND state = 'available' AND queue = $1
        ORDER BY priority, scheduled_at, id
        LIMIT s.room) c
    WHERE s.room > 0
    UNION ALL
    -- Jobs without a group, oldest first, each its own share.
    SELECT id, priority, scheduled_at, NULL::uuid, NULL::uuid, 0::int8,
           NULL::text, 0::int8, NULL::int,
           row_number() OVER (ORDER BY priority, scheduled_at, id)
    FROM (SELECT id, priority, scheduled_at FROM jobs
          WHERE state = 'available' AND group_id IS NULL AND queue = $1
          ORDER BY queue, priority, scheduled_at, id
          LIMIT $2) u
), gated AS (
    -- A counted gate's room goes to its candidates in water-filling order inside the gate: a share's
    -- k-th job in the gate goes after every share's (k-1)-th, counting what each share already
    -- runs in that gate (so a share with many groups in a gate cannot take all of its room).
    -- Candidates past their gate's room drop out here, before the turns below are counted.
    SELECT id, priority, scheduled_at, group_load, share, share_load, slot_key FROM (
        SELECT id, priority, scheduled_at, group_load, share, share_load, slot_key, gate_room,
               row_number() OVER (PARTITION BY slot_key
                                  ORDER BY priority, gate_turn, group_load, scheduled_at, id) AS gate_rank
        FROM (SELECT *, gate_share_load + row_number() OVER (PARTITION BY slot_key, share
                                                             ORDER BY group_load, scheduled_at, id) AS gate_turn
              FROM candidates) y) z
    WHERE slot_key IS NULL OR gate_rank <= gate_room
), chosen AS (
    -- Water-filling: a share's k-th job goes after every share's (k-1)-th, counting what each
    -- share already runs.
    SELECT id, slot_key FROM (
        SELECT id, priority, scheduled_at, group_load, slot_key,
               CASE WHEN share IS NULL THEN 1
                    ELSE share_load + row_number() OVER (PARTITION BY share
                                                         ORDER BY group_load, scheduled_at, id)
               END AS turn
        FROM gated) x
    ORDER BY priority, turn, group_load, scheduled_at, id
    LIMIT $2
), picked AS (
    SELECT j.id, c.slot_key FROM jobs j JOIN chosen c ON c.id = j.id
    WHERE j.state = 'available'
    FOR UPDATE OF j SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET state = 'executing',
        attempt = j.attempt + 1,
        attempted_at = now(),
        attempted_by = $3,
        claim_token = gen_random_uuid(),
        gate_slot = picked.slot_key
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.attempt, j.max_attempts,
              j.claim_token, j.unique_key, j.group_id, j.created_at
), per_group AS (
    SELECT c.group_id, s.gate_key, s.slot_key, count(*)::int AS n
    FROM claimed c JOIN served s ON s.group_id = c.group_id
    GROUP BY c.group_id, s.gate_key, s.slot_key
), counted AS (
    -- Take the slots (and a parked group's probe slots) in the same statement.
    UPDATE job_groups g
    SET in_flight = g.in_flight + c.n,
        probe_slots = CASE WHEN g.parked THEN greatest(g.probe_slots - c.n, 0) ELSE g.probe_slots END
    FROM per_group c
    WHERE g.group_id = c.group_id
), per_gate AS (
    SELECT slot_key AS gate_key, sum(n)::int AS n FROM per_group WHERE slot_key IS NOT NULL
    GROUP BY slot_key
), gate_counted AS (
    -- And the counted gates' slots (and a parked gate's probe slot, unbinding it once used up).
    UPDATE job_gates x
    SET in_flight = x.in_flight + c.n,
        probe_slots = CASE WHEN x.parked THEN greatest(x.probe_slots - c.n, 0) ELSE x.probe_slots END,
        probe_group = CASE WHEN x.parked AND x.probe_slots - c.n <= 0 THEN NULL ELSE x.probe_group END
    FROM per_gate c
    WHERE x.gate_key = c.gate_key
)
SELECT c.id, c.queue, c.kind, c.args, c.priority, c.attempt, c.max_attempts, c.claim_token,
       c.unique_key, c.group_id, c.created_at, p.gate_key, NULL::text AS held,
       p.slot_key IS NOT NULL AS counted
FROM claimed c
LEFT JOIN per_group p ON p.group_id = c.group_id
UNION ALL
-- Groups with due work this fetch leaves at their cap ('capped', including those it just filled
-- to it: a slot frees when one of their jobs finishes), whose gate it leaves at the gate's cap
-- ('gate_capped', with the gate's key), or did not serve for another reason ('waiting': locked
-- by another fetch, or past this fetch's limit). Groups in a parked group or gate are none of
-- these (unless a probe slot is left): only a release or a probe wakes them.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.group_id, NULL,
       CASE WHEN h.gate_counted AND h.gate_in_flight + coalesce(q.n, 0) >= h.gate_cap
            THEN h.gate_key END,
       CASE WHEN h.in_flight + coalesce(c.n, 0) >= h.cap THEN 'capped'
            WHEN h.gate_counted AND h.gate_in_flight + coalesce(q.n, 0) >= h.gate_cap
            THEN 'gate_capped'
            ELSE 'waiting' END,
       NULL
FROM headrows h
LEFT JOIN per_group c ON c.group_id = h.group_id
LEFT JOIN per_gate q ON q.gate_key = h.gate_key
WHERE NOT h.parked
  AND (NOT h.gate_counted OR NOT h.gate_parked OR h.gate_probe_slots - coalesce(q.n, 0) > 0)
  AND (c.n IS NULL
       OR h.in_flight + c.n >= h.cap
       OR coalesce(h.gate_counted AND h.gate_in_flight + coalesce(q.n, 0) >= h.gate_cap, false))
"#
);

/// The fetch when no counted gate (parked or capped, see [`fetch`]) has a group that could run:
/// the statement `FETCH` was before gates, plus one join of the gate rows to leave such
/// groups out. Parameters as `FETCH`. About 0.35 ms cheaper to plan than `FETCH` (fewer
/// CTEs; BENCHMARKS.md, "Gates"), and it locks and writes no gate row.
///
/// If some group of a counted gate could run now (its gate under its cap, or parked with a
/// probe slot it may use; the group itself ready), it claims nothing and returns one row with
/// `held = 'full'`: the caller then runs `FETCH`, which serves every group in one fair order.
/// Groups of counted gates that cannot run (parked gate, or at its cap) are left out here and
/// reported as `FETCH` reports them.
const FETCH_LEAN: &str = concat!(
    heads_cte!(),
    r#"), headrows AS (
    SELECT h.group_id, h.priority, h.scheduled_at,
           coalesce(g.share_key, g.group_id) AS share, g.in_flight, g.parked, g.probe_slots,
           least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)) AS cap,
           g.gate_key, x.in_flight AS gate_in_flight, x.parked AS gate_parked,
           x.probe_slots AS gate_probe_slots, x.probe_group,
           coalesce(x.max_in_flight, $7) AS gate_cap,
           (x.gate_key IS NOT NULL
            AND (x.parked OR coalesce(x.max_in_flight, $7) IS NOT NULL)) AS gate_counted
    FROM heads h
    JOIN job_groups g ON g.group_id = h.group_id
    LEFT JOIN job_gates x ON x.gate_key = g.gate_key
), full_needed AS (
    SELECT EXISTS (
        SELECT 1 FROM headrows
        WHERE gate_counted AND (NOT parked OR probe_slots > 0) AND in_flight < cap
          AND (gate_cap IS NULL OR gate_in_flight < gate_cap)
          AND (NOT gate_parked
               OR (gate_probe_slots > 0 AND (probe_group IS NULL OR probe_group = group_id)))
    ) AS yes
), ready AS (
    SELECT group_id, share, in_flight, priority, scheduled_at, gate_key,
           sum(in_flight) OVER (PARTITION BY share) AS share_load,
           row_number() OVER (PARTITION BY share ORDER BY priority, in_flight, scheduled_at) AS share_rank
    FROM headrows
    WHERE (NOT parked OR probe_slots > 0) AND in_flight < cap AND NOT gate_counted
), turns AS (
    SELECT group_id, share, share_load, priority, gate_key
    FROM ready
    WHERE NOT (SELECT yes FROM full_needed)
    ORDER BY priority, share_load + share_rank, in_flight, scheduled_at
    LIMIT $2
), locked AS (
    -- As in FETCH; a group that moved to another gate since the statement's start is left for
    -- the next fetch (reported as waiting).
    SELECT g.group_id, t.share, t.share_load, g.in_flight, g.gate_key,
           least(least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6)) - g.in_flight,
                 CASE WHEN g.parked THEN g.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_groups g
    JOIN turns t ON t.group_id = g.group_id
    WHERE (NOT g.parked OR g.probe_slots > 0)
      AND g.gate_key IS NOT DISTINCT FROM t.gate_key
      AND g.in_flight < least(greatest(floor(coalesce(g.concurrency_limit, $4)), $5), coalesce(g.max_in_flight, $6))
    FOR UPDATE OF g SKIP LOCKED
), candidates AS (
    SELECT c.id, c.priority, c.scheduled_at, l.share, l.share_load,
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
    SELECT id, priority, scheduled_at, NULL::uuid, 0::int8,
           row_number() OVER (ORDER BY priority, scheduled_at, id)
    FROM (SELECT id, priority, scheduled_at FROM jobs
          WHERE state = 'available' AND group_id IS NULL AND queue = $1
            AND NOT (SELECT yes FROM full_needed)
          ORDER BY queue, priority, scheduled_at, id
          LIMIT $2) u
), chosen AS (
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
        claim_token = gen_random_uuid(),
        gate_slot = NULL
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.attempt, j.max_attempts,
              j.claim_token, j.unique_key, j.group_id, j.created_at
), per_group AS (
    SELECT c.group_id, l.gate_key, count(*)::int AS n
    FROM claimed c JOIN locked l ON l.group_id = c.group_id
    GROUP BY c.group_id, l.gate_key
), counted AS (
    UPDATE job_groups g
    SET in_flight = g.in_flight + c.n,
        probe_slots = CASE WHEN g.parked THEN greatest(g.probe_slots - c.n, 0) ELSE g.probe_slots END
    FROM per_group c
    WHERE g.group_id = c.group_id
)
SELECT c.id, c.queue, c.kind, c.args, c.priority, c.attempt, c.max_attempts, c.claim_token,
       c.unique_key, c.group_id, c.created_at, p.gate_key, NULL::text AS held,
       false AS counted
FROM claimed c
LEFT JOIN per_group p ON p.group_id = c.group_id
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'full', NULL
FROM full_needed WHERE yes
UNION ALL
-- As in FETCH (this statement claims nothing in a counted gate).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.group_id, NULL,
       CASE WHEN h.gate_counted AND h.gate_in_flight >= h.gate_cap THEN h.gate_key END,
       CASE WHEN h.in_flight + coalesce(c.n, 0) >= h.cap THEN 'capped'
            WHEN h.gate_counted AND h.gate_in_flight >= h.gate_cap THEN 'gate_capped'
            ELSE 'waiting' END,
       NULL
FROM headrows h
LEFT JOIN per_group c ON c.group_id = h.group_id
WHERE NOT h.parked
  AND (NOT h.gate_counted OR NOT h.gate_parked OR h.gate_probe_slots > 0)
  AND (c.n IS NULL
       OR h.in_flight + c.n >= h.cap
       OR coalesce(h.gate_counted AND h.gate_in_flight >= h.gate_cap, false))
"#
);

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
/// **Gates.** A group in a gate ([`crate::set_group_gate`]) is served only if its gate lets it
/// too. A gate is **counted** only when it is parked ([`crate::park_gate`]) or capped (its
/// `max_in_flight`, else `limits.gate_ceiling`; both optional): then the fetch locks its row
/// after the group rows (`FOR UPDATE`, waited for: one commit at most, lock order group rows
/// then gate rows everywhere), re-checks it on the current row (not parked, or a probe slot that
/// is unbound or bound to this group, [`crate::wake_one_in_gate`]; under its cap), raises its
/// `in_flight` and stamps each job it takes with the gate (`jobs.gate_slot`) in the same
/// statement; the slot-release trigger lowers exactly the stamped gate's count. Inside a counted
/// gate its room goes to its candidates in water-filling order: across shares by the jobs each
/// runs *in that gate*, then across a share's groups, so a share with many groups in a gate, or
/// one busy elsewhere, gets its turn and no more. A gate that is neither parked nor capped is
/// not locked, not re-checked and not counted: its groups cost what groups without a gate cost,
/// and its row is never written by claims or results (a host shared by many tenants is not one
/// hot row). A fetch whose snapshot predates a park or a cap may still take such a gate's jobs
/// uncounted; a fetch that starts after [`crate::park_gate`] or [`crate::set_gate_max_in_flight`]
/// returned never does.
///
/// **Cost.** The fetch reads one index entry per group with due work (a loose index scan of
/// `jobs_fetch_group_idx`), the group rows of those, then at most `room` index entries of each
/// group it serves. It never walks the jobs waiting behind a group's head, so a group that is
/// parked, at its cap, or holding 100 000 jobs costs it one index probe, not 100 000 rows; the
/// same for every group of a gate that is parked or at its cap.
///
/// **Two statements, one claim.** A lean statement runs first (`FETCH_LEAN`: no gate row locked
/// or written, about 0.35 ms less planning); only when some group of a counted gate could run
/// does it claim nothing and the full one (`FETCH`) run instead, so the fair order is always
/// computed over every group at once. Each is one statement: the jobs are locked `FOR UPDATE
/// SKIP LOCKED` and re-checked as `available`, so two fetchers (on this node or any other) never
/// get the same job. Each claimed job gets a
/// fresh fencing token ([`Job::claim_token`]) and its `attempt` counted.
///
/// The returned jobs are sorted by priority, then id.
pub async fn fetch<'c>(
    exec: impl PgExecutor<'c> + Copy,
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
    /// Gates ([`crate::set_group_gate`]) with due jobs that were at their cap: one of their
    /// running jobs (of any of their groups) finishing frees a slot, so a runner fetches again
    /// when one of *its* jobs of these gates finishes. Each gate once.
    pub capped_gates: Vec<String>,
    /// Whether some group with due jobs, under its cap, got nothing (another fetch held its
    /// row, or the limit was reached): fetch again soon.
    pub waiting: bool,
    /// Whether counted gates (capped or parked) took part: this fetch claimed a job counted in
    /// a gate, or left a gate at its cap. A runner passes it as `full_first` to its next
    /// [`fetch_batch_from`] of the same queue, so a queue busy with a capped host runs the
    /// full statement at once instead of the lean one and then the full one.
    pub counted_gates: bool,
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
    gate_key: Option<String>,
    held: Option<String>,
    counted: Option<bool>,
}

/// [`fetch`], also telling which groups it left waiting (for a runner's decision when to fetch
/// again, see [`Fetched`]).
pub async fn fetch_batch<'c>(
    exec: impl PgExecutor<'c> + Copy,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<Fetched> {
    fetch_batch_from(exec, queue, node_id, limit, limits, false).await
}

/// [`fetch_batch`], starting with the full statement when `full_first` (the previous fetch's
/// [`Fetched::counted_gates`]) instead of the lean one. Same claims either way: only the cost
/// differs (one statement instead of two while counted gates keep having work; the lean one
/// again once they have none).
pub async fn fetch_batch_from<'c>(
    exec: impl PgExecutor<'c> + Copy,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
    full_first: bool,
) -> Result<Fetched> {
    // Not a prepared statement: a cached generic plan, chosen once the backlog grows, runs this
    // statement several times slower than a plan made for the actual parameters (measured:
    // 3.3 ms against 0.65 ms beside a 10 000-job parked group; BENCHMARKS.md).
    let run = |sql: &'static str| {
        sqlx::query_as::<_, FetchRow>(sql)
            .persistent(false)
            .bind(queue)
            .bind(limit.max(0))
            .bind(node_id)
            .bind(limits.initial as f32)
            .bind(limits.floor as f32)
            .bind(limits.ceiling as i32)
            .bind(limits.gate_ceiling.map(|c| c.max(1) as i32))
            .fetch_all(exec)
    };
    // The lean statement first; the full one only when a counted gate has a group that could
    // run (then the lean one claimed nothing).
    let mut rows: Vec<FetchRow> = run(if full_first { FETCH } else { FETCH_LEAN }).await?;
    if !full_first && rows.iter().any(|r| r.held.as_deref() == Some("full")) {
        rows = run(FETCH).await?;
    }
    let mut out = Fetched::default();
    for r in rows {
        match (r.held.as_deref(), r.id) {
            (Some(held), _) => {
                match held {
                    "capped" => out.capped.extend(r.group_id),
                    "gate_capped" => {}
                    _ => out.waiting = true,
                }
                if let Some(gate) = r.gate_key {
                    if !out.capped_gates.contains(&gate) {
                        out.capped_gates.push(gate);
                    }
                }
            }
            (None, Some(id)) => {
                out.counted_gates |= r.counted == Some(true);
                out.jobs.push(Job {
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
                    gate_key: r.gate_key,
                    created_at: r.created_at.unwrap_or_default(),
                })
            }
            (None, None) => {}
        }
    }
    out.counted_gates |= !out.capped_gates.is_empty();
    out.jobs.sort_by_key(|j| (j.priority, j.id));
    Ok(out)
}

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of [`fetch`]'s full statement (the one that handles
/// counted gates; the lean one reads the same index entries) with the same arguments, run in a
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
            .bind(limits.gate_ceiling.map(|c| c.max(1) as i32))
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
