-- The reservation ledger behind the shared compute cap. A run reserves its allocation (live)
-- before its job starts; the reservation is settled with what HF billed, or released.
CREATE TABLE budget_ledger (
    id TEXT PRIMARY KEY,
    challenge_id TEXT NOT NULL,
    run_id TEXT UNIQUE,
    amount_cents BIGINT NOT NULL CHECK (amount_cents >= 0),
    state TEXT NOT NULL CHECK (state IN ('live', 'settled', 'released')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
-- One arena job at a time: at most one live reservation.
CREATE UNIQUE INDEX budget_ledger_one_live ON budget_ledger (state) WHERE state = 'live';
