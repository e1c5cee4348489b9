-- Lifecycle (issue 12): channels and tenants can be deleted, deliveries cancelled and their
-- payloads purged, and a tenant holds several API keys.

-- Soft deletion: a deleted channel or tenant keeps its row (its deliveries, attempts and audit
-- rows stay readable history) but is gone for every API route, and no worker sends to it or
-- moves its circuit again.
ALTER TABLE channels ADD COLUMN deleted_at timestamptz;
ALTER TABLE tenants ADD COLUMN deleted_at timestamptz;

-- A delivery can end `cancelled`: by its tenant (POST /api/v1/deliveries/{id}/cancel) or because
-- its channel or tenant was deleted. Final, like `delivered` and `dead`.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'delivering', 'paused', 'delivered', 'failed', 'dead', 'cancelled'));
-- When the payload was purged (DELETE /api/v1/deliveries/{id}/payload): `payload` is then the
-- JSON text `null`.
ALTER TABLE deliveries ADD COLUMN payload_purged_at timestamptz;

-- Marking a channel's backlog touches only its waiting deliveries: cancelled ones are final
-- and leave the index like delivered and dead ones.
CREATE INDEX deliveries_waiting_idx ON deliveries (channel_id, status)
    WHERE status NOT IN ('delivered', 'dead', 'cancelled');
DROP INDEX deliveries_live_idx;

-- Several keys per tenant, each with an optional label; when each was last used (written at
-- most once a minute per key, by authentication itself).
ALTER TABLE api_keys ADD COLUMN name text CHECK (name IS NULL OR length(name) BETWEEN 1 AND 200);
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, id);

-- A delivery's status follows its job (migration 20261130000002), now leaving a cancelled
-- delivery alone: a rescued last attempt of a cancelled delivery must not make it `dead`.
CREATE OR REPLACE FUNCTION deliveries_follow_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delivery uuid;
BEGIN
    BEGIN
        delivery := (NEW.args->>'delivery_id')::uuid;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    IF delivery IS NULL THEN
        RETURN NULL;
    END IF;
    IF NEW.state = 'discarded' THEN
        -- Dead, with the reason, replayable.
        UPDATE deliveries
        SET status = 'dead',
            last_error = coalesce(NEW.errors->-1->>'error', last_error),
            updated_at = now()
        WHERE id = delivery AND status NOT IN ('delivered', 'dead', 'cancelled');
    ELSIF NEW.state IN ('available', 'scheduled') THEN
        -- Waiting again (handed back, rescued, snoozed, retried after a handler error).
        UPDATE deliveries SET status = 'pending', updated_at = now()
        WHERE id = delivery AND status = 'delivering';
    END IF;
    RETURN NULL;
END
$$;
