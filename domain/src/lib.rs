//! The arena's rules: the challenge registry, the pipeline's config and bundle, budget arithmetic and the wire
//! types the API and the pages share. No I/O lives here: callers hand in file contents and clock
//! readings, so the same code runs in the server, in tests and in the browser (wasm32).

pub mod agents;
pub mod backup;
pub mod board;
pub mod budget;
pub mod catalog;
pub mod collection;
pub mod digest;
pub mod endings;
pub mod error;
pub mod gates;
pub mod identity;
pub mod ids;
pub mod invalid;
pub mod job_labels;
pub mod limits;
mod metric_table;
pub mod money;
pub mod openenv;
pub mod pipeline;
pub mod ranking;
pub mod reason;
pub mod registry;
pub mod results;
pub mod runs;
pub mod score;
pub mod task;
pub mod text_column;
pub mod time;
pub mod training;
pub mod views;
pub mod webhooks;
pub mod words;

pub use error::{ApiErrorBody, ErrorCode};
pub use registry::{ConfigError, ConfigErrors, Registry, SourceFile};

#[cfg(test)]
mod hostile_input;
