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
//! - Directories are read below the core's
//!   [`WalkRoot`](serverfs_core::WalkRoot) (`/proc/self/fd/N`), never a
//!   host path: each through the handle of the directory that listed it,
//!   without following a symlink, or by its path below the walk root when
//!   deeper than [`MAX_HELD_DEPTH`] or too long for the kernel (see
//!   [`Reader`]). A walk holds at most about `MAX_HELD_DEPTH` plus the
//!   read-ahead's directory handles. The names read are candidates only
//!   (see the `walk` module).

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, RawDir, openat, statat};
use serverfs_core::Policy;

use crate::cursor::{is_self_or_ancestor, walk_order};

/// Listings each worker may have read (or be reading) ahead of the walk.
pub(crate) const READ_AHEAD_PER_THREAD: usize = 4;

/// Bytes of directory entries fetched per `getdents64` (glibc's size).
const DIRENT_BUFFER: usize = 32 * 1024;

/// Longest path the kernel takes (`PATH_MAX` with its NUL).
const PATH_MAX: usize = 4096;

/// Directories deeper than this (components below the start) are opened by
/// path, not through their parent's handle, so one walk holds at most about
/// this many directory handles beside the read-ahead's.
const MAX_HELD_DEPTH: usize = 64;

/// One visible entry of a directory.
#[derive(Debug)]
pub(crate) struct Child {
    /// Path relative to the walk's start, `/`-joined.
    pub(crate) below: String,
    /// Type as read from the directory (`d_type`, or `lstat` when the
    /// filesystem does not say).
    pub(crate) file_type: FileType,
    /// For a directory: the handle of the directory that listed it, which
    /// it is opened through (see [`Reader`]); moved to the read-ahead
    /// queue when workers read ahead.
    pub(crate) parent: Option<Arc<OwnedFd>>,
}

impl Child {
    pub(crate) fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }
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
///
/// A directory is opened through the handle of the directory that listed
/// it (`openat` of its name, never following a symlink), as `find` does,
/// rather than by its whole path below the walk root, which the kernel
/// would resolve again component by component (through `/proc`) for every
/// directory. The answer is the same: a directory whose path from the walk
/// root is too long for the kernel, or that lies deeper than
/// [`MAX_HELD_DEPTH`], is opened by that path, as before, and fails or
/// not as before; a symlink swapped in for a directory is refused instead
/// of followed (its names would have been dropped by confirmation anyway).
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

    /// Opens `dir` (below the start; empty for the start itself), through
    /// `parent`, the handle of the directory that listed it, when given.
    fn open(&self, dir: &str, parent: Option<&OwnedFd>) -> rustix::io::Result<OwnedFd> {
        let by_path_len = self.walk_root.as_os_str().len() + 1 + dir.len();
        if let Some(parent) = parent
            && by_path_len < PATH_MAX
        {
            let name = dir.rsplit('/').next().unwrap_or(dir);
            let flags = OFlags::RDONLY
                | OFlags::DIRECTORY
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::CLOEXEC;
            return openat(parent, name, flags, Mode::empty());
        }
        let path = if dir.is_empty() { self.walk_root.clone() } else { self.walk_root.join(dir) };
        // As `opendir` does (`std::fs::read_dir`): the walk root is a
        // `/proc/self/fd/N` link, followed.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        openat(CWD, &path, flags, Mode::empty())
    }

    /// The listing of `dir` (below the start; empty for the start itself),
    /// opened through `parent` when given. Stops early, with what it read,
    /// once `stop` is set.
    fn read(&self, dir: &str, parent: Option<&OwnedFd>, stop: &AtomicBool) -> Listing {
        let mut listing = Listing::default();
        let Ok(fd) = self.open(dir, parent) else {
            listing.errors = 1;
            return listing;
        };
        // Only a directory at or before the resume position in walk order
        // can hold children that sort wholly before it.
        let after =
            self.after.as_deref().filter(|after| walk_order(dir, after) != Ordering::Greater);
        // `dir/name` for each entry in turn, and `prefix` before it for the
        // policy: built in place, copied only for a visible entry.
        let mut below = String::with_capacity(dir.len() + 64);
        below.push_str(dir);
        if !dir.is_empty() {
            below.push('/');
        }
        let base = below.len();
        let mut full = self.prefix.clone();
        let mut buf = Vec::with_capacity(DIRENT_BUFFER);
        let mut entries = RawDir::new(&fd, buf.spare_capacity_mut());
        let mut any_dir = false;
        while let Some(entry) = entries.next() {
            if stop.load(AtomicOrdering::Relaxed) {
                break;
            }
            // A failed read ends the directory, as `readdir` does.
            let Ok(entry) = entry else {
                listing.errors += 1;
                break;
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let file_type = match entry.file_type() {
                FileType::Unknown => {
                    match statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                        Err(_) => {
                            listing.errors += 1;
                            continue;
                        }
                    }
                }
                known => known,
            };
            // Not UTF-8: cannot be named to a client, so neither shown nor
            // descended into.
            let Ok(name) = std::str::from_utf8(name) else { continue };
            below.truncate(base);
            below.push_str(name);
            // Before the position and not above it: this entry and its
            // whole subtree were dealt with by an earlier page.
            if let Some(after) = after
                && walk_order(&below, after) == Ordering::Less
                && !is_self_or_ancestor(&below, after)
            {
                continue;
            }
            let visible = if self.prefix.is_empty() {
                self.policy.entry_visible(&below, name)
            } else {
                full.truncate(self.prefix.len());
                full.push_str(&below);
                self.policy.entry_visible(&full, name)
            };
            if visible {
                any_dir |= file_type == FileType::Directory;
                listing.children.push(Child { below: below.clone(), file_type, parent: None });
            }
        }
        // Siblings share `dir/`, so comparing the paths' bytes compares
        // the names' bytes.
        listing.children.sort_unstable_by(|a, b| a.below.as_bytes().cmp(b.below.as_bytes()));
        // Subdirectories are opened through this handle; it is closed once
        // the last of them is (or with the walk).
        let depth = if dir.is_empty() { 0 } else { dir.matches('/').count() + 1 };
        if any_dir && depth < MAX_HELD_DEPTH {
            let fd = Arc::new(fd);
            for child in listing.children.iter_mut().filter(|c| c.is_dir()) {
                child.parent = Some(Arc::clone(&fd));
            }
        }
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
    /// Seen by the walk's listings, not started by anyone, with the handle
    /// of the directory that listed each.
    todo: BTreeMap<WalkKey, Option<Arc<OwnedFd>>>,
    /// Read by a worker, not yet taken.
    done: HashMap<String, Listing>,
    /// Listings workers started and the walk has not taken.
    ahead: usize,
    /// Workers waiting for a directory to read.
    idle: usize,
    /// The walk waits for a worker's listing.
    walk_waits: bool,
    /// The walk is gone: workers leave.
    closed: bool,
    panic: Option<Box<dyn Any + Send>>,
}

impl State {
    /// Queues the subdirectories of `listing` for the workers, with the
    /// handle each is opened through: the queue holds the only references,
    /// so a directory's handle is closed by whoever opens its last
    /// subdirectory (mostly a worker), not by the walk.
    fn queue_children(&mut self, listing: &mut Listing) {
        for child in listing.children.iter_mut().filter(|c| c.is_dir()) {
            self.todo.insert(WalkKey(child.below.clone()), child.parent.take());
        }
    }
}

/// Shared between the walk and its workers. Wake-ups cost a system call
/// each (and a context switch on a busy machine), so each side is woken
/// only when the other waits for it: workers (`work`) when there is a
/// directory for them and room in the window, the walk (`ready`) when it
/// waits for a listing. Workers waiting for room are woken together once
/// the walk has taken half the window, not at every listing it takes.
struct Shared {
    reader: Reader,
    state: Mutex<State>,
    work: Condvar,
    ready: Condvar,
    /// Raised with `closed`, read without the lock inside a directory.
    stop: AtomicBool,
    max_ahead: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether idle workers should be woken: there is a directory for
    /// them and room in the window.
    fn workers_wanted(&self, state: &State) -> bool {
        state.idle > 0 && !state.todo.is_empty() && state.ahead < self.max_ahead
    }

    /// One worker: reads queued directories until the walk is gone.
    fn work(&self) {
        loop {
            let mut state = self.lock();
            let (dir, parent) = loop {
                if state.closed {
                    return;
                }
                if state.ahead < self.max_ahead
                    && let Some((WalkKey(dir), parent)) = state.todo.pop_first()
                {
                    break (dir, parent);
                }
                state.idle += 1;
                state = self.work.wait(state).unwrap_or_else(PoisonError::into_inner);
                state.idle -= 1;
            };
            state.ahead += 1;
            // More work than this worker takes: another may start on it.
            let wake = self.workers_wanted(&state);
            drop(state);
            if wake {
                self.work.notify_one();
            }
            let listing = catch_unwind(AssertUnwindSafe(|| {
                self.reader.read(&dir, parent.as_deref(), &self.stop)
            }));
            drop(parent);
            let mut state = self.lock();
            match listing {
                Ok(mut listing) => {
                    state.queue_children(&mut listing);
                    state.done.insert(dir, listing);
                }
                Err(panic) => {
                    state.panic = Some(panic);
                    state.closed = true;
                    drop(state);
                    self.work.notify_all();
                    self.ready.notify_all();
                    return;
                }
            }
            let walk_waits = state.walk_waits;
            drop(state);
            if walk_waits {
                self.ready.notify_one();
            }
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
            work: Condvar::new(),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
            max_ahead: 0,
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
        let Some(shared) = Arc::get_mut(&mut self.shared) else { return };
        shared.max_ahead = threads * READ_AHEAD_PER_THREAD;
        shared.lock().todo.insert(WalkKey(String::new()), None);
        for _ in 0..threads {
            let shared = Arc::clone(&self.shared);
            scope.spawn(move || shared.work());
        }
        self.threads = true;
    }

    /// The listing of `dir`, a directory of a listing taken before (with
    /// the handle that listing gave it), or the start (`""`, `None`).
    pub(crate) fn take(&self, dir: &str, parent: Option<&OwnedFd>) -> Listing {
        let shared = &*self.shared;
        if !self.threads {
            return shared.reader.read(dir, parent, &shared.stop);
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
                // Workers waiting for room resume together once half the
                // window is free, rather than one by one at every take.
                let wake = state.ahead <= shared.max_ahead / 2 && shared.workers_wanted(&state);
                drop(state);
                if wake {
                    shared.work.notify_all();
                }
                return listing;
            }
            if let Some(parent) = state.todo.remove(&key) {
                // No worker started it: reading it here is quicker than
                // waiting for one.
                drop(state);
                let mut listing = shared.reader.read(dir, parent.as_deref(), &shared.stop);
                drop(parent);
                let mut state = shared.lock();
                state.queue_children(&mut listing);
                let wake = shared.workers_wanted(&state);
                drop(state);
                if wake {
                    shared.work.notify_all();
                }
                return listing;
            }
            // A worker is reading it.
            state.walk_waits = true;
            state = shared.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.walk_waits = false;
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
        self.shared.work.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
        fn go(listings: &Listings, dir: &str, parent: Option<&OwnedFd>, out: &mut Vec<String>) {
            for child in listings.take(dir, parent).children {
                out.push(child.below.clone());
                if child.is_dir() {
                    go(listings, &child.below, child.parent.as_deref(), out);
                }
            }
        }
        let mut out = Vec::new();
        go(listings, "", None, &mut out);
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
            assert_eq!(listings.take("", None).children.len(), 5);
        });
    }

    /// A directory swapped for a symlink after its parent was listed is
    /// refused (one read error), not followed to the names it points at.
    #[test]
    fn a_symlink_swapped_in_for_a_directory_is_not_followed() {
        let dir = tree();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "x").unwrap();
        let listings = Listings::new(reader(dir.path()));
        let root = listings.take("", None);
        let z = root.children.iter().find(|c| c.below == "z").unwrap();
        assert!(z.is_dir() && z.parent.is_some());
        fs::remove_dir_all(dir.path().join("z")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("z")).unwrap();
        let listing = listings.take("z", z.parent.as_deref());
        assert_eq!((listing.errors, listing.children.len()), (1, 0));
    }

    /// Below the depth whose handles are held, directories are opened by
    /// path: the walk goes on the same.
    #[test]
    fn deeper_than_the_held_handles() {
        let dir = tempfile::tempdir().unwrap();
        let deep: Vec<String> = (0..MAX_HELD_DEPTH + 6).map(|i| format!("d{i}")).collect();
        let deep = deep.join("/");
        fs::create_dir_all(dir.path().join(&deep)).unwrap();
        fs::write(dir.path().join(&deep).join("f"), "f").unwrap();
        let got = walk(&Listings::new(reader(dir.path())));
        assert_eq!(got.len(), MAX_HELD_DEPTH + 7);
        assert_eq!(got.last().unwrap(), &format!("{deep}/f"));
    }

    #[test]
    fn an_unreadable_directory_is_one_error() {
        let dir = tree();
        let listings = Listings::new(reader(&dir.path().join("gone")));
        let listing = listings.take("", None);
        assert_eq!((listing.errors, listing.children.len()), (1, 0));
    }
}
