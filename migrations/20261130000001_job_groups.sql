-- Fair scheduling (crates/queue, "Groups"): a row per job group holds its cluster-wide
-- concurrency slots, its adaptive limit and whether it is parked. The fetch walks one index
-- entry per group that has due work (a loose index scan), never the jobs behind a group's head,
-- so its cost does not grow with any one group's backlog.

CREATE TABLE job_groups (
    group_id          uuid PRIMARY KEY,
    -- The fair-share key the group belongs to (for Breakwater: the tenant). Groups of one share
    -- split that share's turn; shares split the pool. NULL = the group is its own share.
    share_key         uuid,
    -- Jobs of this group in state 'executing' on any node. Raised by the fetch that claims them
    -- (under this row's lock) and lowered by the trigger below when a job leaves 'executing'
    -- (complete, retry, snooze, discard, hand back, rescue), so it is exact whatever the path.
    in_flight         integer     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    -- The adaptive concurrency limit (AIMD), fractional; NULL = the caller's initial limit.
    concurrency_limit real,
    -- Ceiling override for this group (NULL = the caller's ceiling).
    max_in_flight     integer     CHECK (max_in_flight > 0),
    -- Parked: the fetch takes none of the group's jobs (they stay where they are: no per-job
    -- write to park or release, no wake-ups) except up to probe_slots jobs, the lowest priority
    -- number first.
    parked            boolean     NOT NULL DEFAULT false,
    probe_slots       integer     NOT NULL DEFAULT 0 CHECK (probe_slots >= 0),
    parked_at         timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_groups_share_idx ON job_groups (share_key);
CREATE INDEX job_groups_parked_idx ON job_groups (group_id) WHERE parked;

-- Every group that has jobs gets its row (enqueue also upserts it).
INSERT INTO job_groups (group_id)
SELECT DISTINCT group_id FROM jobs WHERE group_id IS NOT NULL
ON CONFLICT DO NOTHING;
UPDATE job_groups g SET in_flight = x.n
FROM (SELECT group_id, count(*)::int AS n FROM jobs WHERE state = 'executing' AND group_id IS NOT NULL GROUP BY group_id) x
WHERE g.group_id = x.group_id;
-- Breakwater's channels are groups, each in its tenant's share.
INSERT INTO job_groups (group_id, share_key)
SELECT id, tenant_id FROM channels
ON CONFLICT (group_id) DO UPDATE SET share_key = EXCLUDED.share_key;
UPDATE job_groups g SET parked = true, parked_at = now()
FROM channels c WHERE c.id = g.group_id AND c.circuit_state IN ('open', 'half_open', 'paused');
-- Jobs parked the old way (scheduled far out at the parked priority) are due now: their group's
-- flag holds them.
UPDATE jobs SET state = 'available', priority = 1, scheduled_at = now()
WHERE state = 'scheduled' AND priority >= 3 AND group_id IS NOT NULL;

-- Releasing a slot when a job leaves 'executing', whatever the statement that moved it.
CREATE FUNCTION job_groups_release_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_groups SET in_flight = greatest(in_flight - 1, 0) WHERE group_id = OLD.group_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_release_slot AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'executing' AND NEW.state <> 'executing' AND OLD.group_id IS NOT NULL)
    EXECUTE FUNCTION job_groups_release_slot();
CREATE TRIGGER jobs_release_slot_on_delete AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'executing' AND OLD.group_id IS NOT NULL)
    EXECUTE FUNCTION job_groups_release_slot();

-- The fetch's indexes: grouped jobs by group (one entry per group is read: its head), and
-- ungrouped jobs in plain priority order. Disjoint, so a job is in at most one of them.
DROP INDEX jobs_fetch_idx;
CREATE INDEX jobs_fetch_group_idx ON jobs (queue, group_id, priority, scheduled_at, id)
    WHERE state = 'available' AND group_id IS NOT NULL;
CREATE INDEX jobs_fetch_idx ON jobs (queue, priority, scheduled_at, id)
    WHERE state = 'available' AND group_id IS NULL;
-- A group's waiting jobs in the order the fetch takes them: the fetch reads only the first
-- `room` entries of a group it serves, and park/release/wake find a group's jobs here.
DROP INDEX jobs_group_idx;
CREATE INDEX jobs_group_idx ON jobs (group_id, state, priority, scheduled_at, id)
    WHERE group_id IS NOT NULL AND state IN ('available', 'scheduled');

-- The parking reconciler reads the channels that are not closed.
CREATE INDEX channels_not_closed_idx ON channels (id) WHERE circuit_state <> 'closed';

-- Per-channel ceiling of the adaptive concurrency limit (NULL = worker.channel_concurrency_ceiling),
-- mirrored into job_groups.max_in_flight in the same transaction.
ALTER TABLE channels ADD COLUMN max_in_flight integer CHECK (max_in_flight BETWEEN 1 AND 10000);

-- The queue tables churn fast (README, "What a production database needs"): autovacuum clears
-- their dead entries within seconds, not after 20 % of the table changed. (No effect where
-- autovacuum is off.)
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                      autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE job_groups SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 500);
ALTER TABLE deliveries SET (autovacuum_vacuum_scale_factor = 0.05);
