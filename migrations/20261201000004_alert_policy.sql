-- Alerts an on-call can live with (issue 13, part 3).

-- The flapping policy in force, cluster-wide (one row). Every node writes its configured
-- `[alerts]` values here at start, so every node decides with the same numbers.
CREATE TABLE alert_policy (
    singleton            boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    -- More than this many alerting transitions of one circuit within the window = flapping.
    flapping_transitions integer NOT NULL CHECK (flapping_transitions > 0),
    -- The window, and the quiet time that ends flapping, ms.
    flapping_window_ms   bigint  NOT NULL CHECK (flapping_window_ms > 0),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
INSERT INTO alert_policy (flapping_transitions, flapping_window_ms) VALUES (5, 600000);

-- Per channel circuit: its recent alerting transitions and whether its alerts are suppressed
-- (flapping). Written only by the winner of a transition, under the channel row's lock.
CREATE TABLE circuit_alert_state (
    channel_id         uuid PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    -- Times (database clock) of the alerting transitions within the window, oldest first;
    -- at most 1000 kept.
    recent             timestamptz[] NOT NULL DEFAULT '{}',
    last_transition_at timestamptz NOT NULL,
    -- Set while the circuit flaps (its transition alerts suppressed); NULL otherwise.
    flapping_since     timestamptz,
    -- Transitions not alerted one by one since flapping began (the one that began it included).
    suppressed         integer NOT NULL DEFAULT 0 CHECK (suppressed >= 0)
);

-- A tenant's own pause and resume page its on-call only when it asks for it.
ALTER TABLE tenants ADD COLUMN alert_on_manual boolean NOT NULL DEFAULT false;

-- The endpoint rejects our requests (401/403) since this time (database clock): set by the first
-- rejection of a streak (exactly one winner audits and alerts), cleared by the next success.
ALTER TABLE channels ADD COLUMN rejected_since timestamptz;
