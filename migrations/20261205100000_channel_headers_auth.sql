-- Issue 32, part 2: custom headers and endpoint authentication per channel.
-- `headers`: a JSON array of {name, value, sensitive}; `auth`: {"type": "basic" | "bearer" |
-- "oauth2_client_credentials", …}. Both NULL for a channel without them (the common case): the
-- statement that begins an attempt reads them with the channel row it already reads, so such a
-- channel pays two NULL columns and nothing else. Values are checked by breakwater_core
-- (channels::endpoint) before they are written.
ALTER TABLE channels
    ADD COLUMN headers jsonb,
    ADD COLUMN auth jsonb;
