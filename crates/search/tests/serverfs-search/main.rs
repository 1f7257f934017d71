//! serverfs-search's integration tests: one binary, a module per file (see
//! docs/testing.md).

mod find_search;
mod parallel;
