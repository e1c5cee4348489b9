-- An operator's hold on a channel's circuit (found by a new-user trial: a tenant's resume undid
-- an operator's pause one second later). An operator's pause or force-open sets it; while it is
-- set the tenant can neither pause nor resume the channel (409). Any close clears it: an
-- operator's resume or force-close, or a probe that closes the circuit after a force-open.
ALTER TABLE channels ADD COLUMN operator_hold boolean NOT NULL DEFAULT false;
