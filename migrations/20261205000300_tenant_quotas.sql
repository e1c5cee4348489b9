-- Per-tenant quotas (issue 31, item 5): a tenant created 2 000 channels in 3.3 s and fanned 10
-- messages out to 20 000 deliveries in under a second, and minted keys to multiply its ingress
-- limit, which was per key and per node.
--
-- 1. The operator's per-tenant overrides. NULL = the cluster default (`api.quota_*` in
--    config/default.toml), so a change of the default reaches every tenant without one.
ALTER TABLE tenants
    ADD COLUMN quota_channels integer CHECK (quota_channels >= 0),
    ADD COLUMN quota_active_keys integer CHECK (quota_active_keys >= 0),
    ADD COLUMN quota_deliveries_per_second integer CHECK (quota_deliveries_per_second >= 1),
    ADD COLUMN quota_deliveries_per_day bigint CHECK (quota_deliveries_per_day >= 1);

-- 2. What a tenant has used of its delivery quotas, one row per tenant (made on first use).
--    `rate_tat` is the GCRA theoretical arrival time of the per-second quota (the scheme of
--    crates/core/src/ratelimit.rs); `day` and `day_count` count the deliveries accepted on that
--    UTC day. An enqueue locks the row until it commits (crates/core/src/quotas.rs), so two
--    nodes cannot both pass a quota that allows only one of them. Logged: the day's count
--    survives a crash.
CREATE TABLE tenant_delivery_usage (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id),
    rate_tat timestamptz,
    day date,
    day_count bigint NOT NULL DEFAULT 0
);

-- 3. The ingress limit's GCRA state, one row per tenant (made on first use), shared by all the
--    tenant's keys and every node. UNLOGGED: every tenant request writes it, and a commit that
--    wrote only unlogged rows waits for no WAL flush; a crash empties it, which gives every
--    tenant a full burst again (as a restart did when the limit lived in each node's memory).
--    A separate table from the delivery usage: an enqueue holds that row until its commit, and
--    the next request's ingress check must not wait for it.
CREATE UNLOGGED TABLE tenant_ingress (
    tenant_id uuid PRIMARY KEY,
    tat timestamptz NOT NULL
);
