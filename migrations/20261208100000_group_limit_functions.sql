-- One formula per rule for a job group's concurrency (crates/queue): the fetch enforces the cap,
-- the adaptive limit moves within the same clamp, and both statements call these functions
-- instead of each writing the expression. Rust's `GroupLimits::cap` is the same cap for the
-- API's channel view; the test `the_cap_in_rust_is_the_cap_the_fetch_enforces` checks that the
-- two agree.
--
-- `group_limit` and `group_cap` are single SQL expressions declared IMMUTABLE, which the
-- planner inlines: a statement that calls them is planned exactly as if the expression were
-- written in place (the fetch's plan and its EXPLAIN row-count test are unchanged).

-- A group's adaptive limit as the fetch enforces it, before rounding: `lim` (NULL until the
-- group's first adaptation: `initial`) at least `lo` and at most the group's own
-- `max_in_flight`, else `hi` (a `max_in_flight` below `lo` wins). In jobs in flight
-- cluster-wide; real, as the limit moves in fractions.
CREATE FUNCTION group_limit(lim real, max_in_flight int, initial real, lo real, hi int)
RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT least(greatest(coalesce(lim, initial), lo), coalesce(max_in_flight, hi)::real)
$$;

-- A group's cap, the most of its jobs in flight at once cluster-wide: its `group_limit`
-- rounded down, and 1 for a FIFO group (its jobs run one at a time, in order).
CREATE FUNCTION group_cap(lim real, max_in_flight int, fifo boolean, initial real, lo real, hi int)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT least(floor(group_limit(lim, max_in_flight, initial, lo, hi)),
                 CASE WHEN fifo THEN 1 END)
$$;

-- The adaptive limit's rule (crates/queue, `adapt_limit`'s doc: a gradient rule comparing the
-- group's recent latency with its own long-run baseline), as a function of the group row's
-- values (`g_*`) and one feedback (`f_*`): `f_latency` the mean latency of `f_runs` successes
-- in ms (NULL: an overload), `f_recent_w` and `f_baseline_w` the weights of those runs,
-- `g_load` the jobs in flight the growth condition counts (`in_flight ≥ limit / 2`). Returns
-- the row's new limit, recent and baseline latencies (ms) and last cut time. Called by
-- `adapt_limit`'s UPDATE and by `finish_batch`'s release of a batch's slots, each under the
-- group row's lock, so the rule is written once.
CREATE FUNCTION group_limit_adapted(
    g_limit real, g_max_in_flight int, g_load real, g_recent real, g_baseline real,
    g_cut_at timestamptz,
    f_latency real, f_runs real, f_recent_w real, f_baseline_w real,
    initial real, lo real, hi int, decrease_factor real, tolerance real, noise_ms real)
RETURNS TABLE (new_limit real, new_recent_ms real, new_baseline_ms real, new_cut_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN d.cut THEN greatest(b.lim * decrease_factor, b.floor_)
                WHEN d.grow THEN least(b.lim + f_runs, b.ceiling_)
                ELSE g_limit END,
           r.recent,
           bl.baseline,
           CASE WHEN d.cut THEN now() ELSE g_cut_at END
    FROM (SELECT group_limit(g_limit, g_max_in_flight, initial, lo, hi) AS lim,
                 least(lo, coalesce(g_max_in_flight, hi)::real) AS floor_,
                 coalesce(g_max_in_flight, hi)::real AS ceiling_) b
    CROSS JOIN LATERAL (SELECT CASE
            WHEN f_latency IS NULL THEN g_recent
            WHEN g_recent IS NULL THEN f_latency
            ELSE g_recent + f_recent_w * (f_latency - g_recent)
        END AS recent) r
    CROSS JOIN LATERAL (SELECT CASE
            WHEN f_latency IS NULL THEN g_baseline
            ELSE least(r.recent, coalesce(g_baseline + f_baseline_w * (r.recent - g_baseline),
                                          r.recent))
        END AS baseline) bl
    CROSS JOIN LATERAL (SELECT r.recent <= tolerance * greatest(bl.baseline, noise_ms) AS healthy) h
    CROSS JOIN LATERAL (SELECT
            f_latency IS NULL
                OR (NOT h.healthy
                    AND (g_cut_at IS NULL
                         OR g_cut_at + make_interval(secs => r.recent / 1000.0) <= now()))
                AS cut,
            h.healthy AND g_load >= b.lim / 2 AS grow) d
$$;
