-- The OpenEnv track. A submission is one environment as public container images, pinned at
-- acceptance. `(account_id, submission_id)` is unique: a resend finds the first record, and a
-- changed body under the same id is refused by comparing `body_hash`.
CREATE TABLE openenv_submissions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id TEXT NOT NULL,
    account TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    -- SHA-256 of the submission as sent (canonical JSON): what makes a resend the same request.
    body_hash TEXT NOT NULL,
    body TEXT NOT NULL,
    -- Per image: what was submitted, the pinned amd64 digest, its port, size and labels (JSON).
    images TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('validating', 'validated', 'rejected')),
    slot_state TEXT NOT NULL CHECK (slot_state IN ('held', 'used', 'returned')),
    -- `{"errors": [...]}` once admission judged it; who caused a rejection.
    report TEXT NOT NULL,
    error_origin TEXT CHECK (error_origin IN ('author', 'platform')),
    run_id TEXT,
    -- Admission: each task's probes so far (JSON), and which server is probing, until when.
    probes TEXT NOT NULL DEFAULT '[]',
    lease_owner TEXT,
    lease_until BIGINT,
    accepted_at TEXT NOT NULL,
    accepted_epoch BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (account_id, submission_id)
);
CREATE INDEX openenv_submissions_state ON openenv_submissions (state, seq);

-- One accepted submission per HF account per rolling 24 hours: the row is the account's slot,
-- taken by an upsert that succeeds only when the slot is free (older than the window, or
-- returned), so two concurrent first submissions cannot both be accepted.
CREATE TABLE openenv_quota (
    account_id TEXT PRIMARY KEY,
    submission_id TEXT NOT NULL,
    accepted_epoch BIGINT NOT NULL
);

-- The training cluster's connection: which server holds it and when it was last heard from.
CREATE TABLE openenv_cluster (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder TEXT,
    seen_epoch BIGINT NOT NULL,
    gpus_free BIGINT NOT NULL DEFAULT 0,
    sandboxes_free BIGINT NOT NULL DEFAULT 0,
    connected INTEGER NOT NULL DEFAULT 0
);
