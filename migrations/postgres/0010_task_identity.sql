-- Each stored collection's task identities (task directory -> `sha256:` content hash) beside the
-- record, so that listings show them without reading the whole validation report; filled from
-- the report for collections stored before.
ALTER TABLE environments ADD COLUMN task_identity TEXT NOT NULL DEFAULT '{}';
UPDATE environments SET task_identity = COALESCE((report::jsonb -> 'quality_gates' -> 'static' -> 'task_identity')::text, '{}');
