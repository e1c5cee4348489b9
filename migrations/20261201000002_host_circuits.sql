-- Host circuits (issue 13, part 1; crates/core/src/hosts.rs): a second circuit keyed on the
-- endpoint's host (or registrable domain), shared by every channel and tenant on it.

-- The channel's host key, computed in core whenever the URL is set (hosts::host_key). NULL for
-- channels created before this migration until their URL is set again or the node re-keys them
-- at start (hosts::rekey_missing): a channel without a key has no host circuit.
ALTER TABLE channels ADD COLUMN host_key text;
CREATE INDEX channels_host_key_idx ON channels (host_key) WHERE deleted_at IS NULL;

CREATE TABLE host_circuits (
    host_key            text PRIMARY KEY,
    state               text        NOT NULL DEFAULT 'closed'
                                    CHECK (state IN ('closed', 'open', 'half_open')),
    -- Bumped by every transition; a probe's result names the generation it ran under.
    generation          bigint      NOT NULL DEFAULT 0,
    changed_at          timestamptz NOT NULL DEFAULT now(),
    -- While open: when the watcher may start the next probe.
    next_probe_at       timestamptz,
    -- While half-open: after this the probe's lease is over (see hosts.rs on what happens then).
    probe_deadline      timestamptz,
    -- Failed probes in a row: the cooldown doubles with each, capped.
    probe_failures      integer     NOT NULL DEFAULT 0,
    -- The delivery (and its channel) that is the half-open probe, once one is chosen.
    probe_delivery_id   uuid,
    probe_channel_id    uuid,
    last_failure_at     timestamptz,
    last_failure_reason text,
    -- Operator overrides (NULL = [hosts] in the configuration).
    failure_threshold   integer     CHECK (failure_threshold BETWEEN 2 AND 10000),
    cooldown_ms         bigint      CHECK (cooldown_ms BETWEEN 1 AND 86400000),
    max_in_flight       integer     CHECK (max_in_flight BETWEEN 1 AND 100000),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
-- The reconciler and the admin page read the hosts that are not closed.
CREATE INDEX host_circuits_not_closed_idx ON host_circuits (host_key) WHERE state <> 'closed';

-- Distinct failing channels of a host within the window: one row per (host, channel), upserted
-- on each transient failure (failed_at = now()), deleted on that channel's next success.
CREATE TABLE host_failures (
    host_key   text        NOT NULL,
    channel_id uuid        NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host_key, channel_id)
);
