//! OpenEnv runs: the arena starts the one run of each admitted submission, in acceptance order,
//! when the connected cluster reports a free H200 and sandboxes for a step's five episodes; the
//! cluster reports each run's events, stored once by sequence; the arena ends a run itself when an
//! editor cancels it or its trainer has not started on a GPU within two hours
//! (`RUN_QUEUE_TIMEOUT`).
//!
//! The cluster's connection (`/api/relay/cluster`) speaks JSON messages with a `kind`:
//! - cluster → arena: `hello` / `heartbeat` (`gpus_free`, `sandboxes_free`, and on `hello` the
//!   `runs` it holds), `accepted` (`run_id`: it has the assignment), `event` (`run_id`, `event`:
//!   `seq`, `state`, `policy_version`, `at`, `rewards?`, `message?`), `stopped` (`run_id`);
//! - arena → cluster: `ack` (for each of those, with `run_id`/`seq` for an event, or `error`),
//!   `assign` (`run_id`, `time_limit_s`, the pinned submission) and `stop` (`run_id`, `reason`).
//!
//! An assignment is sent until the cluster accepts it and a stop until the cluster confirms it, so
//! a connection lost or an arena restarted in between loses nothing: whichever server holds the
//! connection sends what is outstanding after every heartbeat.
//!
//! The runs' folder: `service.rs` (the cluster's messages, assignments, reads), `repo.rs` (their
//! SQL), `cleanup.rs` (a stalled cleanup counted and released).

pub mod cleanup;
pub mod repo;
pub mod service;
