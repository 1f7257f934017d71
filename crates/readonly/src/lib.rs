//! The read-only tool set of ServerFS: list_workdirs, list_directory,
//! find_files, search_text, read_text_file, stat_file and the resource
//! template `serverfs://{workdir}/{path}`.
//!
//! [`Workdirs`] is the registry of named workdirs, each a core
//! [`serverfs_core::Root`] that never follows a symlink; [`ReadOnlyFs`]
//! holds it and the limits; [`ReadOnlyServer`] exposes it as an rmcp
//! [`rmcp::ServerHandler`]. Nothing
//! here can write, rename or delete a file or run a process: the crates
//! that could are not in its dependency graph.

mod args;
mod limits;
mod ops;
mod runner;
pub mod schema;
mod server;
pub mod uri;
pub mod workdirs;

pub use limits::{DEFAULT_READ_LINES, Limits};
pub use ops::ReadOnlyFs;
pub use runner::Concurrency;
pub use server::{INSTRUCTIONS, ReadOnlyServer};
pub use workdirs::{Workdir, WorkdirError, WorkdirSpec, Workdirs};
