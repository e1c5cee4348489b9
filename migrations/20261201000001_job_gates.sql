-- Gates (crates/queue, "Gates"): a second level above job groups. A gate, keyed by text (for
-- Breakwater: a receiving host), is a set of groups that share a parked flag, a probe slot and a
-- cluster-wide concurrency cap. A group has at most one gate; a group without one behaves as
-- before.

CREATE TABLE job_gates (
    gate_key      text PRIMARY KEY,
    -- Jobs of the gate's groups in state 'executing' on any node: raised by the fetch that
    -- claims them (under this row's lock), lowered by job_groups_release_slot() below when a job
    -- leaves 'executing' by any path, and moved with the group's own count when a group changes
    -- gate (set_group_gate), so it always equals the sum of its groups' in_flight.
    in_flight     integer     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    -- The gate's own cap on in_flight (NULL = the caller's GroupLimits::gate_ceiling).
    max_in_flight integer     CHECK (max_in_flight > 0),
    -- Parked: the fetch takes no job of any of the gate's groups (one row update for the whole
    -- gate; the jobs stay where they are) except up to probe_slots jobs, of group probe_group
    -- only when that is set.
    parked        boolean     NOT NULL DEFAULT false,
    probe_slots   integer     NOT NULL DEFAULT 0 CHECK (probe_slots >= 0),
    probe_group   uuid,
    parked_at     timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_gates_parked_idx ON job_gates (gate_key) WHERE parked;

ALTER TABLE job_groups ADD COLUMN gate_key text REFERENCES job_gates (gate_key);
CREATE INDEX job_groups_gate_idx ON job_groups (gate_key) WHERE gate_key IS NOT NULL;

-- Releasing a slot when a job leaves 'executing' (same triggers as before): the group's, and its
-- gate's if it has one. The group row is updated first and its gate read from the row as
-- updated (under its lock), so a concurrent set_group_gate, which locks that row before moving
-- the count, is either wholly before or wholly after this.
CREATE OR REPLACE FUNCTION job_groups_release_slot() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    gate text;
BEGIN
    UPDATE job_groups SET in_flight = greatest(in_flight - 1, 0) WHERE group_id = OLD.group_id
    RETURNING gate_key INTO gate;
    IF gate IS NOT NULL THEN
        UPDATE job_gates SET in_flight = greatest(in_flight - 1, 0) WHERE gate_key = gate;
    END IF;
    RETURN NULL;
END
$$;

-- Gate rows churn like group rows (one update per claim and per finished job).
ALTER TABLE job_gates SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 500);
