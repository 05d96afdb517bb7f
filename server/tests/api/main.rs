//! API and page tests, in-process (`tower::ServiceExt::oneshot`), each on SQLite and PostgreSQL.

mod backup;
mod baselines;
mod bench;
mod board;
mod catalog;
mod controls;
mod environments;
mod errors;
mod follow;
mod harness;
mod held_out;
mod hostile;
mod identity;
mod lfs;
mod openenv;
mod openenv_010;
mod openenv_runs;
mod pages;
mod real_registry;
mod recheck;
mod replicas;
mod results;
mod runs;
mod session;
mod standing;
mod webhooks;
