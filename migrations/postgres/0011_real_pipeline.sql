-- Runs speak the real pipeline. A launch mirrors the collection (its commit kept apart from the
-- bundle's, which names it), pins the job script by hash; the reconciler keeps GRPO's progress, the
-- newest log line it read (it reads only what is new) and the job's GPU readings.
ALTER TABLE runs ADD COLUMN mirror_commit TEXT;
ALTER TABLE runs ADD COLUMN job_script_sha256 TEXT;
ALTER TABLE runs ADD COLUMN steps_done BIGINT;
ALTER TABLE runs ADD COLUMN steps_planned BIGINT;
ALTER TABLE runs ADD COLUMN log_last_line TEXT;
ALTER TABLE runs ADD COLUMN gpu_samples TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN gpus_idle_since BIGINT;

-- A result's standard error is null when fewer than two tasks paired (the pipeline's null).
ALTER TABLE results ALTER COLUMN stderr_pp DROP NOT NULL;
