-- Messages and fan-out (issue 12): a tenant sends one message (event type + payload) and it is
-- delivered to every channel whose `event_types` filter matches, one delivery per channel, all
-- written in one transaction by a bounded number of set-based statements.

-- A channel's subscription: the event types it receives (exact match); NULL = every type.
ALTER TABLE channels ADD COLUMN event_types text[]
    CHECK (event_types IS NULL OR cardinality(event_types) BETWEEN 1 AND 100);

CREATE TABLE messages (
    id              uuid PRIMARY KEY,
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_type      text        NOT NULL,
    -- The event data exactly as the tenant sent it (JSON text), stored once for every channel:
    -- the deliveries of a message carry no copy of their own (deliveries.payload IS NULL).
    payload         text        NOT NULL,
    -- Unique per tenant among messages (the per-channel enqueue has its own keys on deliveries).
    idempotency_key text,
    -- The channels the sender named (`channels` in the request), NULL = every subscribed one.
    -- Kept to tell a retried request from a different one under the same key.
    channel_ids     uuid[],
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX messages_idempotency_idx ON messages (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX messages_tenant_idx ON messages (tenant_id, created_at);

-- A delivery made by a message points at it; its payload is the message's (NULL here), and its
-- `webhook-id` is the message id (the same on every channel and every attempt).
ALTER TABLE deliveries
    ADD COLUMN message_id uuid REFERENCES messages (id) ON DELETE CASCADE,
    ALTER COLUMN payload DROP NOT NULL;
CREATE INDEX deliveries_message_idx ON deliveries (message_id) WHERE message_id IS NOT NULL;
