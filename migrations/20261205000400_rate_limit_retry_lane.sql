-- A rate-limited channel's retries keep their place (ratelimit.rs, "the retry lane"): retries
-- take turns in a lane ahead of the line of waiting deliveries, and each one moves the whole
-- line back by one emission interval with a single counter instead of rewriting every turn.
ALTER TABLE channels
    -- The end of the retry lane: the instant after the last turn handed to a retry.
    ADD COLUMN rate_front_tat timestamptz,
    -- How far (microseconds) the line has been moved back by retries since the channel was made;
    -- only ever grows.
    ADD COLUMN rate_shift_us bigint NOT NULL DEFAULT 0;
ALTER TABLE deliveries
    -- rate_shift_us when this delivery took its turn in the line: its real turn is
    -- rate_slot_at + (channels.rate_shift_us - rate_slot_shift). NULL: a turn in the retry
    -- lane, which no later retry moves.
    ADD COLUMN rate_slot_shift bigint;
