-- Batched results (crates/queue/src/outcome.rs, `finish_batch`): a node records the results of
-- many jobs in one statement, and that statement releases their slots itself, one update per
-- group and per gate (sorted, so two batches never deadlock), instead of one trigger update per
-- job: a channel's completions no longer queue on its group row one commit at a time.
--
-- The statement says so with the transaction-local setting `breakwater.slot_release = 'caller'`
-- (set_config(..., true): it ends with the transaction). Every other way a job leaves
-- 'executing' (a single result, rescue, hand-back, cancel, deletion) still releases through the
-- trigger, as before.
CREATE OR REPLACE FUNCTION job_groups_release_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('breakwater.slot_release', true) = 'caller' THEN
        RETURN NULL;
    END IF;
    UPDATE job_groups SET in_flight = greatest(in_flight - 1, 0) WHERE group_id = OLD.group_id;
    IF OLD.gate_slot IS NOT NULL THEN
        UPDATE job_gates SET in_flight = greatest(in_flight - 1, 0) WHERE gate_key = OLD.gate_slot;
    END IF;
    RETURN NULL;
END
$$;
