-- Collected results: re-read and checked evidence of a scored run, pending until an editor reviews
-- it. One per run; a review is final (only a pending result takes one).
CREATE TABLE results (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    challenge_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    baseline_pass_rate DOUBLE PRECISION NOT NULL,
    after_pass_rate DOUBLE PRECISION NOT NULL,
    delta_pp DOUBLE PRECISION NOT NULL,
    stderr_pp DOUBLE PRECISION NOT NULL,
    trials BIGINT NOT NULL,
    -- Each suite's Δ and standard error (JSON).
    suites TEXT NOT NULL,
    paired_tasks BIGINT NOT NULL,
    infra_error_cells BIGINT NOT NULL,
    -- The task identities the run trained on (JSON), and the runs dataset commit the evidence was read at.
    task_identities TEXT NOT NULL,
    read_commit TEXT NOT NULL,
    collected_by TEXT NOT NULL,
    collected_at TEXT NOT NULL,
    review TEXT NOT NULL DEFAULT 'pending' CHECK (review IN ('pending', 'accepted', 'rejected')),
    review_note TEXT,
    reviewed_by TEXT,
    reviewed_at TEXT,
    -- When it was reviewed, in milliseconds: the order of reviews.
    reviewed_epoch BIGINT
);
CREATE INDEX results_challenge ON results (challenge_id, review);

-- The dynamic gates' verdicts an organizer attached to a collection, per challenge (the latest
-- attach, judged by the arena from the trials).
CREATE TABLE gate_verdicts (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    challenge_id TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    verdicts TEXT NOT NULL,
    attached_by TEXT NOT NULL,
    attached_at TEXT NOT NULL,
    PRIMARY KEY (environment_id, challenge_id)
);

CREATE TRIGGER results_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON results
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('results');
