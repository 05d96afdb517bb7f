//! Task collections: a collection is read as a listing of files with their git blob ids (from HF's
//! tree, GitHub's git/trees, or files uploaded for a stateless check), then only the files the
//! checks need. `package` finds and reads the tasks in the three formats, `report::check` runs the
//! structure check, the credit judge and the static gates (`crate::gates`) into one answer.

pub mod blob;
pub mod credit;
pub mod frontmatter;
pub mod issue;
pub mod listing;
pub mod package;
pub mod record;
pub mod report;
pub mod request;
pub mod submission;
pub mod task_identity;

pub use listing::{Contents, Entry};
pub use report::{check, check_tasks, Report};
