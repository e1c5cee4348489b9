-- Signing-secret rotation with a grace period (issue 12): until previous_secret_expires_at,
-- requests carry two signatures, `v1,<new> v1,<old>` (Standard Webhooks allows several,
-- space-separated), so a receiver still holding the old secret keeps verifying.
ALTER TABLE channels
    ADD COLUMN previous_signing_secret text,
    ADD COLUMN previous_secret_expires_at timestamptz;
