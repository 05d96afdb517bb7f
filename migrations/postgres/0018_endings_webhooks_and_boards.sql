-- What ended: a run of either track (`run.ended`), an OpenEnv submission's admission
-- (`submission.decided`) or a result's review (`result.verified`), written in the same
-- transaction as the terminal write itself, once per subject. One pass turns them into webhook
-- deliveries (`fanned_out`).
CREATE TABLE endings (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('run.ended', 'submission.decided', 'result.verified')),
    -- `collection:RUN`, `openenv:RUN`, `submission:ACCOUNT/ID` or `result:RUN`.
    subject TEXT NOT NULL,
    account_id TEXT NOT NULL,
    at TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    fanned_out BIGINT NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1)),
    UNIQUE (kind, subject)
);
CREATE INDEX endings_pending ON endings (fanned_out, seq);

-- An account's webhooks. The secret signs each delivery (HMAC-SHA256); it is shown once, at
-- registration, and kept to sign with.
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    url TEXT NOT NULL,
    -- The events it takes, as a JSON list of names.
    events TEXT NOT NULL,
    format TEXT NOT NULL CHECK (format IN ('json', 'slack', 'discord')),
    secret TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_epoch BIGINT NOT NULL
);
CREATE INDEX webhooks_account ON webhooks (account_id);

-- One event for one webhook: delivered at least once, tried again with backoff until it is
-- delivered or its time is up. (webhook, ending) is unique: a fan-out run twice adds nothing.
CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    ending_seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts BIGINT NOT NULL DEFAULT 0,
    next_epoch BIGINT NOT NULL,
    created_epoch BIGINT NOT NULL,
    ended_epoch BIGINT NOT NULL,
    delivered_epoch BIGINT,
    lease_owner TEXT,
    lease_until BIGINT,
    UNIQUE (webhook_id, ending_seq)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_epoch);

-- Each attempt of a delivery: when, the receiver's status, or why no status.
CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL,
    n BIGINT NOT NULL,
    at TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    status BIGINT,
    error TEXT,
    PRIMARY KEY (delivery_id, n)
);

-- The OpenEnv leaderboard by account, frozen when its first page is read: later pages (their
-- cursor names the snapshot) read the same rows whatever completes meanwhile. Kept an hour.
CREATE TABLE openenv_board_snapshots (
    id TEXT PRIMARY KEY,
    taken_at TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    -- The whole ranking (JSON): benchmark, domains and every account's row.
    body TEXT NOT NULL
);
