-- Admission blame that cannot be bought: when a submission was decided (its returned slots are
-- counted per quota window), and until when one waits before admission takes it (an account
-- past its returned slots' cap).
ALTER TABLE openenv_submissions ADD COLUMN decided_epoch BIGINT;
ALTER TABLE openenv_submissions ADD COLUMN admit_after_epoch BIGINT;
CREATE INDEX openenv_submissions_returned ON openenv_submissions (account_id, slot_state, decided_epoch);

-- The OpenEnv leaderboard is computed once per new evaluation: a run that completes notifies
-- `openenv`, so every replica drops the leaderboard it cached (server/src/changes.rs).
CREATE TRIGGER openenv_run_completed AFTER UPDATE OF state ON openenv_runs
    FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION arena_notify_change('openenv');
