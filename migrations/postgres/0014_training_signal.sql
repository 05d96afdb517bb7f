-- What training learned (domain::training). Each optimizer step's TRL metrics, one row per step
-- of a run, from whichever source told first: the job over its relay, its log's tail, or the
-- GRPO stage's training_diagnostics.json at collect (the same numbers; a repeat is kept once).
CREATE TABLE run_train_steps (
    run_id TEXT NOT NULL REFERENCES runs(id),
    step BIGINT NOT NULL,
    metrics TEXT NOT NULL,
    source TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);
-- The global step of the last GRPO rollout line the reconciler read, so that TRL's next metrics
-- line in a later pass's tail is numbered (step = rollout step + 1).
ALTER TABLE runs ADD COLUMN log_rollout_step BIGINT;
-- The per-task signal read from the GRPO stage's records at collect (domain::training::signal).
ALTER TABLE results ADD COLUMN training TEXT;
