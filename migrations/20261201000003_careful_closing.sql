-- Careful closing (issue 13, part 2; see crates/core/src/circuit.rs, "Careful closing").

-- Consecutive successful probe deliveries a half-open circuit needs before it closes: the probe,
-- then close_after_successes - 1 trials, one at a time. NULL = the cluster default
-- (circuit_defaults.close_after_successes, else config circuit.close_after_successes).
ALTER TABLE channels
    ADD COLUMN close_after_successes integer
        CHECK (close_after_successes BETWEEN 1 AND 100),
    -- Successful probe deliveries so far in the current half-open run (reset when the circuit
    -- goes from open to half_open, and when it closes).
    ADD COLUMN trial_successes integer NOT NULL DEFAULT 0;

-- The operator's run-time edit of the cluster default (NULL = the configuration's).
ALTER TABLE circuit_defaults
    ADD COLUMN close_after_successes integer
        CHECK (close_after_successes BETWEEN 1 AND 100);

-- A half-open circuit whose probe role is empty has no lease any more: the next delivery that
-- arrives becomes the probe and starts the lease. Before this rule such a circuit was taken over
-- (and audited) on every lease expiry; clear those leases so the watcher stops doing that.
UPDATE channels SET probe_deadline = NULL
WHERE circuit_state = 'half_open' AND probe_delivery_id IS NULL;
