-- Payload filters (issue 32, part 4): a channel's optional JSON Logic rule over
-- {"event_type", "payload"}, evaluated when a message fans out (see core::filters). Checked by
-- the API when set (at most 4 KiB); NULL = no filter, every message of a subscribed type.
ALTER TABLE channels ADD COLUMN filter jsonb;
