-- A channel still failing when its host closes (its probe answered, or an operator closed it)
-- is failing for itself, not for its host: its failure row is kept as excused and counts nothing
-- towards re-opening the host until the channel succeeds once (crates/core/src/hosts/results.rs).
ALTER TABLE host_failures ADD COLUMN excused boolean NOT NULL DEFAULT false;
