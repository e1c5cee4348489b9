-- Issue 32 part 3: a tenant's event-type catalog. One row per catalogued type, keyed by
-- (tenant, name). A delete removes the row (channels name event types as text, not by
-- reference, so nothing else changes). `revision` is the tenant's catalog version at the row's
-- last write: together with the tenant's `event_catalog_version` it lets each API node keep a
-- compiled schema until the catalog changes (core::event_types::Cache).
CREATE TABLE event_types (
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text COLLATE "C" NOT NULL CHECK (char_length(name) BETWEEN 1 AND 128),
    description text CHECK (description IS NULL OR char_length(description) <= 1000),
    schema      jsonb,
    example     jsonb,
    deprecated  boolean NOT NULL DEFAULT false,
    revision    bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- `event_catalog_version`: 0 while the tenant never had a catalogued type, bumped by every
-- change of its catalog (so a tenant without a catalog costs an enqueue nothing: the tenant row
-- the enqueue already reads says so). `reject_unknown_event_types`: refuse an enqueue or a
-- message whose event type is not in the catalog (default false: accepted, as before).
ALTER TABLE tenants
    ADD COLUMN event_catalog_version bigint NOT NULL DEFAULT 0,
    ADD COLUMN reject_unknown_event_types boolean NOT NULL DEFAULT false;
