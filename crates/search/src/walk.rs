//! The one tree walk shared by find_files and search_text, and the name
//! glob both use.
//!
//! Guarantees:
//! - Order: depth-first, pre-order, siblings in byte order of
//!   their names; the same tree gives the same sequence.
//! - Streaming: entries are produced one at a time. Nothing is collected up
//!   front beyond the sorted listings of the directories being walked (one
//!   per level), and, with read-ahead, the bounded listings of the `dirs`
//!   module.
//! - Every core, one answer: [`TreeWalk::read_ahead`] has worker threads
//!   read, filter and sort directories ahead of the walk, which takes their
//!   listings in walk order; the entries, `unreadable` counts and stops are
//!   those of the walk alone.
//! - Policy inside the walk: an entry that [`Policy::entry_visible`] refuses
//!   (hidden, denied) is neither yielded nor descended into; names that are
//!   not UTF-8 are left out the same way (they cannot be named to a client).
//!   Symlinks are yielded as entries and never followed. No gitignore or
//!   other ignore file is read.
//! - Budget: every yielded entry (and every read error) counts against
//!   `max_walk_entries`, and the deadline/cancel flag is checked before
//!   each step. A directory's read errors are counted with the directory,
//!   once across pages (a resumed page passing through it does not count
//!   them again). The cap stops a walk only once it has yielded an entry, so
//!   that every page of a paged search moves its cursor forward.
//! - Resumable (see the `cursor` module): a walk resumed at a position
//!   yields exactly the entries after it in walk order, without revisiting
//!   the rest: a directory sorting wholly before the position is pruned
//!   (listed once by the walker, its subtree never entered), files before
//!   it are never yielded (so never opened), and the few directories above
//!   the position are passed through without being yielded or counted.
//! - Anchored: the walk starts at the core's [`WalkRoot`], the start
//!   directory as the resolver opened it (`/proc/self/fd/N`), never at a
//!   host path that may have been renamed or retargeted since start-up.
//! - Nothing silently dropped: a directory or entry the walker cannot read
//!   (permissions, a path too long for the kernel, gone meanwhile) is
//!   counted in [`TreeWalk::unreadable`].
//!
//! # Security
//! A directory is opened through its parent's handle without following a
//! symlink, but a directory renamed or moved meanwhile is still listed
//! under the path the walk saw, and one deeper than the held handles is
//! opened by path (where a symlink swapped in is followed). The walk is
//! therefore only a source of *candidate names*: callers confirm every
//! entry through the [`Root`] resolver (`inspect`, `open_file`) beneath
//! the root handle before reporting or reading it.
//!
//! [`Policy::entry_visible`]: serverfs_core::Policy::entry_visible
//! [`Root`]: serverfs_core::Root
//! [`WalkRoot`]: serverfs_core::WalkRoot

use std::os::fd::OwnedFd;
use std::thread::Scope;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rustix::fs::FileType;
use serverfs_core::{FsError, Location, RelPath, WalkRoot};

use crate::budget::{Budget, TruncatedReason};
use crate::cursor::{Position, is_self_or_ancestor};
use crate::dirs::{Child, Listings, Reader};

/// Longest accepted glob, in characters.
pub const MAX_PATTERN_CHARS: usize = 1000;

/// A glob on entry names, or — when it contains `/` — on the path relative
/// to the search start (`**` crosses directories, `*` does not).
#[derive(Clone, Debug)]
pub(crate) struct NameGlob {
    set: GlobSet,
    on_path: bool,
}

impl NameGlob {
    /// Compiles `pattern` (`*`, `?`, `[…]`, `{a,b}`, `**`; case-sensitive;
    /// `\` escapes).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for an empty, overlong, absolute or malformed
    /// pattern; `what` names the argument in the message.
    pub(crate) fn new(pattern: &str, what: &str) -> Result<Self, FsError> {
        if pattern.is_empty() {
            return Err(FsError::invalid(format!("{what} must not be empty.")));
        }
        if pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(FsError::invalid(format!(
                "{what} is longer than {MAX_PATTERN_CHARS} characters."
            )));
        }
        if pattern.contains('\0') {
            return Err(FsError::invalid(format!("{what} must not contain NUL.")));
        }
        if pattern.starts_with('/') {
            return Err(FsError::invalid(format!(
                "{what} is matched against names, or paths relative to 'path'; it must not start with '/'."
            )));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| FsError::invalid(format!("{what} is not a valid glob: {}.", e.kind())))?;
        let set = GlobSetBuilder::new()
            .add(glob)
            .build()
            .map_err(|e| FsError::invalid(format!("{what} is not a valid glob: {}.", e.kind())))?;
        Ok(Self { set, on_path: pattern.contains('/') })
    }

    /// Whether the entry matches: `from_start` is its path relative to the
    /// search start, `name` its last component.
    pub(crate) fn is_match(&self, from_start: &str, name: &str) -> bool {
        self.set.is_match(if self.on_path { from_start } else { name })
    }
}

/// One visible entry, as the walker saw it (not yet confirmed).
#[derive(Debug)]
pub(crate) struct Walked {
    /// Path relative to the workdir root, `/`-joined.
    pub(crate) relative: String,
    /// Byte offset in `relative` where the path relative to the start
    /// begins.
    start_len: usize,
    /// Type as read from the directory (`d_type`, or `lstat` when the
    /// filesystem does not say); a hint only.
    pub(crate) file_type: Option<FileType>,
}

impl Walked {
    /// Path relative to the search start.
    pub(crate) fn below_start(&self) -> &str {
        &self.relative[self.start_len..]
    }

    /// The final component.
    pub(crate) fn name(&self) -> &str {
        self.relative.rsplit('/').next().unwrap_or(&self.relative)
    }

    /// The path as a [`RelPath`]; `None` if a component is not one a client
    /// could name (a backslash in a name).
    pub(crate) fn rel_path(&self) -> Option<RelPath> {
        RelPath::from_components(self.relative.split('/'))
    }

    /// Whether the walker saw a regular file.
    pub(crate) fn looks_like_file(&self) -> bool {
        self.file_type == Some(FileType::RegularFile)
    }
}

/// What the walk produced next.
#[derive(Debug)]
pub(crate) enum Step {
    Entry(Walked),
    Stop(TruncatedReason),
    Done,
}

/// A budgeted, policy-filtered, ordered walk below a directory.
pub(crate) struct TreeWalk<'b> {
    listings: Listings,
    /// The children not yet yielded of the directories being walked, the
    /// deepest last; `None` before the first step.
    stack: Option<Vec<std::vec::IntoIter<Child>>>,
    /// `start/` (or empty at the workdir root).
    prefix: String,
    /// While resuming: the position's path below the start, and whether
    /// the entry at it is yielded again (a file searched from a line on).
    resume: Option<(String, bool)>,
    visited: u64,
    yielded: bool,
    unreadable: u64,
    budget: &'b Budget,
}

impl<'b> TreeWalk<'b> {
    /// Walks below `start`, opened by the resolver as `root`; after
    /// `resume` when given (a position at or below `start`, as
    /// [`Position::decode`] checked).
    pub(crate) fn new(
        policy: &serverfs_core::Policy,
        start: &Location<'_>,
        root: &WalkRoot,
        budget: &'b Budget,
        resume: Option<&Position>,
    ) -> Self {
        let start_rel = start.path().as_relative();
        let prefix = if start_rel.is_empty() { String::new() } else { format!("{start_rel}/") };
        let resume = resume.map(|pos| {
            let below = pos.path.strip_prefix(&prefix).unwrap_or_default();
            (below.to_owned(), pos.line.is_some())
        });
        let reader = Reader::new(
            root.path().to_path_buf(),
            prefix.clone(),
            policy.clone(),
            resume.as_ref().map(|(below, _)| below.clone()),
        );
        Self {
            listings: Listings::new(reader),
            stack: None,
            prefix,
            resume,
            visited: 0,
            yielded: false,
            unreadable: 0,
            budget,
        }
    }

    /// Has `threads` workers of `scope` read directories ahead of the walk
    /// (see the `dirs` module); the walk gives the same entries. Call it
    /// before the first step; the walk must be dropped inside the scope.
    pub(crate) fn read_ahead<'scope>(&mut self, scope: &'scope Scope<'scope, '_>, threads: usize) {
        self.listings.read_ahead(scope, threads);
    }

    /// Entries and directories the walker could not read so far.
    pub(crate) fn unreadable(&self) -> u64 {
        self.unreadable
    }

    /// Descends into `dir` (below the start) and returns its read errors:
    /// they count as visited and unreadable with the directory itself,
    /// never when an earlier page dealt with it and this one passes through.
    /// `parent` is the handle the listing holding `dir` gave it (`None`
    /// for the start).
    fn enter(
        stack: &mut Vec<std::vec::IntoIter<Child>>,
        listings: &Listings,
        dir: &str,
        parent: Option<&OwnedFd>,
    ) -> u64 {
        let listing = listings.take(dir, parent);
        stack.push(listing.children.into_iter());
        listing.errors
    }

    /// The next visible entry, or why the walk stops.
    pub(crate) fn next_step(&mut self) -> Step {
        loop {
            if let Err(reason) = self.budget.check() {
                return Step::Stop(reason);
            }
            let stack = match &mut self.stack {
                Some(stack) => stack,
                None => {
                    // The first step: the start's own listing, whose read
                    // errors belong to the first page only.
                    let mut stack = Vec::new();
                    let errors = Self::enter(&mut stack, &self.listings, "", None);
                    if self.resume.is_none() {
                        self.unreadable += errors;
                        self.visited += errors;
                    }
                    self.stack.insert(stack)
                }
            };
            let Some(child) = next_child(stack) else {
                return Step::Done;
            };
            // Resuming: the directories above the position (and the entry at
            // it, unless it is yielded again) were dealt with by an earlier
            // page; they are passed through, not counted. The listings
            // pruned everything else before the position.
            if let Some((after, again)) = &self.resume {
                if is_self_or_ancestor(&child.below, after) && !(*again && child.below == *after) {
                    if child.is_dir() {
                        Self::enter(stack, &self.listings, &child.below, child.parent.as_deref());
                    }
                    continue;
                }
                self.resume = None;
            }
            if self.yielded && self.visited >= self.budget.max_walk_entries() {
                return Step::Stop(TruncatedReason::WalkLimitReached);
            }
            self.visited += 1;
            self.yielded = true;
            // Symlinks are never followed: their type is the link's own.
            // A directory's read errors (it cannot be opened, an entry gone
            // since the listing) are counted with it, and cost steps of the
            // budget.
            if child.is_dir() {
                let errors =
                    Self::enter(stack, &self.listings, &child.below, child.parent.as_deref());
                self.unreadable += errors;
                self.visited += errors;
            }
            // At the workdir root the path below the start is the path.
            let relative = if self.prefix.is_empty() {
                child.below
            } else {
                let mut relative = String::with_capacity(self.prefix.len() + child.below.len());
                relative.push_str(&self.prefix);
                relative.push_str(&child.below);
                relative
            };
            return Step::Entry(Walked {
                relative,
                start_len: self.prefix.len(),
                file_type: Some(child.file_type),
            });
        }
    }
}

/// The next child in walk order from the stack, leaving the directories
/// that are done.
fn next_child(stack: &mut Vec<std::vec::IntoIter<Child>>) -> Option<Child> {
    loop {
        match stack.last_mut()?.next() {
            Some(child) => return Some(child),
            None => {
                stack.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::ErrorCode;

    #[test]
    fn name_globs() {
        let g = NameGlob::new("*.py", "pattern").unwrap();
        assert!(g.is_match("a/b/x.py", "x.py"));
        assert!(!g.is_match("a/b/x.pyc", "x.pyc"));
        let g = NameGlob::new("*compose*.yml", "pattern").unwrap();
        assert!(g.is_match("deploy/docker-compose.prod.yml", "docker-compose.prod.yml"));
        let g = NameGlob::new("{a,b}?.[ch]", "pattern").unwrap();
        assert!(g.is_match("x/a1.c", "a1.c"));
        assert!(g.is_match("b2.h", "b2.h"));
        assert!(!g.is_match("c1.c", "c1.c"));
    }

    #[test]
    fn path_globs_match_relative_to_start() {
        let g = NameGlob::new("src/*.rs", "pattern").unwrap();
        assert!(g.is_match("src/lib.rs", "lib.rs"));
        assert!(!g.is_match("src/a/lib.rs", "lib.rs"), "* must not cross '/'");
        let g = NameGlob::new("src/**/*.rs", "pattern").unwrap();
        assert!(g.is_match("src/lib.rs", "lib.rs"));
        assert!(g.is_match("src/a/b/lib.rs", "lib.rs"));
        let g = NameGlob::new("**/tests/*.py", "pattern").unwrap();
        assert!(g.is_match("tests/t.py", "t.py"));
        assert!(g.is_match("a/tests/t.py", "t.py"));
    }

    #[test]
    fn escapes_and_case() {
        let g = NameGlob::new(r"\*.txt", "pattern").unwrap();
        assert!(g.is_match("*.txt", "*.txt"));
        assert!(!g.is_match("a.txt", "a.txt"));
        let g = NameGlob::new("*.PY", "pattern").unwrap();
        assert!(!g.is_match("x.py", "x.py"), "globs are case-sensitive");
    }

    #[test]
    fn bad_globs_are_invalid_arguments() {
        for bad in ["", "[", "a{b", "/etc/*", "a\0b"] {
            let err = NameGlob::new(bad, "pattern").unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArgument, "{bad:?}");
        }
        assert!(NameGlob::new(&"a".repeat(MAX_PATTERN_CHARS + 1), "pattern").is_err());
        assert!(NameGlob::new(&"a".repeat(MAX_PATTERN_CHARS), "pattern").is_ok());
    }

    #[test]
    fn walked_accessors() {
        let w = Walked { relative: "src/a/b.rs".into(), start_len: 4, file_type: None };
        assert_eq!(w.below_start(), "a/b.rs");
        assert_eq!(w.name(), "b.rs");
        assert_eq!(w.rel_path().unwrap().as_relative(), "src/a/b.rs");
        assert!(!w.looks_like_file());
        let odd = Walked { relative: "a\\b".into(), start_len: 0, file_type: None };
        assert!(odd.rel_path().is_none());
    }
}
