//! API and page tests, in-process (`tower::ServiceExt::oneshot`), each on SQLite and PostgreSQL.

mod catalog;
mod errors;
mod harness;
mod pages;
