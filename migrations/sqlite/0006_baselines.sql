-- Baseline measurements: a run of the base model alone on the held-out suite, launched by an
-- editor (purpose `baseline`, no collection), and the measurement collected from it. SQLite cannot
-- drop a NOT NULL, so `runs` is rebuilt inside the migration's transaction, where foreign keys
-- cannot be switched off: with their checks deferred to the commit, the rows are kept aside, the
-- table is replaced (`run_events` and `results` keep referring to `runs`) and the rows go back.
PRAGMA defer_foreign_keys = ON;
CREATE TEMP TABLE runs_kept AS SELECT * FROM runs;
DROP TABLE runs;
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    challenge_id TEXT NOT NULL,
    -- A baseline measurement runs no collection.
    environment_id TEXT REFERENCES environments (id),
    purpose TEXT NOT NULL DEFAULT 'collection' CHECK (purpose IN ('collection', 'baseline')),
    author TEXT NOT NULL,
    author_id TEXT NOT NULL,
    agent_id TEXT REFERENCES agents (agent_id),
    request_key TEXT NOT NULL,
    -- What makes a repeat the same request (challenge, collection, agent).
    request_body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'scored', 'failed', 'canceled')),
    stage TEXT,
    reason TEXT,
    platform_fault INTEGER NOT NULL DEFAULT 0,
    -- The launch's progress: reserved → mirrored → launched; `failed` when it definitely failed.
    launch TEXT NOT NULL CHECK (launch IN ('reserved', 'mirrored', 'launched', 'failed')),
    bundle_commit TEXT,
    job_id TEXT,
    job_status TEXT,
    flavor TEXT NOT NULL,
    timeout_s BIGINT NOT NULL,
    reserved_cents BIGINT NOT NULL,
    eligible_tasks BIGINT NOT NULL,
    excluded_task_count BIGINT NOT NULL,
    -- SHA-256 of the per-run secret the job reports back with (the secret itself is never stored).
    secret_hash TEXT NOT NULL,
    -- The job's connection back to the arena: none, connected, reconnecting or gone; when it was
    -- last heard from; which server holds it.
    relay_state TEXT NOT NULL DEFAULT 'none' CHECK (relay_state IN ('none', 'connected', 'reconnecting', 'gone')),
    relay_seen_epoch BIGINT,
    relay_holder TEXT,
    -- The job's log as last read: how many lines, when a new one last appeared, the stage it shows.
    log_lines BIGINT NOT NULL DEFAULT 0,
    log_seen_epoch BIGINT,
    log_last_at TEXT,
    log_stage TEXT,
    -- The HF job's own times, as inspected.
    job_created_epoch BIGINT,
    job_started_epoch BIGINT,
    finished_at TEXT,
    -- Which server is working on the run, until when (background work takes turns by lease).
    lease_owner TEXT,
    lease_until BIGINT,
    created_at TEXT NOT NULL,
    created_epoch BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    -- The runs dataset commit at which the reconciler found the run's result files.
    results_commit TEXT,
    UNIQUE (author_id, request_key),
    UNIQUE (id, purpose),
    CHECK ((purpose = 'baseline') = (environment_id IS NULL))
);
INSERT INTO runs (seq, id, challenge_id, environment_id, author, author_id, agent_id, request_key, request_body, state, stage, reason, platform_fault, launch, bundle_commit, job_id, job_status, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, secret_hash, relay_state, relay_seen_epoch, relay_holder, log_lines, log_seen_epoch, log_last_at, log_stage, job_created_epoch, job_started_epoch, finished_at, lease_owner, lease_until, created_at, created_epoch, updated_at)
    SELECT seq, id, challenge_id, environment_id, author, author_id, agent_id, request_key, request_body, state, stage, reason, platform_fault, launch, bundle_commit, job_id, job_status, flavor, timeout_s, reserved_cents, eligible_tasks, excluded_task_count, secret_hash, relay_state, relay_seen_epoch, relay_holder, log_lines, log_seen_epoch, log_last_at, log_stage, job_created_epoch, job_started_epoch, finished_at, lease_owner, lease_until, created_at, created_epoch, updated_at FROM runs_kept;
DROP TABLE runs_kept;
CREATE INDEX runs_challenge ON runs (challenge_id, seq);
CREATE INDEX runs_environment ON runs (environment_id, challenge_id, created_epoch);
CREATE INDEX runs_unfinished ON runs (state) WHERE state IN ('queued', 'running');

-- A collected measurement of the base model: its pass rate on the held-out suite(s), the mean
-- over trials with one standard error over trials. Only a baseline run has one (the composite key).
CREATE TABLE baselines (
    run_id TEXT PRIMARY KEY,
    purpose TEXT NOT NULL DEFAULT 'baseline' CHECK (purpose = 'baseline'),
    challenge_id TEXT NOT NULL,
    pass_rate REAL NOT NULL,
    stderr REAL NOT NULL,
    trials BIGINT NOT NULL,
    -- Each trial's pass rate (JSON array).
    per_trial TEXT NOT NULL,
    tasks BIGINT NOT NULL,
    scored_cells BIGINT NOT NULL,
    infra_error_cells BIGINT NOT NULL,
    harness_note TEXT NOT NULL,
    read_commit TEXT NOT NULL,
    collected_by TEXT NOT NULL,
    collected_at TEXT NOT NULL,
    collected_epoch BIGINT NOT NULL,
    FOREIGN KEY (run_id, purpose) REFERENCES runs (id, purpose)
);
CREATE INDEX baselines_challenge ON baselines (challenge_id, collected_epoch);

-- A collection stored under an earlier gates version is re-checked from its pinned commit: the
-- version it was first judged by, when it was re-checked, and why a re-check could not be made
-- (tried again after a day).
ALTER TABLE environments ADD COLUMN first_gates_version TEXT;
ALTER TABLE environments ADD COLUMN rechecked_at TEXT;
ALTER TABLE environments ADD COLUMN recheck_error TEXT;
ALTER TABLE environments ADD COLUMN recheck_epoch BIGINT;
