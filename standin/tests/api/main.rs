//! The stand-in's repository routes over HTTP, against git repositories built in a temporary
//! directory.

mod datasets;
mod github;
mod harness;
