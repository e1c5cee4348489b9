-- Issue 31, item 4: a delivery that lost its rate-limit turn (a retry, or a job parked past its
-- turn) takes its place in line by acceptance order, before the deliveries accepted after it
-- (crates/core/src/ratelimit.rs, take_slot). Finding the end of the line, the first turn held by
-- a delivery accepted after it, and moving the turns behind it back by one interval each read a
-- range of a channel's held turns, in turn order. Only waiting deliveries hold a turn (an attempt
-- clears it), so the index is small.
CREATE INDEX deliveries_rate_turn_idx ON deliveries (channel_id, rate_slot_at)
    WHERE rate_slot_at IS NOT NULL;
