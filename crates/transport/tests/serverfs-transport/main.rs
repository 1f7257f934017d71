//! serverfs-transport's integration tests: one binary, a module per file (see
//! docs/testing.md).

mod compose;
