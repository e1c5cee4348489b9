-- Tenant-wide delivery search (GET /api/v1/deliveries, issue 33 part 1). Newest first:
-- - every search walks deliveries_tenant_list_idx (tenant, created_at, id) backwards, from its
--   `until` (or its cursor), filtering what else it asks for; live deliveries (pending,
--   delivering, paused) are recent and delivered ones are most of a tenant's rows, so a page of
--   either is found in the first entries it reads;
-- - `status` dead or cancelled, what a team looks for after an incident and rare among a
--   tenant's rows, has its own partial index, which holds only those rows;
-- - `channel_id` uses deliveries_channel_list_idx and `message_id` deliveries_message_idx (both
--   earlier); an `event_type` filter alone walks the tenant's list (its cost grows as the type
--   gets rarer: BENCHMARKS.md).
-- Why no index per status and per event type: every row version of `deliveries` that is not a
-- HOT update (every status change is not: `updated_at` is indexed by deliveries_dead_idx) adds an
-- entry to every index, and each delivery writes three versions on its way (accepted, delivering,
-- delivered). Measured with three full indexes: inserts +33 %, status changes +68 % (BENCHMARKS.md,
-- "Delivery search at 1 M rows").
CREATE INDEX deliveries_tenant_list_idx ON deliveries (tenant_id, created_at, id);
CREATE INDEX deliveries_tenant_failed_idx ON deliveries (tenant_id, created_at, id)
    WHERE status IN ('dead', 'cancelled');
