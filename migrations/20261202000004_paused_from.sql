-- What a pause interrupted (crates/core/src/circuit/manual.rs): the circuit's state when the
-- channel was paused, kept while it is paused, NULL otherwise. A resume returns a channel that
-- was paused while its circuit was open or half-open to `open` (with a probe at once), not to
-- `closed`: pausing and resuming must not close a breaker without a probe (a new-user trial).
-- NULL while paused (channels paused before this migration) resumes to `closed`, as before.
ALTER TABLE channels ADD COLUMN paused_from text
    CHECK (paused_from IN ('closed', 'open', 'half_open'));
