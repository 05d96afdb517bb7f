//! Storage: one module per table group. Each maps rows to domain values at this edge.

pub mod agents;
pub mod baselines;
pub mod board;
pub mod budget;
pub mod environments;
pub mod openenv;
pub mod openenv_runs;
pub mod results;
pub mod runs;
