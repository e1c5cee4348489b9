-- Host probes in turn (crates/core/src/hosts/transitions.rs, wake_host_probe): the channels
-- tried as the host's probe since it last closed, the most recent last, one entry per channel.
-- The next probe is a channel not tried yet (the fewest consecutive failures first), else the
-- one tried longest ago, so a host whose probes keep landing on channels that fail for
-- themselves still reaches, within one round, a channel that answers. Emptied on close.
ALTER TABLE host_circuits ADD COLUMN probed_channels uuid[] NOT NULL DEFAULT '{}';
