-- Breakwater's schema. One schema, forward-only migrations.
--
-- Time columns are timestamptz and every comparison uses the database's now(), never a
-- node's clock (DESIGN.md, "Postgres is the only shared state").

-- ---------------------------------------------------------------------------------------
-- The job queue (crates/queue). Generic: it knows nothing about webhooks.
-- ---------------------------------------------------------------------------------------

-- Nodes heartbeat here; a job executing on a node whose heartbeat is stale gets rescued.
CREATE TABLE queue_nodes (
    id           text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue         text        NOT NULL,
    kind          text        NOT NULL,
    args          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- 1 = normal work, 3 = parked. Lower numbers are fetched first.
    priority      smallint    NOT NULL DEFAULT 1 CHECK (priority BETWEEN 0 AND 9),
    -- available: due now and fetchable; scheduled: waiting for scheduled_at (backoff, snooze,
    -- parked); executing: claimed by attempted_by under claim_token; completed, discarded
    -- (dead letter) and cancelled are final.
    state         text        NOT NULL DEFAULT 'available'
                  CHECK (state IN ('available', 'scheduled', 'executing', 'completed', 'discarded', 'cancelled')),
    attempt       integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts  integer     NOT NULL DEFAULT 12 CHECK (max_attempts > 0),
    scheduled_at  timestamptz NOT NULL DEFAULT now(),
    attempted_at  timestamptz,
    attempted_by  text,
    -- Fencing token of the current claim: results are recorded only while it still matches.
    claim_token   uuid,
    unique_key    text,
    -- A plain indexed column (for Breakwater: the channel) so that parking and releasing a
    -- whole group is one indexed UPDATE, never a scan of JSON args.
    group_id      uuid,
    errors        jsonb       NOT NULL DEFAULT '[]'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finalized_at  timestamptz
);

-- The hot fetch path holds only due work: parked and future jobs are 'scheduled' and are not in
-- this index, so the cost of a fetch does not grow with the number of parked jobs.
CREATE INDEX jobs_fetch_idx ON jobs (queue, priority, scheduled_at, id) WHERE state = 'available';
-- The scheduler promotes due 'scheduled' jobs to 'available'.
CREATE INDEX jobs_scheduled_idx ON jobs (scheduled_at) WHERE state = 'scheduled';
-- Park and release a group in one UPDATE.
CREATE INDEX jobs_group_idx ON jobs (group_id, state) WHERE group_id IS NOT NULL AND state IN ('available', 'scheduled');
-- Rescue looks at executing jobs only.
CREATE INDEX jobs_executing_idx ON jobs (attempted_by) WHERE state = 'executing';
-- Pruning of final jobs.
CREATE INDEX jobs_finalized_idx ON jobs (finalized_at) WHERE finalized_at IS NOT NULL;
-- At most one live job per unique key, enforced by the database (not check-then-insert).
CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'executing');

-- ---------------------------------------------------------------------------------------
-- Breakwater's domain (crates/core).
-- ---------------------------------------------------------------------------------------

CREATE TABLE tenants (
    id           uuid PRIMARY KEY,
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    tier         text        NOT NULL DEFAULT 'default' CHECK (tier IN ('high', 'default', 'bulk')),
    -- Where the tenant's on-call hears about its channels' circuits, signed with alert_secret.
    alert_url    text,
    alert_secret text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 digests of high-entropy random keys; the key itself is shown
-- once, at creation. tenant_id NULL would be an operator key (the bootstrap operator key lives
-- in configuration).
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   uuid REFERENCES tenants (id) ON DELETE CASCADE,
    key_hash    bytea       NOT NULL UNIQUE,
    prefix      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE channels (
    id                    uuid PRIMARY KEY,
    tenant_id             uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                  text,
    url                   text        NOT NULL,
    -- whsec_… (Standard Webhooks). Needed in clear to sign; never logged.
    signing_secret        text        NOT NULL,
    -- "80/s", "1000/m", "5000/h"; NULL = unlimited.
    rate_limit            text,
    -- GCRA state of the cluster-wide rate limit: the theoretical arrival time of the next
    -- request. Each send reserves a slot by moving it on by one emission interval.
    rate_tat              timestamptz,
    -- The turn handed to the last delivery that had to wait (it sleeps until then), so that
    -- waiting deliveries wake one per interval instead of all at once.
    rate_queue_tat        timestamptz,
    -- Deliveries held back by the rate limit (snoozed to a reserved slot).
    rate_limited_total    bigint      NOT NULL DEFAULT 0,
    -- The channel circuit (DESIGN.md, "The channel circuit").
    circuit_state         text        NOT NULL DEFAULT 'closed'
                          CHECK (circuit_state IN ('closed', 'open', 'half_open', 'paused')),
    circuit_changed_at    timestamptz NOT NULL DEFAULT now(),
    -- Bumped by every transition; probes are fenced by it.
    circuit_generation    bigint      NOT NULL DEFAULT 0,
    consecutive_failures  integer     NOT NULL DEFAULT 0,
    -- Failed probes in a row; the cooldown doubles with each, capped.
    probe_failures        integer     NOT NULL DEFAULT 0,
    next_probe_at         timestamptz,
    probe_delivery_id     uuid,
    probe_deadline        timestamptz,
    -- Set by Retry-After on 429/503: nothing is sent to this channel before it.
    retry_after_until     timestamptz,
    -- The health check's last verdict (failure ratio over a sliding window). Only its move from
    -- false to true trips the circuit.
    health_unhealthy      boolean     NOT NULL DEFAULT false,
    -- Per-channel overrides; NULL = the global default from configuration.
    failure_threshold     integer     CHECK (failure_threshold > 0),
    cooldown_ms           bigint      CHECK (cooldown_ms > 0),
    -- When a probe closes the circuit, re-enqueue the channel's dead letters of the last
    -- replay_window_ms (audited as circuit_breaker).
    replay_dead_letters_on_close boolean NOT NULL DEFAULT false,
    replay_window_ms      bigint      NOT NULL DEFAULT 3600000 CHECK (replay_window_ms > 0),
    last_failure_at       timestamptz,
    last_failure_reason   text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX channels_tenant_idx ON channels (tenant_id, created_at);

CREATE TABLE deliveries (
    id               uuid PRIMARY KEY,
    tenant_id        uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    channel_id       uuid        NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    event_type       text        NOT NULL,
    -- The event data exactly as the tenant sent it (JSON text, validated): sent byte for byte,
    -- so numbers keep their precision and keys their order.
    payload          text        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivering', 'paused', 'delivered', 'failed', 'dead')),
    -- HTTP attempts made (parking and snoozes are not attempts).
    attempts         integer     NOT NULL DEFAULT 0,
    idempotency_key  text,
    -- The send slot this delivery reserved under its channel's rate limit, if it had to wait.
    rate_slot_at     timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
CREATE UNIQUE INDEX deliveries_idempotency_idx ON deliveries (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX deliveries_channel_idx ON deliveries (channel_id, created_at);
CREATE INDEX deliveries_dead_idx ON deliveries (channel_id, updated_at) WHERE status = 'dead';
-- Marking a channel's backlog paused / pending touches only its live deliveries.
CREATE INDEX deliveries_live_idx ON deliveries (channel_id, status) WHERE status NOT IN ('delivered', 'dead');

CREATE TABLE delivery_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      uuid        NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    channel_id       uuid        NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    attempt          integer     NOT NULL,
    -- Whether this attempt was the half-open probe of its channel.
    probe            boolean     NOT NULL DEFAULT false,
    started_at       timestamptz NOT NULL,
    duration_ms      integer     NOT NULL,
    -- success | transient | permanent
    outcome          text        NOT NULL,
    status_code      integer,
    -- connect | timeout | request | status
    error_kind       text,
    error            text,
    response_excerpt text,
    node_id          text
);
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, attempt);
-- The health check reads a channel's recent attempts.
CREATE INDEX delivery_attempts_channel_idx ON delivery_attempts (channel_id, started_at);

CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    tenant_id   uuid,
    channel_id  uuid,
    -- 'tenant:<api key id>', 'operator', or the system actor 'circuit_breaker'.
    actor       text        NOT NULL,
    action      text        NOT NULL,
    from_state  text,
    to_state    text,
    reason      text,
    details     jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_channel_idx ON audit_log (channel_id, at);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, at);

-- Cluster-wide circuit defaults an operator edits at run time; NULL = the configuration's value.
-- A single row.
CREATE TABLE circuit_defaults (
    id                boolean PRIMARY KEY DEFAULT true CHECK (id),
    failure_threshold integer CHECK (failure_threshold > 0),
    cooldown_ms       bigint  CHECK (cooldown_ms > 0),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
INSERT INTO circuit_defaults (id) VALUES (true);
