-- Delivery-level operational events on the tenant's alert endpoint (issue 33, part 2):
-- `delivery.dead` (on by default), `deliveries.dead` (the summary of a storm), and, opt-in,
-- `channel.failing` / `channel.recovered`. Decided in crates/core/src/alerts/events.rs.

-- 1. A tenant's settings. No row = every default (so a new tenant needs no write, and the
--    tenants table keeps its columns); the bounds are the API's (crates/core/src/alerts/events.rs).
CREATE TABLE tenant_alert_events (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    delivery_dead boolean NOT NULL DEFAULT true,
    channel_failing boolean NOT NULL DEFAULT false,
    channel_recovered boolean NOT NULL DEFAULT false,
    dead_window_ms bigint NOT NULL DEFAULT 300000
        CHECK (dead_window_ms BETWEEN 1000 AND 86400000),
    dead_alerts_per_window integer NOT NULL DEFAULT 5
        CHECK (dead_alerts_per_window BETWEEN 0 AND 100),
    failing_window_ms bigint NOT NULL DEFAULT 300000
        CHECK (failing_window_ms BETWEEN 1000 AND 86400000),
    failing_threshold_percent integer NOT NULL DEFAULT 50
        CHECK (failing_threshold_percent BETWEEN 1 AND 100),
    failing_min_attempts integer NOT NULL DEFAULT 20
        CHECK (failing_min_attempts BETWEEN 1 AND 10000),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- 2. A channel's event state, one row per channel that ever had a dead delivery or a failing
--    streak (made on first use, under the channel row's lock that every failure's record takes).
--    dead_window_start / dead_in_window: the current storm window and the deaths in it;
--    dead_coalesced / dead_sample: deaths past the per-window allowance not yet summarised, and
--    the first few of their ids. failing_since: the streak's start (NULL = not failing).
CREATE TABLE channel_event_state (
    channel_id uuid PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    dead_window_start timestamptz,
    dead_in_window integer NOT NULL DEFAULT 0,
    dead_coalesced integer NOT NULL DEFAULT 0,
    dead_sample uuid[] NOT NULL DEFAULT '{}',
    failing_since timestamptz,
    failing_alerted boolean NOT NULL DEFAULT false
);
