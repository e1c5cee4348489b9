-- Issue 34: rescue after an outage must not rescue live claims. A node judges another node dead
-- (its heartbeat older than the rescue horizon) only once its own heartbeat has been continuous
-- for that horizon: `beating_since` is when the node's current unbroken run of heartbeats began
-- (a failed beat, or a gap longer than the node allows between two beats, starts a new one).
-- Existing rows start their run now.
ALTER TABLE queue_nodes ADD COLUMN beating_since timestamptz NOT NULL DEFAULT now();
