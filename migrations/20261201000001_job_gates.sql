-- Gates (crates/queue, "Gates"): a second level above job groups. A gate, keyed by text (for
-- Breakwater: a receiving host), is a set of groups that share a parked flag, a probe slot and a
-- cluster-wide concurrency cap. A group has at most one gate; a group without one behaves as
-- before.

CREATE TABLE job_gates (
    gate_key      text PRIMARY KEY,
    -- Jobs counted in this gate that are in state 'executing' on any node: those whose
    -- jobs.gate_slot is this key. Only a *counted* gate (capped or parked) counts: the fetch
    -- that claims a job of a counted gate raises this under the row's lock and sets the job's
    -- gate_slot; job_groups_release_slot() below lowers it when such a job leaves 'executing' by
    -- any path. A gate without a cap and not parked is never written by claims or results (a
    -- host shared by many tenants must not be one hot row).
    in_flight     integer     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    -- The gate's own cap on in_flight (NULL = the caller's GroupLimits::gate_ceiling, which is
    -- itself optional: NULL and no ceiling = not capped).
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

-- The gate a job was counted in, set by the fetch's claim when (and only when) it locked and
-- counted the job's gate (a capped or parked gate), or by set_gate_max_in_flight when a cap is
-- turned on under load; NULL otherwise. The slot release lowers exactly that gate's count, so
-- the count stays exact whatever happens to the group's gate or the cap meanwhile. Meaningful
-- only while the job is 'executing' (left as it is afterwards; every claim overwrites it).
ALTER TABLE jobs ADD COLUMN gate_slot text;

-- Releasing a slot when a job leaves 'executing' (same triggers as before): the group's, and the
-- gate's the job was counted in, if any (no lookup through job_groups; a job not counted touches
-- no gate row). Lock order stays group row, then gate row.
CREATE OR REPLACE FUNCTION job_groups_release_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_groups SET in_flight = greatest(in_flight - 1, 0) WHERE group_id = OLD.group_id;
    IF OLD.gate_slot IS NOT NULL THEN
        UPDATE job_gates SET in_flight = greatest(in_flight - 1, 0) WHERE gate_key = OLD.gate_slot;
    END IF;
    RETURN NULL;
END
$$;

-- Counted gate rows churn like group rows (one update per claim and per finished job).
ALTER TABLE job_gates SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 500);
