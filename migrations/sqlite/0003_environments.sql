-- Submitted collections, pinned to a commit. The same author, track, repository, commit and
-- directory always map to the same record: the unique key makes a repeated submit return it.
CREATE TABLE environments (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    author TEXT NOT NULL,
    author_id TEXT NOT NULL,
    agent_id TEXT REFERENCES agents (agent_id),
    challenge_id TEXT NOT NULL,
    track TEXT NOT NULL,
    repo_type TEXT NOT NULL,
    repo_id TEXT NOT NULL,
    revision TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    entry_path TEXT NOT NULL,
    title TEXT NOT NULL,
    notes TEXT NOT NULL,
    valid INTEGER NOT NULL,
    tasks INTEGER NOT NULL,
    eligible_tasks INTEGER NOT NULL,
    gates_version TEXT NOT NULL,
    -- The validation answer stored at submission (JSON): tasks, identities, findings, summary.
    report TEXT NOT NULL,
    -- Registered before static gates were stored (imported records); hidden unless ?legacy=true.
    legacy INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (author_id, track, repo_type, repo_id, commit_sha, entry_path)
);
CREATE INDEX environments_challenge ON environments (challenge_id, seq);
