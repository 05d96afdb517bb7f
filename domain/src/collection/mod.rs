//! Task collections: the pieces of the validation pipeline that need no network. A collection is
//! read as a listing of files with their git blob ids; these modules compute each task's identity,
//! read `submission.yaml`'s flat defaults, and judge the credit metadata tasks declare.
//!
//! Not built yet (the collections issue continues): package parsing for the three formats, the
//! Harbor conversion, the static gates, and fetching from HF datasets and GitHub.

pub mod blob;
pub mod credit;
pub mod submission;
pub mod task_identity;
