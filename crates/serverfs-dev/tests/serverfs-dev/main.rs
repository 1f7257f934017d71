//! serverfs-dev's integration tests: one binary, a module per file (see
//! docs/testing.md).

#[path = "../../../auth/tests/support/mod.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../../../tools/tests/support/definitions.rs"]
mod definitions;
#[path = "../../../tools/tests/support/strict.rs"]
mod strict;

mod allowlist;
mod answers;
mod auth;
mod client_gone;
mod commands;
mod crash;
mod files;
mod links;
mod multi;
mod network;
mod patch;
mod planning;
mod rendezvous;
mod sandbox;
mod startup;
mod state;
mod stderr_gone;
mod syntax;
mod tasks;
