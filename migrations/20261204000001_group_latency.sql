-- The adaptive concurrency limit follows each group's own latency (crates/queue, `adapt_limit`):
-- a gradient rule, as Netflix concurrency-limits' Gradient2 or TCP Vegas, in place of a fixed
-- latency target. Both estimates are of successful runs only, in milliseconds, NULL until the
-- group's first success. Written by adapt_limit's one conditional UPDATE, under the row's lock.

-- Short-window latency: an exponentially weighted moving average of the group's recent
-- successes (each success weighs worker.channel_latency_recent_weight), ms.
ALTER TABLE job_groups ADD COLUMN latency_recent_ms real;
-- Long-run baseline: the lowest recent latency seen, drifting up slowly towards the recent
-- latency (each success by worker.channel_latency_baseline_weight of the gap), so a group whose
-- endpoint became permanently slower is re-based (with the defaults, a doubled latency after
-- about 40 successes), ms.
ALTER TABLE job_groups ADD COLUMN latency_baseline_ms real;
-- When the limit was last cut (latency or overload): a latency cut waits one recent latency
-- after it (one round trip), since the runs that end within it were sent under the old limit.
ALTER TABLE job_groups ADD COLUMN limit_cut_at timestamptz;
