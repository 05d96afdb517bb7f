-- What the arena's trainer says of a run beyond its state (domain::openenv::run::RunEvent): a
-- trained step's metrics, an alert, the trainer's versions. One JSON object, read back as it was.
ALTER TABLE openenv_run_events ADD COLUMN detail TEXT;
