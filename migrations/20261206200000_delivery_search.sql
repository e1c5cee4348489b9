-- Tenant-wide delivery search (GET /api/v1/deliveries, issue 33 part 1): every filter gets an
-- index range in the list's order (created_at, id), newest first, so a page costs a seek and
-- `limit` index entries whatever the tenant's volume. `channel_id` uses
-- deliveries_channel_list_idx and `message_id` deliveries_message_idx (both earlier).
-- Measured at 1 M rows: BENCHMARKS.md, "Delivery search at 1 M rows (issue 33, part 1)".
-- Each index costs an entry per delivery row version that is not a HOT update (every status
-- change is not: `updated_at` is indexed by deliveries_dead_idx).
CREATE INDEX deliveries_tenant_list_idx ON deliveries (tenant_id, created_at, id);
CREATE INDEX deliveries_tenant_status_idx ON deliveries (tenant_id, status, created_at, id);
CREATE INDEX deliveries_tenant_type_idx ON deliveries (tenant_id, event_type, created_at, id);
