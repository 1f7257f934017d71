//! Parser and planner for the Codex `apply_patch` format, with no I/O.
//!
//! Work is split in two steps, and neither touches the filesystem:
//!
//! 1. [`parse`] turns the patch text into a [`Patch`]: a list of
//!    [`Operation`]s (add, delete, update with an optional move). It checks
//!    the grammar, the limits ([`PatchLimits`]) and that no path appears
//!    twice. Paths are kept as written; the caller resolves them.
//! 2. [`plan_update`] takes the bytes of one file and the hunks of its
//!    update and returns the new bytes ([`Planned`]);
//!    [`plan_update_until`] does the same and stops with `TIMEOUT` when
//!    its caller's deadline or cancellation says so. It also reports, for
//!    each hunk, which matching pass found it and the line where it matched.
//!    For an add, [`add_file_bytes`] gives the new file's bytes.
//!
//! Guarantees:
//! - Every function is deterministic and total. On any input it returns
//!   `Ok` or a [`PatchError`]; it never panics. The crate is fuzzed with
//!   this as its property.
//! - A hunk's context is never placed by a silent pick. Matching goes
//!   through the passes of [`MatchPass`] in order, and at the first pass
//!   that finds anything it must find exactly one place. Otherwise the
//!   result is `PATCH_CONTEXT_AMBIGUOUS`, and if no pass finds anything it
//!   is `PATCH_CONTEXT_NOT_FOUND`, whose message names the closest place
//!   in the file and the first character that differs there (at most 600
//!   bytes of hint).
//! - Hunks apply in order and never overlap: each one is searched only
//!   after the end of the previous hunk's match.
//! - Planning costs near-linear time in the file and patch sizes (the
//!   bound is in the `plan` module's docs) and can be stopped at any time.
//! - A hunk matched only by ignoring leading whitespace gets its inserted
//!   lines in the file's indentation (tabs or spaces, at the depth where
//!   it matched), or is refused with `PATCH_INDENTATION_AMBIGUOUS` when
//!   no consistent mapping exists: never mixed indentation.
//! - Bytes outside the removed lines are kept exactly as they were: the
//!   BOM, each line's own line ending, and the file's end-of-file state (a
//!   file without a final newline still has none). Only the inserted lines
//!   get new bytes, and they use the file's line-ending style.
//!
//! ```
//! use serverfs_patch::{Operation, PatchLimits, parse, plan_update};
//!
//! let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** End Patch\n";
//! let parsed = parse(patch, &PatchLimits::default()).unwrap();
//! let Operation::Update { hunks, .. } = &parsed.operations[0] else { unreachable!() };
//! let planned = plan_update(b"one\ntwo\nthree\n", hunks, "a.txt").unwrap();
//! assert_eq!(planned.bytes, b"one\n2\nthree\n");
//! assert_eq!(planned.hunks[0].line, 1);
//! ```

mod automaton;
mod error;
mod indent;
mod matching;
mod nearest;
mod parse;
mod plan;

pub use error::PatchError;
pub use indent::Style;
pub use matching::MatchPass;
pub use parse::parse;
pub use plan::{HunkReport, Planned, add_file_bytes, plan_update, plan_update_until};

/// Limits checked by [`parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchLimits {
    /// The largest patch text, in bytes. Default 1 MiB.
    pub max_patch_bytes: usize,
    /// The most file operations (add, delete, update) in one patch.
    /// Default 64.
    pub max_operations: usize,
}

impl Default for PatchLimits {
    fn default() -> Self {
        Self { max_patch_bytes: 1024 * 1024, max_operations: 64 }
    }
}

/// A parsed patch: its file operations in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// The operations, in patch order.
    pub operations: Vec<Operation>,
}

/// One file operation of a patch.
///
/// `line` is the 1-based patch line of the operation's `***` header, used
/// in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `*** Add File: path`, followed by the new file's lines (each written
    /// with a leading `+`, stored without it).
    Add {
        /// The path as written in the patch.
        path: String,
        /// The new file's lines, without the `+` and without line endings.
        lines: Vec<String>,
        /// The patch line of the header.
        line: usize,
    },
    /// `*** Delete File: path`.
    Delete {
        /// The path as written in the patch.
        path: String,
        /// The patch line of the header.
        line: usize,
    },
    /// `*** Update File: path`, an optional `*** Move to: target`, then
    /// hunks. Either the target or at least one hunk is present.
    Update {
        /// The path as written in the patch.
        path: String,
        /// The new path, when the file is also moved.
        move_to: Option<String>,
        /// The hunks, in patch order (possibly none for a pure move).
        hunks: Vec<Hunk>,
        /// The patch line of the header.
        line: usize,
    },
}

impl Operation {
    /// The path the operation reads or creates (for a move, its source).
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path, .. } | Self::Update { path, .. } => path,
        }
    }
}

/// One hunk of an update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// The texts of the hunk's `@@ text` lines, in order (a bare `@@` adds
    /// nothing). Each is located, in order, before the body is matched
    /// after the last one.
    pub contexts: Vec<String>,
    /// The body lines, in order.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` followed the body: the old lines must match at
    /// the very end of the file.
    pub end_of_file: bool,
    /// The 1-based patch line where the hunk starts (its first `@@` line,
    /// or its first body line when it has none), for messages.
    pub patch_line: usize,
}

impl Hunk {
    /// The lines the hunk expects in the file: context and removed lines.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|l| match l {
            HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
            HunkLine::Add(_) => None,
        })
    }
}

/// One body line of a hunk, stored without its marker and line ending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text` (or an empty line): must be in the file; kept.
    Context(String),
    /// `-text`: must be in the file; removed.
    Remove(String),
    /// `+text`: inserted.
    Add(String),
}
