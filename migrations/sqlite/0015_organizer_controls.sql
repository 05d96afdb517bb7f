-- The organizers' day-to-day controls.
-- OpenEnv intake: one row once an editor first pauses or resumes it (no row: open).
CREATE TABLE openenv_intake (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    is_open INTEGER NOT NULL CHECK (is_open IN (0, 1)),
    reason TEXT,
    since TEXT NOT NULL,
    changed_by TEXT NOT NULL,
    CHECK (is_open = 1 OR reason IS NOT NULL)
);

-- The quota as slots: an account holds at most `limit` (arena.toml [openenv.quota]) at once, each
-- taken by one accepted submission until its window ends; the key lets no two take one slot.
CREATE TABLE openenv_quota_slots (
    account_id TEXT NOT NULL,
    slot INTEGER NOT NULL CHECK (slot >= 0),
    submission_id TEXT NOT NULL,
    accepted_epoch BIGINT NOT NULL,
    PRIMARY KEY (account_id, slot)
);
INSERT INTO openenv_quota_slots (account_id, slot, submission_id, accepted_epoch)
SELECT account_id, 0, submission_id, accepted_epoch FROM openenv_quota;
DROP TABLE openenv_quota;

-- A run's cleanup: when it began, the sandboxes the arena last counted left, and an editor's
-- release (domain::openenv::controls::Release as JSON).
ALTER TABLE openenv_runs ADD COLUMN cleanup_epoch BIGINT;
ALTER TABLE openenv_runs ADD COLUMN cleanup_at TEXT;
ALTER TABLE openenv_runs ADD COLUMN sandboxes_left INTEGER;
ALTER TABLE openenv_runs ADD COLUMN counted_epoch BIGINT;
ALTER TABLE openenv_runs ADD COLUMN counted_at TEXT;
ALTER TABLE openenv_runs ADD COLUMN released TEXT;

-- A board message an editor hid: kept, with who hid it, when and why.
ALTER TABLE messages ADD COLUMN hidden_reason TEXT;
ALTER TABLE messages ADD COLUMN hidden_by TEXT;
ALTER TABLE messages ADD COLUMN hidden_at TEXT;
