//! serverfs-auth's integration tests: one binary, a module per file (see
//! docs/testing.md).

#[path = "../router/mod.rs"]
mod router;
#[path = "../support/mod.rs"]
mod support;

mod access;
mod layer;
mod refusal_log;
