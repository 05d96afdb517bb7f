-- Runs of a collection on a challenge. (author_id, request_key) makes a launch idempotent; the
-- ledger's one-live-reservation index makes one run active at a time across the arena.
CREATE TABLE runs (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    challenge_id TEXT NOT NULL,
    environment_id TEXT NOT NULL REFERENCES environments (id),
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
    UNIQUE (author_id, request_key)
);
CREATE INDEX runs_challenge ON runs (challenge_id, seq);
CREATE INDEX runs_environment ON runs (environment_id, challenge_id, created_epoch);
CREATE INDEX runs_unfinished ON runs (state) WHERE state IN ('queued', 'running');

-- Every change of a run, with where it came from.
CREATE TABLE run_events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    at TEXT NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    stage TEXT,
    -- Seconds since the epoch, for the timeline.
    epoch BIGINT NOT NULL DEFAULT 0,
    -- Pass counts an evaluation stage reported.
    passed BIGINT,
    total BIGINT,
    timeouts BIGINT,
    errors BIGINT,
    -- The relay's sequence number: a message sent again is stored once.
    relay_seq BIGINT
);
CREATE INDEX run_events_run ON run_events (run_id, seq);
CREATE UNIQUE INDEX run_events_relay_seq ON run_events (run_id, relay_seq) WHERE relay_seq IS NOT NULL;

-- The arena's HF jobs as last inspected, priced from their recorded duration: what HF's records
-- say was spent (the budget's `hf_recorded_usd`).
CREATE TABLE hf_jobs (
    job_id TEXT PRIMARY KEY,
    run_id TEXT,
    purpose TEXT NOT NULL,
    flavor TEXT NOT NULL,
    stage TEXT NOT NULL,
    created_at TEXT,
    started_at TEXT,
    finished_at TEXT,
    running_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    cost_cents BIGINT NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);

CREATE TRIGGER runs_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON runs
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('runs');

CREATE TRIGGER hf_jobs_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON hf_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('ledger');
