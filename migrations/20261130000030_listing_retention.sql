-- Listing and retention (issue 12).
--
-- A channel's deliveries are listed newest first by keyset on (created_at, id): deliveries
-- accepted in one transaction share created_at, so id breaks the tie. This index serves that
-- order for any cursor position (a seek, never an offset) and replaces the (channel_id,
-- created_at) index, of which it is a superset.
CREATE INDEX deliveries_channel_list_idx ON deliveries (channel_id, created_at, id);
DROP INDEX deliveries_channel_idx;

-- Retention walks finished deliveries oldest first. Partial: a row enters it only once it is
-- final (one index write per delivery, at its last status change), and live deliveries, old or
-- not, are never in it, so the pruner never reads past them. The predicate must stay exactly the
-- final statuses that `breakwater_core::retention` prunes (a query uses a partial index only when
-- its WHERE implies the predicate); 'cancelled' is included for the lifecycle work.
CREATE INDEX deliveries_retention_idx ON deliveries (created_at)
    WHERE status IN ('delivered', 'dead', 'cancelled');
