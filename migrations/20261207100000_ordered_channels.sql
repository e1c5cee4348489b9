-- Ordered (fifo) channels (issue 33, part 4).
--
-- channels.ordering: 'none' (deliveries run in parallel, up to the adaptive limit) or 'fifo'
-- (one at a time, in the order accepted; a failing delivery blocks the ones behind it until it
-- is delivered or dead). Mirrored into job_groups.fifo in the same transaction, as max_in_flight
-- is: the queue knows nothing about channels.
ALTER TABLE channels ADD COLUMN ordering text NOT NULL DEFAULT 'none'
    CHECK (ordering IN ('none', 'fifo'));

-- A fifo group runs its live jobs one at a time, in id order (the order they were inserted):
-- the fetch serves it only when its oldest live job is available (not scheduled for a retry or
-- a rate-limit turn, not executing), and then takes that job and no other.
ALTER TABLE job_groups ADD COLUMN fifo boolean NOT NULL DEFAULT false;

-- A group's live jobs in id order: the fetch reads one entry of it per fifo group it considers
-- (the group's head), however long the group's backlog. jobs_group_idx orders by (state,
-- priority, scheduled_at, id) and leaves out executing jobs, so it cannot answer "the oldest
-- live job" in one probe.
--
-- `attempt >= 0` is true of every job (the column's CHECK), but the planner does not use CHECK
-- constraints to prove an index's predicate: only a statement that says it can use this index.
-- The fifo head lookups say it; every other statement on a group's jobs (the plain fetch's
-- `state = 'available'` range above all) keeps the index it had, whatever the statistics (on a
-- table never analyzed, a plain fetch chose this index and sorted the group's whole backlog).
CREATE INDEX jobs_group_order_idx ON jobs (group_id, id)
    WHERE group_id IS NOT NULL AND state IN ('available', 'scheduled', 'executing')
      AND attempt >= 0;
