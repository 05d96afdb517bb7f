-- Baseline measurements: a run of the base model alone on the held-out suite, launched by an
-- editor (purpose `baseline`, no collection), and the measurement collected from it.
ALTER TABLE runs ALTER COLUMN environment_id DROP NOT NULL;
ALTER TABLE runs ADD COLUMN purpose TEXT NOT NULL DEFAULT 'collection' CHECK (purpose IN ('collection', 'baseline'));
-- The runs dataset commit at which the reconciler found the run's result files.
ALTER TABLE runs ADD COLUMN results_commit TEXT;
ALTER TABLE runs ADD CONSTRAINT runs_purpose_collection CHECK ((purpose = 'baseline') = (environment_id IS NULL));
ALTER TABLE runs ADD CONSTRAINT runs_id_purpose UNIQUE (id, purpose);

-- A collected measurement of the base model: its pass rate on the held-out suite(s), the mean
-- over trials with one standard error over trials. Only a baseline run has one (the composite key).
CREATE TABLE baselines (
    run_id TEXT PRIMARY KEY,
    purpose TEXT NOT NULL DEFAULT 'baseline' CHECK (purpose = 'baseline'),
    challenge_id TEXT NOT NULL,
    pass_rate DOUBLE PRECISION NOT NULL,
    stderr DOUBLE PRECISION NOT NULL,
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

-- The challenges' `baseline` is read with the ledger's topic.
CREATE TRIGGER baselines_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON baselines
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('ledger');

-- A collection stored under an earlier gates version is re-checked from its pinned commit: the
-- version it was first judged by, when it was re-checked, and why a re-check could not be made
-- (tried again after a day).
ALTER TABLE environments ADD COLUMN first_gates_version TEXT;
ALTER TABLE environments ADD COLUMN rechecked_at TEXT;
ALTER TABLE environments ADD COLUMN recheck_error TEXT;
ALTER TABLE environments ADD COLUMN recheck_epoch BIGINT;
