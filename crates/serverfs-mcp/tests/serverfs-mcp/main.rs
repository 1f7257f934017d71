//! serverfs-mcp's integration tests: one binary, a module per file (see
//! docs/testing.md).

#[path = "../common/mod.rs"]
mod common;
#[path = "../../../tools/tests/support/definitions.rs"]
mod definitions;
#[path = "../../../tools/tests/support/strict.rs"]
mod strict;

mod arguments;
mod cancel;
mod config;
mod http_auth;
mod http_guards;
mod http_limits;
mod in_process;
mod load;
mod paging;
mod permissions;
mod schemas;
mod tail;
mod tools;
