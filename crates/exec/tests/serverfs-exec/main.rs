//! serverfs-exec's integration tests: one binary, a module per file (see
//! docs/testing.md).

#[path = "../common/mod.rs"]
mod common;

mod confine;
mod misc;
mod run;
mod sandbox;
mod session;
mod supervisor_log;
