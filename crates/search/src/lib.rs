//! find_files and search_text for ServerFS, on ripgrep's own library
//! crates (`globset`, `grep-searcher`, `grep-regex`) in-process:
//! no subprocess, no shell, nothing a client string could inject into.
//!
//! Guarantees:
//! - One walk ([`walk`]) for both tools: depth-first, names in byte order,
//!   streamed, filtered by the core [`Policy`](serverfs_core::Policy) (the
//!   same hidden/deny rule as the resolver), symlinks never followed.
//! - Nothing found by the walk is trusted: find results are confirmed with
//!   an `lstat` beneath the workdir's root handle, and files are searched
//!   only through handles the core resolver opened, so a directory swapped
//!   for a symlink cannot leak a foreign name or byte.
//! - Every call is bounded by a [`Budget`]: `limit + 1` matches, the walk
//!   entry cap, the deadline and a cancel flag, checked per entry and per
//!   read inside a file.
//! - Paged by opaque cursors bound to their query: pages concatenate to
//!   the unlimited answer (`cursor` module).
//! - Plain synchronous code: run it on a blocking thread and set the
//!   budget's cancel flag to stop it. search_text searches files on up to
//!   [`Budget::workers`] scoped threads of its own (see `pool`), find_files
//!   reads directories on as many (see `dirs`), all joined before the call
//!   returns; the answer is the same for every count.
//! - Bounds of one call with `w` = [`Budget::workers`] (default: the cores,
//!   at most [`MAX_DEFAULT_WORKERS`]): at most `w` threads besides the
//!   caller's. search_text holds at most `2 w` batches (of up to 32
//!   files) ahead of its walk; find_files at most `4 w` directory listings
//!   read ahead and not yet walked, besides the walk's own stack (one
//!   listing per level) and the names of the subdirectories those
//!   listings hold.

pub mod budget;
mod cursor;
mod dirs;
pub mod find;
mod pool;
pub mod search;
pub mod walk;

pub use budget::{Budget, MAX_DEFAULT_WORKERS, Outcome, Skipped, TruncatedReason, default_workers};
pub use find::{FindOutcome, FoundEntry, find_files};
pub use search::{
    MAX_LINE_BYTES, MAX_QUERY_CHARS, MAX_TEXT_BYTES, SearchOutcome, SearchQuery, TextMatch,
    search_text,
};
