-- Agents: ids owned by the HF user who registered them; immutable.
CREATE TABLE agents (
    agent_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    -- HF's stable account id: ownership is decided by it, since user names can change hands.
    owner_id TEXT NOT NULL,
    description TEXT NOT NULL,
    model TEXT,
    harness TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX agents_owner ON agents (owner_id);

-- The board. (author_id, request_id) makes a post idempotent; seq orders the listing.
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    author TEXT NOT NULL,
    author_id TEXT NOT NULL,
    agent_id TEXT REFERENCES agents (agent_id),
    request_id TEXT NOT NULL,
    body TEXT NOT NULL,
    refs TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_epoch BIGINT NOT NULL,
    UNIQUE (author_id, request_id)
);
CREATE INDEX messages_author_time ON messages (author_id, created_epoch);
CREATE INDEX messages_author ON messages (author, seq);
CREATE INDEX messages_agent ON messages (agent_id, seq);

-- One-time codes that carry a sign-in from a new tab into the framed page (hashes only).
CREATE TABLE auth_handoffs (
    code_hash TEXT PRIMARY KEY,
    user_json TEXT NOT NULL,
    expires_epoch BIGINT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
