//! find_files: entries whose name — or path relative to
//! the start, for a pattern with `/` — matches a glob.
//!
//! Guarantees:
//! - Results in walk order (depth-first, names in byte order), every path
//!   relative to the workdir root; any kind of entry list_directory would
//!   show can match, reported with its type; symlinks are never descended.
//! - Every reported entry is confirmed through the resolver
//!   (`locate_walked` + `inspect`, under the root's symlink rule) and its
//!   type is the one that `lstat` beneath the root handle returned: a name the walker
//!   read through a swapped-in symlink is dropped, never reported.
//! - Entries the walker or the resolver could not read are counted in
//!   `skipped.unreadable`, never silently dropped.
//! - Stops at match `limit + 1` (`SEARCH_LIMIT_REACHED`, `limit` returned),
//!   at the walk limit or at the deadline/cancel; exactly `limit` matches in
//!   the whole tree is not truncated.
//! - Paged: whenever it stops early the outcome has a `next_cursor`, and
//!   the call with that cursor continues after the last match returned
//!   (limit) or the last entry visited (walk limit, deadline), so pages
//!   concatenate to the unlimited answer (see the `cursor` module).
//! - Every core, one answer: with [`Budget::workers`] above 1, that many
//!   threads read directories ahead of the walk (see the `dirs` module for
//!   the bounds: at most `READ_AHEAD_PER_THREAD` listings per thread ahead),
//!   while the calling thread matches and confirms in walk order; matches,
//!   `skipped`, `truncated_reason` and `next_cursor` are those of the walk
//!   on one thread. The threads are joined before the call returns.

use serverfs_core::{EntryKind, ErrorCode, FsError, Location, Root};

use crate::budget::{Budget, Outcome, Skipped, TruncatedReason};
use crate::cursor::{Position, QueryKey};
use crate::walk::{NameGlob, Step, TreeWalk};

/// One found entry (also its wire form).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FoundEntry {
    /// Path relative to the workdir root.
    pub path: String,
    /// Entry type, from `lstat` beneath the root handle.
    #[serde(rename = "type")]
    pub kind: EntryKind,
}

/// One path per line, a directory marked with `/`.
impl serverfs_core::ToText for FoundEntry {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        serverfs_core::render::marked(out, &self.path, self.kind);
        out.push('\n');
    }
}

/// What find_files returns.
pub type FindOutcome = Outcome<FoundEntry>;

/// Finds entries below the directory `start` matching `pattern`, after
/// `cursor` (a `next_cursor` of the same query) when given.
///
/// # Errors
/// `INVALID_ARGUMENT` (bad glob, `limit` 0, a cursor that is malformed or
/// from another query); `NOT_A_DIRECTORY`,
/// `SYMLINK_NOT_ALLOWED`, `PATH_NOT_FOUND`, … for `start`. Entries that fail
/// during the walk are skipped, never an error.
pub fn find_files(
    root: &Root,
    start: &Location<'_>,
    pattern: &str,
    limit: u64,
    cursor: Option<&str>,
    budget: &Budget,
) -> Result<FindOutcome, FsError> {
    if limit == 0 {
        return Err(FsError::invalid("limit must be at least 1."));
    }
    let glob = NameGlob::new(pattern, "pattern")?;
    let key = QueryKey::new("find_files", start, &[Some(pattern)]);
    let resume = cursor.map(|c| Position::decode(c, key, start)).transpose()?;
    // Cursors never point inside an entry here (only search_text's do).
    if resume.as_ref().is_some_and(|pos| pos.line.is_some()) {
        return Err(FsError::invalid("cursor: not a find_files cursor."));
    }
    let dir = root.walk_root(start)?;
    let workers = budget.workers();
    std::thread::scope(|scope| {
        let mut walk = TreeWalk::new(root.policy(), start, &dir, budget, resume.as_ref());
        if workers > 1 {
            walk.read_ahead(scope, workers);
        }
        // The last entry dealt with: where a walk-limit or deadline stop resumes.
        let last =
            resume.as_ref().map_or_else(|| start.path().as_relative(), |pos| pos.path.clone());
        let outcome = walk_matches(root, &glob, walk, limit, last, key);
        // Leaving the scope joins the readers: `walk_matches` dropped the
        // walk, which stopped them.
        Ok(outcome)
    })
}

/// Walks, matches and confirms until the walk ends or a limit stops it.
fn walk_matches(
    root: &Root,
    glob: &NameGlob,
    mut walk: TreeWalk<'_>,
    limit: u64,
    mut last: String,
    key: QueryKey,
) -> FindOutcome {
    let mut matches: Vec<FoundEntry> = Vec::new();
    let mut unconfirmed = 0;
    let truncated_reason = loop {
        let entry = match walk.next_step() {
            Step::Entry(entry) => entry,
            Step::Stop(reason) => break Some(reason),
            Step::Done => break None,
        };
        if glob.is_match(entry.below_start(), entry.name()) {
            match confirm(root, entry.rel_path()) {
                Ok(_) if matches.len() as u64 == limit => {
                    break Some(TruncatedReason::SearchLimitReached);
                }
                Ok(kind) => matches.push(FoundEntry { path: entry.relative.clone(), kind }),
                // Gone since the walker saw it: the answer reflects the tree now.
                Err(Some(ErrorCode::PathNotFound)) => {}
                Err(_) => unconfirmed += 1,
            }
        }
        last = entry.relative;
    };
    let skipped = Skipped { unreadable: walk.unreadable() + unconfirmed, ..Skipped::default() };
    // After a limit stop `last` is the entry before the one holding the
    // surplus match, so the next page starts with that match.
    let next_cursor = truncated_reason.map(|_| Position { path: last, line: None }.encode(key));
    FindOutcome { matches, truncated_reason, skipped, next_cursor }
}

/// The entry's type by `lstat` beneath the root handle, or the code of the
/// resolver's refusal (`None`: a name no client could pass).
fn confirm(
    root: &Root,
    path: Option<serverfs_core::RelPath>,
) -> Result<EntryKind, Option<ErrorCode>> {
    let loc = root.locate_walked(path.ok_or(None)?).map_err(|e| Some(e.code()))?;
    root.inspect(&loc).map(|meta| meta.kind).map_err(|e| Some(e.code()))
}
