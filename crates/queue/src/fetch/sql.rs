//! The text of the two fetch statements. What each step does is documented on
//! [`super::fetch`]; the text is unchanged when it moves (BENCHMARKS.md measures it).

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

/// Each head's row in `headrows`: its group's row and its gate's row (both statements), with
/// `$more` (a string literal: further columns, each after `,\n`) after `gate_counted`.
macro_rules! headrows_select {
    ($more:literal) => {
        concat!(
            r#"    SELECT h.group_id, h.priority, h.scheduled_at,
           coalesce(g.share_key, g.group_id) AS share, g.in_flight, g.parked, g.probe_slots,
           group_cap(g.concurrency_limit, g.max_in_flight, g.fifo, $4, $5, $6) AS cap,
           (g.fifo AND NOT coalesce(fh.state = 'available' AND fh.queue = $1, false)) AS fifo_blocked,
           g.gate_key, x.in_flight AS gate_in_flight, x.parked AS gate_parked,
           x.probe_slots AS gate_probe_slots, x.probe_group,
           coalesce(x.max_in_flight, $7) AS gate_cap,
           (x.gate_key IS NOT NULL
            AND (x.parked OR coalesce(x.max_in_flight, $7) IS NOT NULL)) AS gate_counted"#,
            $more,
            r#"
    FROM heads h
    JOIN job_groups g ON g.group_id = h.group_id
    LEFT JOIN job_gates x ON x.gate_key = g.gate_key
    -- A fifo group's head: its oldest live job (one entry of jobs_group_order_idx, which only
    -- statements saying `attempt >= 0` can use; a one-time filter, not read for other groups).
    LEFT JOIN LATERAL (
        SELECT f.state, f.queue FROM jobs f
        WHERE g.fifo AND f.group_id = h.group_id
          AND f.state IN ('available', 'scheduled', 'executing') AND f.attempt >= 0
        ORDER BY f.id
        LIMIT 1) fh ON true
"#
        )
    };
}

/// The tail of `ready`'s select list (each group's share load and its rank in its share) and the
/// start of its filter (not parked, or holding a probe slot); the caller goes on with the rest
/// of the filter.
macro_rules! share_ranks {
    () => {
        r#"           sum(in_flight) OVER (PARTITION BY share) AS share_load,
           row_number() OVER (PARTITION BY share ORDER BY priority, in_flight, scheduled_at) AS share_rank
    FROM headrows
    WHERE (NOT parked OR probe_slots > 0) AND NOT fifo_blocked"#
    };
}

/// The body of `locked`: the rows of the groups in `turns`, locked `FOR UPDATE SKIP LOCKED` and
/// re-checked (not parked or a probe slot, under the cap), with each one's `room`. `$columns`:
/// the select list between `t.share_load, ` and `room` (ending in a newline); `$also`: further
/// filter lines (or `""`).
macro_rules! lock_groups {
    ($columns:literal, $also:literal) => {
        concat!(
            "    SELECT g.group_id, g.fifo, t.share, t.share_load, ",
            $columns,
            r#"           least(group_cap(g.concurrency_limit, g.max_in_flight, g.fifo, $4, $5, $6) - g.in_flight,
                 CASE WHEN g.parked THEN g.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_groups g
    JOIN turns t ON t.group_id = g.group_id
    WHERE (NOT g.parked OR g.probe_slots > 0)
"#,
            $also,
            r#"      AND g.in_flight < group_cap(g.concurrency_limit, g.max_in_flight, g.fifo, $4, $5, $6)
    FOR UPDATE OF g SKIP LOCKED
"#
        )
    };
}

/// The grouped half of `candidates`, from its `group_load` column on: each group of CTE `$from`
/// (aliased `$a`) gives its oldest due jobs, no more than its `room` (an index range each), then
/// `UNION ALL`.
macro_rules! group_jobs {
    ($from:literal, $a:literal) => {
        concat!(
            "           ", $a, ".in_flight + row_number() OVER (PARTITION BY ", $a, ".group_id\n",
            "                                            ORDER BY c.priority, c.scheduled_at, c.id) AS group_load\n",
            "    FROM ", $from, " ", $a, "\n",
            "    CROSS JOIN LATERAL (\n",
            "        (SELECT id, priority, scheduled_at FROM jobs\n",
            "         WHERE group_id = ", $a, ".group_id AND state = 'available' AND queue = $1\n",
            "           AND NOT ", $a, ".fifo\n",
            "         ORDER BY priority, scheduled_at, id\n",
            "         LIMIT ", $a, ".room)\n",
            "        UNION ALL\n",
            "        -- A fifo group: its oldest live job, if that is available in this queue (the\n",
            "        -- group row is locked, so no other fetch claims it meanwhile).\n",
            "        SELECT id, priority, scheduled_at FROM (\n",
            "            SELECT id, priority, scheduled_at, state, queue FROM jobs\n",
            "            WHERE group_id = ", $a, ".group_id AND ", $a, ".fifo\n",
            "              AND state IN ('available', 'scheduled', 'executing') AND attempt >= 0\n",
            "            ORDER BY id\n",
            "            LIMIT 1) f\n",
            "        WHERE f.state = 'available' AND f.queue = $1) c\n",
            "    WHERE ", $a, ".room > 0\n",
            "    UNION ALL\n"
        )
    };
}

/// The ungrouped half of `candidates`: jobs without a group, oldest first, at most the limit.
/// `$nulls`: the columns between `scheduled_at, ` and the row number (the grouped half's, as
/// NULLs or zeros); `$also`: further filter lines (or `""`).
macro_rules! ungrouped_jobs {
    ($nulls:literal, $also:literal) => {
        concat!(
            "    SELECT id, priority, scheduled_at, ",
            $nulls,
            r#"
           row_number() OVER (ORDER BY priority, scheduled_at, id)
    FROM (SELECT id, priority, scheduled_at FROM jobs
          WHERE state = 'available' AND group_id IS NULL AND queue = $1
"#,
            $also,
            r#"          ORDER BY queue, priority, scheduled_at, id
          LIMIT $2) u
"#
        )
    };
}

/// `turn` in `chosen`: water-filling, a share's k-th job after every share's (k-1)-th, counting
/// what each share already runs (a job without a group is its own share).
macro_rules! turn {
    () => {
        r#"               CASE WHEN share IS NULL THEN 1
                    ELSE share_load + row_number() OVER (PARTITION BY share
                                                         ORDER BY group_load, scheduled_at, id)
               END AS turn
"#
    };
}

/// The end of `picked` (the chosen jobs locked `FOR UPDATE SKIP LOCKED`, re-checked as
/// available) and `claimed`: each becomes `executing` for node `$3` with a fresh claim token and
/// `gate_slot = $gate_slot` (a string literal: SQL).
macro_rules! claim {
    ($gate_slot:literal) => {
        concat!(
            r#"    WHERE j.state = 'available'
    FOR UPDATE OF j SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET state = 'executing',
        -- Saturating: a job at the largest attempt number keeps it (and is on its last
        -- attempt whatever max_attempts says) instead of failing the whole statement, and with
        -- it every fetch of its queue ("integer out of range"; `breakwater doctor` reports it).
        attempt = least(j.attempt, 2147483646) + 1,
        attempted_at = now(),
        attempted_by = $3,
        claim_token = gen_random_uuid(),
        gate_slot = "#,
            $gate_slot,
            r#"
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.attempt, j.max_attempts,
              j.claim_token, j.unique_key, j.group_id, j.created_at
"#
        )
    };
}

/// The body of `counted`: each group's slots (and a parked group's probe slots) taken by its
/// claimed jobs (`per_group`).
macro_rules! count_group_slots {
    () => {
        r#"    UPDATE job_groups g
    SET in_flight = least(g.in_flight::int8 + c.n, 2147483647)::int,
        probe_slots = CASE WHEN g.parked THEN greatest(g.probe_slots - c.n, 0) ELSE g.probe_slots END
    FROM per_group c
    WHERE g.group_id = c.group_id
"#
    };
}

/// The claimed jobs as result rows (`held` NULL, `counted` = `$counted`, SQL), then `UNION ALL`.
macro_rules! claimed_rows {
    ($counted:literal) => {
        concat!(
            r#"SELECT c.id, c.queue, c.kind, c.args, c.priority, c.attempt, c.max_attempts, c.claim_token,
       c.unique_key, c.group_id, c.created_at, p.gate_key, NULL::text AS held,
       "#,
            $counted,
            r#" AS counted
FROM claimed c
LEFT JOIN per_group p ON p.group_id = c.group_id
UNION ALL
"#
        )
    };
}

/// The fetch statement. Parameters: `$1` queue, `$2` limit, `$3` node id, `$4` initial limit,
/// `$5` floor, `$6` ceiling, `$7` gate ceiling (NULL: a gate is capped only by its own
/// `max_in_flight`). See [`fetch`] for what each step does.
///
/// A group's cap is the SQL function `group_cap` (migration `20261208100000`, the one copy of
/// the formula; the planner inlines it).
pub(super) const FETCH: &str = concat!(
    heads_cte!(),
    r#"), headrows AS (
    -- Each head with its group's row and its gate's row (if any), as of this statement's start.
    -- gate_counted: the gate is parked or capped, so this fetch locks and counts it; a gate
    -- neither parked nor capped is never locked, re-checked or counted (its groups cost what a
    -- group without a gate costs).
    -- gate_share_load: the jobs in flight in this gate of this head's share (over the gate's
    -- groups with due work), for sharing the gate's room across shares.
"#,
    headrows_select!(
        ",\n           sum(g.in_flight) OVER (PARTITION BY g.gate_key, coalesce(g.share_key, g.group_id)) AS gate_share_load"
    ),
    r#"), ready AS (
    -- Groups that may run more now: not parked (or holding a probe slot) and under their cap,
    -- and, in a counted gate, the gate not parked (or holding a probe slot this group may use)
    -- and under its cap, if it has one.
    SELECT group_id, share, in_flight, priority, scheduled_at, gate_share_load, gate_key,
           gate_counted,
"#,
    share_ranks!(),
    r#"
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
"#,
    lock_groups!(
        r#"t.gate_share_load, g.in_flight, g.gate_key,
           (g.gate_key IS NOT NULL
            AND (t.gate_counted OR g.gate_key IS DISTINCT FROM t.gate_key)) AS counted,
"#,
        ""
    ),
    r#"), gates AS (
    -- Lock the counted gates of those groups and re-check them as they are now: a gate's room
    -- is its cap (if any) minus its jobs counted in flight, and while it is parked no more than
    -- its probe slots. Like a group's row, a gate's row another transaction holds is skipped,
    -- never waited for: the holder may be a result transaction of a node that froze
    -- inside it, and a fetch waiting for it would stall every tenant of the queue until the
    -- server ends that transaction. A skipped gate's groups are not served and are reported
    -- 'waiting' below, so the runner fetches again shortly (runner::WAITING_RETRY); a result
    -- holds a gate's row for one short transaction, so the next fetch usually finds it free
    -- (measured: crates/queue/tests/gates.rs, a hot capped gate still fills). Uncounted gates
    -- are not here: nothing locks them.
    SELECT x.gate_key, x.parked, x.probe_group,
           least(coalesce(x.max_in_flight, $7) - x.in_flight,
                 CASE WHEN x.parked THEN x.probe_slots ELSE $2 END, $2)::int AS room
    FROM job_gates x
    WHERE x.gate_key IN (SELECT gate_key FROM locked WHERE counted)
    FOR UPDATE OF x SKIP LOCKED
), served AS (
    -- The locked groups the fetch may take jobs of: without a counted gate, or with a locked
    -- gate that has room and, if it is parked, whose probe slot is unbound or bound to this
    -- group. slot_key: the gate the jobs taken here are counted in (jobs.gate_slot), or NULL.
    SELECT l.group_id, l.fifo, l.share, l.share_load, l.gate_share_load, l.in_flight, l.gate_key,
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
"#,
    group_jobs!("served", "s"),
    r#"    -- Jobs without a group, oldest first, each its own share.
"#,
    ungrouped_jobs!(
        "NULL::uuid, NULL::uuid, 0::int8,\n           NULL::text, 0::int8, NULL::int,",
        ""
    ),
    r#"), gated AS (
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
"#,
    turn!(),
    r#"        FROM gated) x
    ORDER BY priority, turn, group_load, scheduled_at, id
    LIMIT $2
), picked AS (
    SELECT j.id, c.slot_key FROM jobs j JOIN chosen c ON c.id = j.id
"#,
    claim!("picked.slot_key"),
    r#"), per_group AS (
    SELECT c.group_id, s.gate_key, s.slot_key, count(*)::int AS n
    FROM claimed c JOIN served s ON s.group_id = c.group_id
    GROUP BY c.group_id, s.gate_key, s.slot_key
), counted AS (
    -- Take the slots (and a parked group's probe slots) in the same statement.
"#,
    count_group_slots!(),
    r#"), per_gate AS (
    SELECT slot_key AS gate_key, sum(n)::int AS n FROM per_group WHERE slot_key IS NOT NULL
    GROUP BY slot_key
), gate_counted AS (
    -- And the counted gates' slots (and a parked gate's probe slot, unbinding it once used up).
    UPDATE job_gates x
    SET in_flight = least(x.in_flight::int8 + c.n, 2147483647)::int,
        probe_slots = CASE WHEN x.parked THEN greatest(x.probe_slots - c.n, 0) ELSE x.probe_slots END,
        probe_group = CASE WHEN x.parked AND x.probe_slots - c.n <= 0 THEN NULL ELSE x.probe_group END
    FROM per_gate c
    WHERE x.gate_key = c.gate_key
)
"#,
    claimed_rows!("p.slot_key IS NOT NULL"),
    r#"-- Groups with due work this fetch leaves at their cap ('capped', including those it just filled
-- to it: a slot frees when one of their jobs finishes), whose gate it leaves at the gate's cap
-- ('gate_capped', with the gate's key), or did not serve for another reason ('waiting': its
-- row or its gate's row locked by another transaction, or past this fetch's limit). Groups in a parked group or gate are none of
-- these (unless a probe slot is left): only a release or a probe wakes them. Nor is a fifo group
-- whose head waits (a retry, a rate-limit turn): the head's promotion wakes it; one whose head
-- executes is 'capped' (its cap is 1).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.group_id, NULL,
       CASE WHEN h.gate_counted AND h.gate_in_flight::int8 + coalesce(q.n, 0) >= h.gate_cap
            THEN h.gate_key END,
       CASE WHEN h.in_flight::int8 + coalesce(c.n, 0) >= h.cap THEN 'capped'
            WHEN h.gate_counted AND h.gate_in_flight::int8 + coalesce(q.n, 0) >= h.gate_cap
            THEN 'gate_capped'
            ELSE 'waiting' END,
       NULL
FROM headrows h
LEFT JOIN per_group c ON c.group_id = h.group_id
LEFT JOIN per_gate q ON q.gate_key = h.gate_key
WHERE NOT h.parked
  AND (NOT h.fifo_blocked OR h.in_flight >= h.cap)
  AND (NOT h.gate_counted OR NOT h.gate_parked OR h.gate_probe_slots - coalesce(q.n, 0) > 0)
  AND (c.n IS NULL
       OR h.in_flight::int8 + c.n >= h.cap
       OR coalesce(h.gate_counted AND h.gate_in_flight::int8 + coalesce(q.n, 0) >= h.gate_cap, false))
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
pub(super) const FETCH_LEAN: &str = concat!(
    heads_cte!(),
    r#"), headrows AS (
"#,
    headrows_select!(""),
    r#"), full_needed AS (
    SELECT EXISTS (
        SELECT 1 FROM headrows
        WHERE gate_counted AND (NOT parked OR probe_slots > 0) AND NOT fifo_blocked AND in_flight < cap
          AND (gate_cap IS NULL OR gate_in_flight < gate_cap)
          AND (NOT gate_parked
               OR (gate_probe_slots > 0 AND (probe_group IS NULL OR probe_group = group_id)))
    ) AS yes
), ready AS (
    SELECT group_id, share, in_flight, priority, scheduled_at, gate_key,
"#,
    share_ranks!(),
    r#" AND in_flight < cap AND NOT gate_counted
), turns AS (
    SELECT group_id, share, share_load, priority, gate_key
    FROM ready
    WHERE NOT (SELECT yes FROM full_needed)
    ORDER BY priority, share_load + share_rank, in_flight, scheduled_at
    LIMIT $2
), locked AS (
    -- As in FETCH; a group that moved to another gate since the statement's start is left for
    -- the next fetch (reported as waiting).
"#,
    lock_groups!(
        "g.in_flight, g.gate_key,\n",
        "      AND g.gate_key IS NOT DISTINCT FROM t.gate_key\n"
    ),
    r#"), candidates AS (
    SELECT c.id, c.priority, c.scheduled_at, l.share, l.share_load,
"#,
    group_jobs!("locked", "l"),
    ungrouped_jobs!(
        "NULL::uuid, 0::int8,",
        "            AND NOT (SELECT yes FROM full_needed)\n"
    ),
    r#"), chosen AS (
    SELECT id FROM (
        SELECT id, priority, scheduled_at, group_load,
"#,
    turn!(),
    r#"        FROM candidates) x
    ORDER BY priority, turn, group_load, scheduled_at, id
    LIMIT $2
), picked AS (
    SELECT j.id FROM jobs j JOIN chosen c ON c.id = j.id
"#,
    claim!("NULL"),
    r#"), per_group AS (
    SELECT c.group_id, l.gate_key, count(*)::int AS n
    FROM claimed c JOIN locked l ON l.group_id = c.group_id
    GROUP BY c.group_id, l.gate_key
), counted AS (
"#,
    count_group_slots!(),
    r#")
"#,
    claimed_rows!("false"),
    r#"SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'full', NULL
FROM full_needed WHERE yes
UNION ALL
-- As in FETCH (this statement claims nothing in a counted gate).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.group_id, NULL,
       CASE WHEN h.gate_counted AND h.gate_in_flight >= h.gate_cap THEN h.gate_key END,
       CASE WHEN h.in_flight::int8 + coalesce(c.n, 0) >= h.cap THEN 'capped'
            WHEN h.gate_counted AND h.gate_in_flight >= h.gate_cap THEN 'gate_capped'
            ELSE 'waiting' END,
       NULL
FROM headrows h
LEFT JOIN per_group c ON c.group_id = h.group_id
WHERE NOT h.parked
  AND (NOT h.fifo_blocked OR h.in_flight >= h.cap)
  AND (NOT h.gate_counted OR NOT h.gate_parked OR h.gate_probe_slots > 0)
  AND (c.n IS NULL
       OR h.in_flight::int8 + c.n >= h.cap
       OR coalesce(h.gate_counted AND h.gate_in_flight >= h.gate_cap, false))
"#
);
