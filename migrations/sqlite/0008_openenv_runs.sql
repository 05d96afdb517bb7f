-- OpenEnv runs: the one run of an admitted submission, from the moment the arena hands it to the
-- training cluster. One run per submission (the UNIQUE pair), so two servers scheduling at once
-- cannot start a submission twice. `delivered` is set when the cluster confirms the assignment;
-- `cancel_sent` when it confirms a stop the arena decided (cancelled, or RUN_QUEUE_TIMEOUT).
CREATE TABLE openenv_runs (
    run_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('starting', 'loading', 'rolling', 'updating', 'cleanup',
        'completed', 'failed', 'cancelled')),
    policy_version BIGINT NOT NULL DEFAULT 0,
    last_seq BIGINT NOT NULL DEFAULT 0,
    assigned_at TEXT NOT NULL,
    assigned_epoch BIGINT NOT NULL,
    -- When the trainer started on the GPU (its first `loading`): the run's time counts from here.
    started_epoch BIGINT,
    ended_at TEXT,
    error_code TEXT,
    message TEXT,
    delivered INTEGER NOT NULL DEFAULT 0,
    cancel_sent INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account_id, submission_id)
);
CREATE INDEX openenv_runs_state ON openenv_runs (state);

-- Every event once, by the sequence its sender gave it: a resent event is the same row.
CREATE TABLE openenv_run_events (
    run_id TEXT NOT NULL REFERENCES openenv_runs (run_id),
    seq BIGINT NOT NULL,
    state TEXT NOT NULL,
    policy_version BIGINT NOT NULL,
    at TEXT NOT NULL,
    rewards TEXT,
    message TEXT,
    PRIMARY KEY (run_id, seq)
);
