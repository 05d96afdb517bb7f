-- OpenEnv runs are leased like every record the engine works on (`server/src/engine.rs`): the
-- sweep that fails runs stuck in the cluster's queue takes one run at a time under its lease.
ALTER TABLE openenv_runs ADD COLUMN lease_owner TEXT;
ALTER TABLE openenv_runs ADD COLUMN lease_until BIGINT;
