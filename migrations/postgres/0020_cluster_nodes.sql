-- The training cluster as nodes (issue 70): one row per cluster agent, by the `node_id` it says in
-- its hello: which server holds its connection, when it was last heard from, its GPUs and what is
-- free. Runs name the node they were assigned to, and end with an epoch for the capacity figures.
-- The one-row `openenv_cluster` it replaces becomes the node `default` (an agent that names none).
CREATE TABLE openenv_nodes (
    node_id TEXT PRIMARY KEY,
    holder TEXT,
    connected INTEGER NOT NULL DEFAULT 0,
    seen_epoch BIGINT NOT NULL,
    gpus BIGINT NOT NULL DEFAULT 0,
    gpus_free BIGINT NOT NULL DEFAULT 0,
    sandboxes_free BIGINT NOT NULL DEFAULT 0,
    -- When the arena gave the node up, silent past its bound (null while it is heard from).
    lost_epoch BIGINT
);
INSERT INTO openenv_nodes (node_id, holder, connected, seen_epoch, gpus, gpus_free, sandboxes_free)
    SELECT 'default', holder, connected, seen_epoch, gpus_free, gpus_free, sandboxes_free FROM openenv_cluster;
DROP TABLE openenv_cluster;
ALTER TABLE openenv_runs ADD COLUMN node_id TEXT;
ALTER TABLE openenv_runs ADD COLUMN ended_epoch BIGINT;
UPDATE openenv_runs SET node_id = 'default';
CREATE INDEX openenv_runs_node ON openenv_runs (node_id, state);
