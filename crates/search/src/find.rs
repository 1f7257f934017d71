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
//! - Entries the walker or the resolver could not read are counted in
//!   `skipped.unreadable`, never silently dropped.
//! - Stops at match `limit + 1` (`SEARCH_LIMIT_REACHED`, `limit` returned),
//!   at the walk limit or at the deadline/cancel; exactly `limit` matches in
//!   the whole tree is not truncated.

use serverfs_core::{EntryKind, ErrorCode, FsError, Location, Sandbox};

use crate::budget::{Budget, Outcome, Skipped, TruncatedReason};
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
    let root = sandbox.walk_root(start)?;
    let mut matches = Vec::new();
    let mut unconfirmed = 0;
    let mut walk = TreeWalk::new(sandbox.policy(), start, &root, budget);
    let truncated_reason = loop {
        let entry = match walk.next_step() {
            Step::Entry(entry) => entry,
            Step::Stop(reason) => break Some(reason),
            Step::Done => break None,
        };
        if !glob.is_match(entry.below_start(), entry.name()) {
            continue;
        }
        let kind = match confirm(sandbox, start, entry.rel_path()) {
            Ok(kind) => kind,
            // Gone since the walker saw it: the answer reflects the tree now.
            Err(Some(ErrorCode::PathNotFound)) => continue,
            Err(_) => {
                unconfirmed += 1;
                continue;
            }
        };
        if matches.len() as u64 == limit {
            break Some(TruncatedReason::SearchLimitReached);
        }
        matches.push(FoundEntry { path: entry.relative, kind });
    };
    let skipped = Skipped { unreadable: walk.unreadable() + unconfirmed, ..Skipped::default() };
    Ok(FindOutcome { matches, truncated_reason, skipped })
}

/// The entry's type by `lstat` beneath the root handle, or the code of the
/// resolver's refusal (`None`: a name no client could pass).
fn confirm(
    sandbox: &Sandbox,
    start: &Location<'_>,
    path: Option<serverfs_core::RelPath>,
) -> Result<EntryKind, Option<ErrorCode>> {
    let loc =
        sandbox.locate_walked(start.workdir(), path.ok_or(None)?).map_err(|e| Some(e.code()))?;
    sandbox.inspect(&loc).map(|stat| EntryKind::from_stat(&stat)).map_err(|e| Some(e.code()))
}
