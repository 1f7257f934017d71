//! serverfs-write's integration tests: one binary, a module per file (see
//! docs/testing.md).

#[path = "../support/mod.rs"]
mod support;

mod recovery;
mod security;
mod syntax;
mod transactions;
