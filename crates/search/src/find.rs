//! find_files (SPEC §2.3, §2.6): entries whose name — or path relative to
//! the start, for a pattern with `/` — matches a glob.
//!
//! Guarantees:
//! - Results in walk order (depth-first, names in byte order), every path
//!   relative to the workdir root; any kind of entry list_directory would
//!   show can match, reported with its type; symlinks are never descended.
//! - Every reported entry is confirmed through the resolver
//!   (`locate_walked` + `inspect`, no symlink followed) and its type is the
//!   one that `lstat` beneath the root handle returned: a name the walker
//!   read through a swapped-in symlink is dropped, never reported.
//! - Stops at match `limit + 1` (`SEARCH_LIMIT_REACHED`, `limit` returned),
//!   at the walk limit or at the deadline/cancel; exactly `limit` matches in
//!   the whole tree is not truncated.

use serverfs_core::{EntryKind, FsError, Location, Sandbox};

use crate::budget::{Budget, Outcome, TruncatedReason};
use crate::walk::{NameGlob, Step, TreeWalk};

/// One find_files result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundEntry {
    /// Relative to the workdir root.
    pub path: String,
    /// From `lstat` beneath the root handle.
    pub kind: EntryKind,
}

/// What find_files returns.
pub type FindOutcome = Outcome<FoundEntry>;

/// Finds entries below the directory `start` matching `pattern`.
///
/// # Errors
/// `INVALID_ARGUMENT` (bad glob, `limit` 0); `NOT_A_DIRECTORY`,
/// `SYMLINK_NOT_ALLOWED`, `PATH_NOT_FOUND`, … for `start`. Entries that fail
/// during the walk are skipped, never an error.
pub fn find_files(
    sandbox: &Sandbox,
    start: &Location<'_>,
    pattern: &str,
    limit: u64,
    budget: &Budget,
) -> Result<FindOutcome, FsError> {
    if limit == 0 {
        return Err(FsError::invalid("limit must be at least 1."));
    }
    let glob = NameGlob::new(pattern, "pattern")?;
    // Checks the start through the resolver (type, symlink, existence); the
    // handle itself is not needed, the walk reads by path.
    drop(sandbox.open_dir(start)?);

    let mut matches = Vec::new();
    let mut walk = TreeWalk::new(sandbox.policy(), start, budget);
    let truncated_reason = loop {
        let entry = match walk.next_step() {
            Step::Entry(entry) => entry,
            Step::Stop(reason) => break Some(reason),
            Step::Done => break None,
        };
        if !glob.is_match(entry.below_start(), entry.name()) {
            continue;
        }
        let Some(kind) = confirm(sandbox, start, entry.rel_path()) else {
            continue;
        };
        if matches.len() as u64 == limit {
            break Some(TruncatedReason::SearchLimitReached);
        }
        matches.push(FoundEntry { path: entry.relative, kind });
    };
    Ok(FindOutcome { matches, truncated_reason })
}

/// The entry's type by `lstat` beneath the root handle, or `None` if the
/// resolver refuses it (gone, behind a symlink, policy).
fn confirm(
    sandbox: &Sandbox,
    start: &Location<'_>,
    path: Option<serverfs_core::RelPath>,
) -> Option<EntryKind> {
    let loc = sandbox.locate_walked(start.workdir(), path?).ok()?;
    sandbox.inspect(&loc).ok().map(|stat| EntryKind::from_stat(&stat))
}
