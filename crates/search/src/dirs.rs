//! Directory listings for the walk, optionally read ahead of it by worker
//! threads (find_files on every core).
//!
//! Guarantees:
//! - A [`Listing`] is what the walk shows of one directory: its children
//!   with UTF-8 names that the policy lets through (and, when resuming,
//!   that do not sort wholly before the position), sorted by name bytes,
//!   with their type as read from the directory, and how many read errors
//!   the directory gave (opening it, reading an entry or its type).
//! - [`Listings::take`] returns the listing of the directory asked for,
//!   the same whether a worker read it ahead of time or the caller reads
//!   it then: the walk's answer does not depend on the thread count.
//! - Bounded read-ahead: workers read the unread directories the walk
//!   has already seen, the first in walk order first (the ones it needs
//!   next), and pause while [`READ_AHEAD_PER_THREAD`] listings per worker
//!   are read or being read and not yet taken. Memory is therefore at most
//!   that many listings beyond the walk's own stack, plus the names of the
//!   subdirectories they hold.
//! - Never stuck behind the read-ahead: a directory the walk needs that no
//!   worker has started is read on the caller's thread at once.
//! - Scoped: workers are threads of a [`std::thread::scope`] the caller
//!   opens ([`Listings::read_ahead`]). Dropping the [`Listings`] stops them
//!   (a worker reading a directory stops at its next entry), so the scope
//!   joins them promptly and a call holds its admission permit until every
//!   thread it started has stopped. A worker that panics does not hang the
//!   caller: the panic is resumed on the caller's thread.
//! - Directories are read by path below the core's
//!   [`WalkRoot`](serverfs_core::WalkRoot) (`/proc/self/fd/N/…`), never a
//!   host path; as before, the names read are candidates only (see the
//!   `walk` module).

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, FileType};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;

use serverfs_core::Policy;

use crate::cursor::{is_self_or_ancestor, walk_order};

/// Listings each worker may have read (or be reading) ahead of the walk.
pub(crate) const READ_AHEAD_PER_THREAD: usize = 4;

/// One visible entry of a directory.
#[derive(Debug)]
pub(crate) struct Child {
    /// Path relative to the walk's start, `/`-joined.
    pub(crate) below: String,
    /// Type as read from the directory (`d_type`, or `lstat` when the
    /// filesystem does not say).
    pub(crate) file_type: FileType,
}

/// One directory as the walk shows it; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Read errors, reported before the children.
    pub(crate) errors: u64,
    /// Visible children in byte order of their names.
    pub(crate) children: Vec<Child>,
}

/// How a directory is read and filtered: the same for every thread.
pub(crate) struct Reader {
    /// The start directory as the resolver opened it.
    walk_root: PathBuf,
    /// `start/` (or empty at the workdir root).
    prefix: String,
    policy: Policy,
    /// When resuming: the position's path below the start.
    after: Option<String>,
}

impl Reader {
    pub(crate) fn new(
        walk_root: PathBuf,
        prefix: String,
        policy: Policy,
        after: Option<String>,
    ) -> Self {
        Self { walk_root, prefix, policy, after }
    }

    /// The listing of `dir` (below the start; empty for the start itself).
    /// Stops early, with what it read, once `stop` is set.
    fn read(&self, dir: &str, stop: &AtomicBool) -> Listing {
        let path = if dir.is_empty() { self.walk_root.clone() } else { self.walk_root.join(dir) };
        let mut listing = Listing::default();
        let Ok(entries) = fs::read_dir(path) else {
            listing.errors = 1;
            return listing;
        };
        // Only a directory at or before the resume position in walk order
        // can hold children that sort wholly before it.
        let after =
            self.after.as_deref().filter(|after| walk_order(dir, after) != Ordering::Greater);
        for entry in entries {
            if stop.load(AtomicOrdering::Relaxed) {
                break;
            }
            let Ok((entry, file_type)) = entry.and_then(|e| e.file_type().map(|t| (e, t))) else {
                listing.errors += 1;
                continue;
            };
            // Not UTF-8: cannot be named to a client, so neither shown nor
            // descended into.
            let Ok(name) = entry.file_name().into_string() else { continue };
            let below = if dir.is_empty() { name } else { format!("{dir}/{name}") };
            // Before the position and not above it: this entry and its
            // whole subtree were dealt with by an earlier page.
            if let Some(after) = after
                && walk_order(&below, after) == Ordering::Less
                && !is_self_or_ancestor(&below, after)
            {
                continue;
            }
            let name = below.rsplit('/').next().unwrap_or(&below);
            let visible = if self.prefix.is_empty() {
                self.policy.entry_visible(&below, name)
            } else {
                self.policy.entry_visible(&format!("{}{below}", self.prefix), name)
            };
            if visible {
                listing.children.push(Child { below, file_type });
            }
        }
        // Siblings share `dir/`, so comparing the paths' bytes compares
        // the names' bytes.
        listing.children.sort_unstable_by(|a, b| a.below.as_bytes().cmp(b.below.as_bytes()));
        listing
    }
}

/// A directory path ordered by walk order, for the read-ahead queue.
#[derive(Debug, PartialEq, Eq)]
struct WalkKey(String);

impl Ord for WalkKey {
    fn cmp(&self, other: &Self) -> Ordering {
        walk_order(&self.0, &other.0)
    }
}

impl PartialOrd for WalkKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
struct State {
    /// Seen by the walk's listings, not started by anyone.
    todo: BTreeSet<WalkKey>,
    /// Read by a worker, not yet taken.
    done: HashMap<String, Listing>,
    /// Listings workers started and the walk has not taken.
    ahead: usize,
    /// The walk is gone: workers leave.
    closed: bool,
    panic: Option<Box<dyn Any + Send>>,
}

impl State {
    /// Queues the subdirectories of `listing` for the workers.
    fn queue_children(&mut self, listing: &Listing) {
        for child in listing.children.iter().filter(|c| c.file_type.is_dir()) {
            self.todo.insert(WalkKey(child.below.clone()));
        }
    }
}

struct Shared {
    reader: Reader,
    state: Mutex<State>,
    changed: Condvar,
    /// Raised with `closed`, read without the lock inside a directory.
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// One worker: reads queued directories until the walk is gone.
    fn work(&self, max_ahead: usize) {
        loop {
            let mut state = self.lock();
            let dir = loop {
                if state.closed {
                    return;
                }
                if state.ahead < max_ahead
                    && let Some(WalkKey(dir)) = state.todo.pop_first()
                {
                    break dir;
                }
                state = self.wait(state);
            };
            state.ahead += 1;
            drop(state);
            let listing = catch_unwind(AssertUnwindSafe(|| self.reader.read(&dir, &self.stop)));
            let mut state = self.lock();
            match listing {
                Ok(listing) => {
                    state.queue_children(&listing);
                    state.done.insert(dir, listing);
                }
                Err(panic) => {
                    state.panic = Some(panic);
                    state.closed = true;
                }
            }
            drop(state);
            self.changed.notify_all();
        }
    }
}

/// The listings of one walk; see the module docs.
pub(crate) struct Listings {
    shared: Arc<Shared>,
    /// Whether workers were started (directories are then queued).
    threads: bool,
}

impl Listings {
    pub(crate) fn new(reader: Reader) -> Self {
        let shared = Shared {
            reader,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        };
        Self { shared: Arc::new(shared), threads: false }
    }

    /// Starts `threads` workers in `scope` reading directories ahead of
    /// the walk, from the start directory on. Call it before the first
    /// [`take`](Self::take), and drop `self` inside the scope.
    pub(crate) fn read_ahead<'scope>(&mut self, scope: &'scope Scope<'scope, '_>, threads: usize) {
        if threads == 0 || self.threads {
            return;
        }
        self.shared.lock().todo.insert(WalkKey(String::new()));
        let max_ahead = threads * READ_AHEAD_PER_THREAD;
        for _ in 0..threads {
            let shared = Arc::clone(&self.shared);
            scope.spawn(move || shared.work(max_ahead));
        }
        self.threads = true;
    }

    /// The listing of `dir`, a directory of a listing taken before (or the
    /// start, `""`).
    pub(crate) fn take(&self, dir: &str) -> Listing {
        let shared = &*self.shared;
        if !self.threads {
            return shared.reader.read(dir, &shared.stop);
        }
        let key = WalkKey(dir.to_owned());
        let mut state = shared.lock();
        loop {
            if let Some(panic) = state.panic.take() {
                drop(state);
                resume_unwind(panic);
            }
            if let Some(listing) = state.done.remove(dir) {
                state.ahead -= 1;
                drop(state);
                shared.changed.notify_all();
                return listing;
            }
            if state.todo.remove(&key) {
                // No worker started it: reading it here is quicker than
                // waiting for one.
                drop(state);
                let listing = shared.reader.read(dir, &shared.stop);
                let mut state = shared.lock();
                state.queue_children(&listing);
                drop(state);
                shared.changed.notify_all();
                return listing;
            }
            // A worker is reading it.
            state = shared.wait(state);
        }
    }
}

impl Drop for Listings {
    fn drop(&mut self) {
        if !self.threads {
            return;
        }
        self.shared.stop.store(true, AtomicOrdering::Relaxed);
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a/b/c", "a-b", "a.b/x", "z", ".hidden/in"] {
            fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in ["a/1", "a/b/2", "a/b/c/3", "a-b/4", "z/5", "6"] {
            fs::write(dir.path().join(f), f).unwrap();
        }
        dir
    }

    /// Every directory's listing, in walk order, taken through `listings`.
    fn walk(listings: &Listings) -> Vec<String> {
        fn go(listings: &Listings, dir: &str, out: &mut Vec<String>) {
            for child in listings.take(dir).children {
                out.push(child.below.clone());
                if child.file_type.is_dir() {
                    go(listings, &child.below, out);
                }
            }
        }
        let mut out = Vec::new();
        go(listings, "", &mut out);
        out
    }

    fn reader(root: &std::path::Path) -> Reader {
        Reader::new(root.to_path_buf(), String::new(), Policy::new(false, &[]).unwrap(), None)
    }

    #[test]
    fn read_ahead_gives_the_inline_listings() {
        let dir = tree();
        let want = walk(&Listings::new(reader(dir.path())));
        assert_eq!(
            want,
            ["6", "a", "a/1", "a/b", "a/b/2", "a/b/c", "a/b/c/3", "a-b", "a-b/4", "a.b", "a.b/x"]
                .into_iter()
                .chain(["z", "z/5"])
                .collect::<Vec<_>>()
        );
        for threads in [1, 2, 5] {
            let got = std::thread::scope(|scope| {
                let mut listings = Listings::new(reader(dir.path()));
                listings.read_ahead(scope, threads);
                walk(&listings)
            });
            assert_eq!(got, want, "{threads} threads");
        }
    }

    /// The walk stopping after one listing leaves workers with queued
    /// directories and a full window: dropping the listings ends them
    /// (the scope would hang otherwise).
    #[test]
    fn dropping_the_listings_stops_the_workers() {
        let dir = tree();
        std::thread::scope(|scope| {
            let mut listings = Listings::new(reader(dir.path()));
            listings.read_ahead(scope, 3);
            assert_eq!(listings.take("").children.len(), 5);
        });
    }

    #[test]
    fn an_unreadable_directory_is_one_error() {
        let dir = tree();
        let listings = Listings::new(reader(&dir.path().join("gone")));
        let listing = listings.take("");
        assert_eq!((listing.errors, listing.children.len()), (1, 0));
    }
}
