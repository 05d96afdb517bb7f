-- Admission blame that cannot be bought: when a submission was decided (its returned slots are
-- counted per quota window), and until when one waits before admission takes it (an account
-- past its returned slots' cap).
ALTER TABLE openenv_submissions ADD COLUMN decided_epoch BIGINT;
ALTER TABLE openenv_submissions ADD COLUMN admit_after_epoch BIGINT;
CREATE INDEX openenv_submissions_returned ON openenv_submissions (account_id, slot_state, decided_epoch);
