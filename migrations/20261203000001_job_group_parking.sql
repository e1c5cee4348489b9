-- "Parked", defined once (crates/queue, "Groups" and "Gates"): a job group's waiting jobs are
-- parked while the group is parked or its gate is. One row per job group: `parked` is that
-- rule (a group without a gate is parked only by its own flag; job_groups.gate_key references
-- job_gates, so a gate it names has a row).
--
-- Every count of parked jobs reads this view (crates/queue: group.rs `backlog`, repair.rs
-- `parked_count_sql`, stats.rs `queue_stats`), so the rule is written here and nowhere else.
-- A plain view: Postgres expands it into each statement that reads it, so a statement plans
-- exactly as if the join were written out (a backlog count walks its one group's range of
-- jobs_group_idx; a CASE on `parked` still skips counting a group that is not parked). It holds
-- no data and no lock of its own.
CREATE VIEW job_group_parking AS
SELECT g.group_id,
       g.parked OR coalesce(x.parked, false) AS parked
FROM job_groups g
LEFT JOIN job_gates x ON x.gate_key = g.gate_key;
