-- Runs speak the real pipeline. A launch mirrors the collection (its commit kept apart from the
-- bundle's, which names it), pins the job script by hash; the reconciler keeps GRPO's progress, the
-- newest log line it read (it reads only what is new) and the job's GPU readings.
ALTER TABLE runs ADD COLUMN mirror_commit TEXT;
ALTER TABLE runs ADD COLUMN job_script_sha256 TEXT;
ALTER TABLE runs ADD COLUMN steps_done BIGINT;
ALTER TABLE runs ADD COLUMN steps_planned BIGINT;
ALTER TABLE runs ADD COLUMN log_last_line TEXT;
ALTER TABLE runs ADD COLUMN gpu_samples TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN gpus_idle_since BIGINT;

-- A result's standard error is null when fewer than two tasks paired (the pipeline's null):
-- SQLite changes a column's constraint only by rebuilding its table.
CREATE TABLE results_next (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    challenge_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    baseline_pass_rate REAL NOT NULL,
    after_pass_rate REAL NOT NULL,
    delta_pp REAL NOT NULL,
    stderr_pp REAL,
    trials BIGINT NOT NULL,
    suites TEXT NOT NULL,
    paired_tasks BIGINT NOT NULL,
    infra_error_cells BIGINT NOT NULL,
    task_identities TEXT NOT NULL,
    read_commit TEXT NOT NULL,
    collected_by TEXT NOT NULL,
    collected_at TEXT NOT NULL,
    review TEXT NOT NULL DEFAULT 'pending' CHECK (review IN ('pending', 'accepted', 'rejected')),
    review_note TEXT,
    reviewed_by TEXT,
    reviewed_at TEXT,
    reviewed_epoch BIGINT
);
INSERT INTO results_next SELECT * FROM results;
DROP TABLE results;
ALTER TABLE results_next RENAME TO results;
CREATE INDEX results_challenge ON results (challenge_id, review);
