-- OpenEnv runs are evaluated on a held-out benchmark before and after training: the run's state
-- may be `evaluating`, the run keeps the plan it was assigned with (the benchmark's tasks, their
-- domains and the trials, as the registry may change later), and each held-out episode's record is
-- kept apart from the events, which participants read.
ALTER TABLE openenv_runs DROP CONSTRAINT openenv_runs_state_check;
ALTER TABLE openenv_runs ADD CONSTRAINT openenv_runs_state_check CHECK (state IN ('starting', 'loading',
    'evaluating', 'rolling', 'updating', 'cleanup', 'completed', 'failed', 'cancelled'));
-- domain::openenv::evaluation::Plan as JSON, NULL for a run assigned before evaluations.
ALTER TABLE openenv_runs ADD COLUMN eval_plan TEXT;

-- One row per held-out episode and phase, once (a resent phase is the same rows). `reward` is NULL
-- for an episode the platform lost even after its replay (left out of the score, not scored 0).
CREATE TABLE openenv_eval_episodes (
    run_id TEXT NOT NULL REFERENCES openenv_runs (run_id),
    phase TEXT NOT NULL CHECK (phase IN ('before', 'after')),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL CHECK (trial >= 0),
    reward DOUBLE PRECISION CHECK (reward IS NULL OR (reward >= 0 AND reward <= 1)),
    replays INTEGER NOT NULL DEFAULT 0 CHECK (replays >= 0),
    PRIMARY KEY (run_id, phase, task_id, trial)
);
