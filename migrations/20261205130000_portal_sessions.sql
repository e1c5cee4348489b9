-- Tenant portal sessions (issue 32, part 1): a short-lived, scoped credential for one tenant,
-- opened by the operator or the tenant and shown once in the portal's URL. Like API keys, only
-- the SHA-256 digest of the token is kept (a 256-bit random token cannot be brute-forced, and a
-- request finds its session with one indexed lookup).
CREATE TABLE portal_sessions (
    id          uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL REFERENCES tenants (id),
    token_hash  bytea       NOT NULL UNIQUE,
    -- 'manage' (reads and writes the tenant's channels and deliveries) or 'read' (reads only).
    scope       text        NOT NULL CHECK (scope IN ('manage', 'read')),
    -- Who opened it: 'operator' or 'tenant:<api key id>'.
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    CHECK (expires_at > created_at)
);

CREATE INDEX portal_sessions_tenant ON portal_sessions (tenant_id, id);
