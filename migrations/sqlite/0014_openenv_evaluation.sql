-- OpenEnv runs are evaluated on a held-out benchmark before and after training: the run's state
-- may be `evaluating`, the run keeps the plan it was assigned with (the benchmark's tasks, their
-- domains and the trials, as the registry may change later), and each held-out episode's record is
-- kept apart from the events, which participants read.
--
-- SQLite cannot change a CHECK constraint in place: the runs' table is built again, and its
-- events' table with it (its rows reference the runs, dropped first, so the copy of the runs never
-- leaves a reference dangling).
CREATE TABLE openenv_run_events_copy AS SELECT * FROM openenv_run_events;
DROP TABLE openenv_run_events;

CREATE TABLE openenv_runs_next (
    run_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('starting', 'loading', 'evaluating', 'rolling', 'updating',
        'cleanup', 'completed', 'failed', 'cancelled')),
    policy_version BIGINT NOT NULL DEFAULT 0,
    last_seq BIGINT NOT NULL DEFAULT 0,
    assigned_at TEXT NOT NULL,
    assigned_epoch BIGINT NOT NULL,
    started_epoch BIGINT,
    ended_at TEXT,
    error_code TEXT,
    message TEXT,
    delivered INTEGER NOT NULL DEFAULT 0,
    cancel_sent INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until BIGINT,
    -- domain::openenv::evaluation::Plan as JSON, NULL for a run assigned before evaluations.
    eval_plan TEXT,
    UNIQUE (account_id, submission_id)
);
INSERT INTO openenv_runs_next (run_id, account_id, submission_id, state, policy_version, last_seq,
    assigned_at, assigned_epoch, started_epoch, ended_at, error_code, message, delivered, cancel_sent,
    lease_owner, lease_until)
SELECT run_id, account_id, submission_id, state, policy_version, last_seq, assigned_at, assigned_epoch,
    started_epoch, ended_at, error_code, message, delivered, cancel_sent, lease_owner, lease_until
FROM openenv_runs;
DROP TABLE openenv_runs;
ALTER TABLE openenv_runs_next RENAME TO openenv_runs;
CREATE INDEX openenv_runs_state ON openenv_runs (state);

CREATE TABLE openenv_run_events (
    run_id TEXT NOT NULL REFERENCES openenv_runs (run_id),
    seq BIGINT NOT NULL,
    state TEXT NOT NULL,
    policy_version BIGINT NOT NULL,
    at TEXT NOT NULL,
    rewards TEXT,
    message TEXT,
    detail TEXT,
    PRIMARY KEY (run_id, seq)
);
INSERT INTO openenv_run_events (run_id, seq, state, policy_version, at, rewards, message, detail)
SELECT run_id, seq, state, policy_version, at, rewards, message, detail FROM openenv_run_events_copy;
DROP TABLE openenv_run_events_copy;

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
