//! The one project root serverfs-dev works in: its resolver, the shared
//! read tools (with read_file and the hashed stat_file) and the writer.
//!
//! Guarantees: every path is located in the root by its resolver (syntax,
//! policy — credentials and `.git` denied — and the symlink rule: links
//! inside the root are followed for reads, never for writes); every
//! mutation goes through [`serverfs_write::Writer`], so it is atomic, never
//! touches a symlink and survives a crash wholly before or wholly after.

use std::sync::Arc;

use serverfs_core::{Deadline, FsError, Location, Root};
use serverfs_tools::{ReadFileArgs, ReadFileResult, ReadTools, StatArgs, StatResult};
use serverfs_write::Writer;

/// The project: its root, the shared read tools, the writer.
#[derive(Debug)]
pub struct Project {
    root: Arc<Root>,
    tools: ReadTools,
    writer: Arc<Writer>,
    max_file_bytes: u64,
}

impl Project {
    /// Works in `writer`'s root with the read `tools`; files over
    /// `max_file_bytes` are neither read whole nor written.
    pub fn new(writer: Arc<Writer>, tools: ReadTools, max_file_bytes: u64) -> Self {
        Self { root: Arc::clone(writer.root()), tools, writer, max_file_bytes }
    }

    /// The project root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The shared read tools and their limits.
    pub fn tools(&self) -> &ReadTools {
        &self.tools
    }

    /// The largest file read whole or written (`--max-file-bytes`).
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The writer (writes, patches and uploads are committed through it).
    pub fn writer(&self) -> &Arc<Writer> {
        &self.writer
    }

    /// Runs `op` on `path` located in the root.
    pub fn at<R>(
        &self,
        path: &str,
        op: impl FnOnce(&ReadTools, &Root, &Location<'_>) -> Result<R, FsError>,
    ) -> Result<R, FsError> {
        let loc = self.root.locate(path)?;
        op(&self.tools, &self.root, &loc)
    }

    /// read_file, of files of at most the file cap.
    pub fn read_file(
        &self,
        args: &ReadFileArgs,
        deadline: &Deadline,
    ) -> Result<ReadFileResult, FsError> {
        self.tools.read_file(&self.root, args, self.max_file_bytes, deadline)
    }

    /// stat_file, hashing files of at most the file cap.
    pub fn stat(&self, args: &StatArgs, deadline: &Deadline) -> Result<StatResult, FsError> {
        self.tools.stat_hashed(&self.root, args, self.max_file_bytes, deadline)
    }
}
