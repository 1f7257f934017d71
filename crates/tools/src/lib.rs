//! The shared read tools of ServerFS: the call runner (per-class admission,
//! deadline, cancellation, one log line) over a binary's own context, the
//! read operations ([`ReadTools`]: list_directory, find_files, search_text,
//! read_text_file, stat_file and whole-file reads, and serverfs-dev's
//! read_file and hashed stat_file) on a path already located
//! in a core [`serverfs_core::Root`], their argument and result types — free
//! of any `workdir` — with JSON Schemas every client accepts, and the
//! argument extractor that turns any malformed argument into
//! `INVALID_ARGUMENT`, and the text a model reads of every answer
//! ([`text`]).
//!
//! A binary builds its rmcp handler on these (serverfs-mcp's read-only one
//! lives in that crate). Nothing here can write, rename or delete a file or
//! run a process: the crates that could are not in its dependency graph.

mod annotations;
pub mod args;
mod limits;
mod ops;
mod runner;
pub mod schema;
pub mod text;
mod whole_file;

pub use annotations::Effects;
pub use args::Args;
pub use limits::{DEFAULT_READ_LINES, Limits};
pub use ops::{ReadTools, ResourceText};
pub use runner::{CallClass, CallLog, Concurrency, INLINE_SLOTS, Reported, Runner, WRITE_SLOTS};
pub use text::{Answer, TextOutput, ToText, ToolResult};
pub use whole_file::{
    IMAGE_MAX_BYTES, ImageInfo, READ_FILE_MAX_CHARS, ReadFileArgs, ReadFileResult, StatArgs,
    StatResult,
};
