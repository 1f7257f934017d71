//! The file system a sandboxed command sees: a mount namespace of its own
//! in which every mount is read-only but the paths it may write.
//!
//! Landlock governs creating, writing, renaming, linking, truncating and
//! removing files, not their metadata; a read-only mount refuses that too
//! (`EROFS`). So in a command's view:
//!
//! - **Every mount is read-only** (`/`, `/proc`, `/sys`, `/dev`, …), each
//!   found by its mount id, not by a path a command can move (see the
//!   read_only module): a mount that cannot be made read-only fails the
//!   view, and the command is refused, unless no command can reach it
//!   either. Then the root, `/tmp` and the `--command-writable` paths are
//!   bound back as they were, each from the object checked to be what it
//!   was at the server's start, with no path looked up between the check
//!   and the bind: `chmod`, `chown`, `utimensat`, extended attributes,
//!   ACLs and `FS_IOC_SETFLAGS` on anything else fail, whoever owns it.
//!   Mounts below a writable path are read-only unless writable themselves.
//! - **Terminals are the command's own**: a `/dev/pts` instance of its own
//!   (`newinstance`), `/dev/ptmx` bound to its `ptmx`. A command opens new
//!   terminals (`script`, Python's `pty`), but none it did not open: the
//!   server's, the user's (`/dev/pts/N`, where it could write on the
//!   user's screen) and other commands' are not there.
//! - **Other commands' `TMPDIR`s are gone**: the server keeps them in one
//!   directory (`serverfs-cmd-<pid>-<random>`), which the view covers with
//!   an empty read-only file system holding only the command's own
//!   `TMPDIR`; every other server's such directory of the same user is
//!   covered with an empty one.
//! - **The server's state directory is empty** (covered like another
//!   server's `TMPDIR`s): its local token, journals and records are not
//!   there to read.
//! - **`/dev/shm` is the command's own** (a fresh tmpfs): POSIX shared
//!   memory and semaphores of other commands are invisible, and the
//!   command's are gone when its last process ends. (Not when the root or
//!   a writable path lies below it: then the host's is bound back.)
//! - **Other processes are gone from `/proc`** when the server is root: a
//!   `/proc` of its own with `hidepid=ptraceable` (Linux 5.8+) shows only
//!   the processes the command may ptrace, which Landlock narrows to its
//!   own domain — not the server, its supervisors, other commands (their
//!   command lines) or the host's. Without root the kernel refuses a new
//!   `/proc` (it belongs to the host's pid namespace), and the host's is
//!   shown, read-only.
//!
//! The supervisor enters the view before it starts bash, and leaves its
//! working directory on the view's mounts (see [`View::enter_cwd`]), never
//! on the server's: a directory reached from one of the server's mounts
//! would lead, through `..`, to the server's writable file system. Later
//! mounts on the host do not reach the view (its propagation is private),
//! and nothing in it reaches the host. Commands cannot undo it: they have
//! no capabilities, the seccomp filter refuses every mount call, and
//! Landlock refuses mount changes to a sandboxed process.
//!
//! A root server's supervisor makes the namespace; any other enters a user
//! namespace of its own first, keeping its uid and gid (one-line maps; other
//! users' files show as `nobody`, and supplementary groups can no longer be
//! changed). Where the kernel refuses the namespaces (a container without
//! `CAP_SYS_ADMIN`, a distribution that restricts unprivileged user
//! namespaces), commands share the server's view, as they did before this
//! layer: Landlock still holds, metadata outside is not covered, and the
//! host's `/dev/pts` is theirs to open.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, StatVfsMountFlags, statvfs};
use rustix::io::Errno;
use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::Error;
use crate::protocol::TMPDIR_PARENT_PREFIX;
use crate::read_only;
use crate::sandbox::SandboxConfig;

/// The path bound back writable beside the root and `--command-writable`
/// (the one directory of the sandbox's always-writable list but `/dev/shm`
/// and `/dev/pts`, which the view makes anew; its devices are special
/// files, which a read-only mount does not stop).
const BOUND_BACK: &str = "/tmp";

/// A supervisor's own view, entered.
pub(crate) struct View {
    own_proc: bool,
    /// The project root, whose git repositories [`View::pin_git`] pins.
    root: PathBuf,
}

impl View {
    /// Enters a view for commands under `sandbox`: `Ok(None)` when the
    /// kernel refuses the namespaces (commands then share the server's).
    /// Call it while the process has one thread (a user namespace needs
    /// that).
    ///
    /// # Errors
    /// A step after the namespace was made failed (the view would be half
    /// built: no command must run in it).
    pub(crate) fn enter(sandbox: &SandboxConfig) -> Result<Option<Self>, Error> {
        let mut writable: Vec<PathBuf> = std::iter::once(sandbox.root.clone())
            .chain(sandbox.writable.iter().cloned())
            .chain(std::iter::once(PathBuf::from(BOUND_BACK)))
            .collect();
        // A fresh /dev/shm would hide a root or writable path below it:
        // then the host's is bound back instead (and shared, as before).
        let shm = Path::new("/dev/shm");
        let own_shm = !writable.iter().any(|p| p.starts_with(shm));
        if !own_shm {
            writable.push(shm.to_owned());
        }
        // Outer paths first: a bind of an outer path would cover an inner
        // one bound before it.
        writable.sort_by_key(|p| p.components().count());
        writable.dedup();
        // Read-only where it already was, before this view makes it so.
        let was_read_only: Vec<bool> = writable
            .iter()
            .map(|p| statvfs(p).is_ok_and(|s| s.f_flag.contains(StatVfsMountFlags::RDONLY)))
            .collect();
        let movable = movable(sandbox, &writable, shm)?;
        if !rustix::process::geteuid().is_root() && !own_user_namespace()? {
            return Ok(None);
        }
        match unshare(rustix::thread::UnshareFlags::NEWNS) {
            Ok(()) => {}
            Err(Errno::PERM | Errno::ACCESS | Errno::INVAL | Errno::NOSPC) => return Ok(None),
            Err(e) => return Err(Error::os("mount namespace", e)),
        }
        // Nothing done here reaches the server's namespace, and nothing
        // mounted there later reaches this one.
        let private = MountPropagationFlags::PRIVATE | MountPropagationFlags::REC;
        match rustix::mount::mount_change("/", private) {
            Ok(()) => {}
            // A user namespace without capabilities (a restricting policy).
            Err(Errno::PERM | Errno::ACCESS) => return Ok(None),
            Err(e) => return Err(Error::os("private propagation", e)),
        }
        read_only::make_all_read_only(&movable)?;
        for (path, read_only) in writable.iter().zip(was_read_only) {
            // The root and the --command-writable paths must lead where they
            // did at the server's start, before the bind and after it (so
            // that a rename meanwhile cannot move either end of it).
            // Not there and nothing recorded (/tmp in a minimal container):
            // nothing to bind back.
            let Some(pinned) = sandbox.open_pinned(path)? else { continue };
            bind_back(&pinned, read_only).map_err(|e| Error::os_at("bind", path, e))?;
            if sandbox.open_pinned(path)?.is_none() {
                return Err(Error::Moved(path.clone()));
            }
        }
        // Covered by the object checked (a rename of the path meanwhile
        // fails the check, and the view with it).
        for path in &sandbox.hidden {
            let pinned = sandbox.open_pinned(path)?.ok_or_else(|| Error::Moved(path.clone()))?;
            let target = format!("/proc/self/fd/{}", pinned.as_raw_fd());
            let flags =
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
            rustix::mount::mount("tmpfs", &target, "tmpfs", flags, c"mode=0500,size=4k")
                .map_err(|e| Error::os_at("cover", path, e))?;
        }
        // A /proc that shows only the processes the command may ptrace:
        // those of its own Landlock domain. The kernel lets only a holder of
        // CAP_SYS_ADMIN over the host's pid namespace (root) make one.
        let proc_flags =
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY;
        let own_proc = match rustix::mount::mount(
            "proc",
            "/proc",
            "proc",
            proc_flags,
            c"hidepid=ptraceable",
        ) {
            Ok(()) => true,
            Err(Errno::PERM | Errno::INVAL) => false,
            Err(e) => return Err(Error::os("/proc", e)),
        };
        let shm_flags = MountFlags::NOSUID | MountFlags::NODEV;
        if own_shm {
            match rustix::mount::mount("tmpfs", shm, "tmpfs", shm_flags, c"mode=1777") {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(Error::os("/dev/shm", e)),
            }
        }
        own_terminals()?;
        Ok(Some(Self { own_proc, root: sandbox.root.clone() }))
    }

    /// Whether other processes are hidden in the view's `/proc`.
    pub(crate) fn own_proc(&self) -> bool {
        self.own_proc
    }

    /// Covers the directory holding `tmpdir` with an empty read-only file
    /// system in which only `tmpdir` is (bound back): the other commands'
    /// `TMPDIR`s are invisible. Nothing is done when `tmpdir` is not in a
    /// server's `TMPDIR` directory.
    pub(crate) fn hide_other_tmpdirs(&self, tmpdir: &Path) -> Result<(), Error> {
        let (Some(parent), Some(name)) = (tmpdir.parent(), tmpdir.file_name()) else {
            return Ok(());
        };
        if !parent
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(TMPDIR_PARENT_PREFIX.as_bytes()))
        {
            return Ok(());
        }
        let fail = |step: &'static str, e: Errno| Error::os_at(step, tmpdir, e);
        let own = rustix::fs::open(
            tmpdir,
            rustix::fs::OFlags::PATH
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| fail("TMPDIR open", e))?;
        let empty = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        rustix::mount::mount("tmpfs", parent, "tmpfs", empty, c"mode=0700,size=64k")
            .map_err(|e| fail("TMPDIR cover", e))?;
        let place = parent.join(name);
        rustix::fs::mkdir(&place, rustix::fs::Mode::RWXU).map_err(|e| fail("TMPDIR mkdir", e))?;
        rustix::mount::mount_bind(format!("/proc/self/fd/{}", own.as_raw_fd()), &place)
            .map_err(|e| fail("TMPDIR bind", e))?;
        remount_at(parent, true).map_err(|e| fail("TMPDIR read-only", e))?;
        hide_other_servers_tmpdirs(parent)
    }

    /// Pins the git repositories in the root (see the repos module) so
    /// that a command can plant nothing the operator's git runs later:
    /// each git directory becomes a mount point of its own (a command can
    /// neither rename nor remove it, nor put another in its place), its
    /// `hooks` directory and its `config` (and `config.worktree`) are
    /// read-only. Everything else in it stays writable: objects, refs, the
    /// index, logs — an agent's add, commit, branch, stash, checkout,
    /// merge and rebase work. A missing `hooks` or `config` is created
    /// (empty) first, so that the command cannot create it.
    ///
    /// # Errors
    /// A mount step failed: the command must not run.
    pub(crate) fn pin_git(&self) -> Result<Vec<PathBuf>, Error> {
        let found = crate::repos::below(&self.root);
        for git_dir in &found {
            let fail = |step: &'static str, path: &Path, e: Errno| Error::os_at(step, path, e);
            rustix::mount::mount_bind(git_dir, git_dir)
                .map_err(|e| fail("git directory bind", git_dir, e))?;
            let hooks = git_dir.join("hooks");
            match rustix::fs::mkdir(&hooks, rustix::fs::Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(fail("git hooks mkdir", &hooks, e)),
            }
            let config = git_dir.join("config");
            if let Err(e) = std::fs::OpenOptions::new().append(true).create(true).open(&config) {
                return Err(Error::Io { step: "git config create", error: e });
            }
            // `hooks` and `config` were just made sure of: gone now (raced
            // away) fails the view; only `config.worktree` may be absent.
            for (path, optional) in
                [(hooks, false), (config, false), (git_dir.join("config.worktree"), true)]
            {
                match rustix::mount::mount_bind(&path, &path) {
                    Ok(()) => {}
                    Err(Errno::NOENT) if optional => continue,
                    Err(e) => return Err(fail("git bind", &path, e)),
                }
                remount_at(&path, true).map_err(|e| fail("git read-only", &path, e))?;
            }
        }
        Ok(found)
    }

    /// The git directories below the root now that were not in `pinned`
    /// (what [`View::pin_git`] found when the command started), relative to
    /// the root: repositories the command created (`git init`, `git clone`).
    pub(crate) fn created_since(&self, pinned: &[PathBuf]) -> Vec<PathBuf> {
        crate::repos::below(&self.root)
            .into_iter()
            .filter(|dir| !pinned.contains(dir))
            .filter_map(|dir| dir.strip_prefix(&self.root).ok().map(Path::to_path_buf))
            .collect()
    }

    /// Moves the working directory onto the view's mounts: the same
    /// directory, reached again by its path. A directory the server sent,
    /// or the one this process started in, may lie on the server's mounts
    /// (or under a mount of the view that a bind covers, read-only).
    ///
    /// # Errors
    /// The path no longer leads to the same directory (it was moved).
    pub(crate) fn enter_cwd(&self) -> Result<(), Errno> {
        let before = rustix::fs::stat(".")?;
        let path = std::fs::read_link("/proc/self/cwd").map_err(|_| Errno::NOENT)?;
        rustix::process::chdir(&path)?;
        let after = rustix::fs::stat(".")?;
        if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) {
            return Err(Errno::NOENT);
        }
        Ok(())
    }
}

/// Covers, beside `own` (this server's directory of `TMPDIR`s), every other
/// server's of this user in the same temporary directory with an empty
/// read-only file system: a command reads and plants nothing in another
/// server's commands' `TMPDIR`s either. (Other users' are theirs alone:
/// mode 0700. A server started after this view was built is not covered;
/// its directory's name is random.)
fn hide_other_servers_tmpdirs(own: &Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let Some(temp) = own.parent() else { return Ok(()) };
    let me = rustix::process::geteuid().as_raw();
    let entries = std::fs::read_dir(temp).map_err(|error| Error::Io { step: "TMPDIRs", error })?;
    let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    for entry in entries.flatten() {
        let path = entry.path();
        // `DirEntry::metadata` does not follow a symlink.
        let theirs = entry.file_name().as_bytes().starts_with(TMPDIR_PARENT_PREFIX.as_bytes())
            && path != own
            && entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !theirs {
            continue;
        }
        match rustix::mount::mount("tmpfs", &path, "tmpfs", flags, c"mode=0500,size=4k") {
            // Gone meanwhile (its server's last command ended): nothing to hide.
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(Error::os_at("TMPDIR cover", path, e)),
        }
    }
    Ok(())
}

/// rustix deprecates its safe `unshare` for `UnshareFlags::FILES` (a
/// descriptor table other threads' descriptors are missing from); this
/// crate forbids unsafe code, and the namespaces unshared here have no such
/// effect.
#[allow(deprecated)]
pub(crate) fn unshare(flags: rustix::thread::UnshareFlags) -> rustix::io::Result<()> {
    rustix::thread::unshare(flags)
}

/// Enters a user namespace in which this process keeps its uid and gid
/// and has the capabilities to build the view: `Ok(false)` when the kernel
/// refuses.
fn own_user_namespace() -> Result<bool, Error> {
    use rustix::process::{DumpableBehavior, getegid, geteuid, set_dumpable_behavior};
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    match unshare(rustix::thread::UnshareFlags::NEWUSER) {
        Ok(()) => {}
        Err(Errno::PERM | Errno::ACCESS | Errno::INVAL | Errno::NOSPC | Errno::USERS) => {
            return Ok(false);
        }
        Err(e) => return Err(Error::os("user namespace", e)),
    }
    // A non-dumpable process's /proc files belong to root, and the maps
    // are written there: dumpable for as long as that takes (no command
    // runs yet, and Landlock keeps others' from ptrace).
    set_dumpable_behavior(DumpableBehavior::Dumpable).map_err(|e| Error::os("dumpable", e))?;
    let written = std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")));
    set_dumpable_behavior(DumpableBehavior::NotDumpable).map_err(|e| Error::os("dumpable", e))?;
    written.map_err(|error| Error::Io { step: "user namespace maps", error })?;
    Ok(true)
}

/// Remounts the mount at `path` (see [`read_only::remount`]).
fn remount_at(path: &Path, read_only: bool) -> rustix::io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    read_only::remount(&fd, read_only)
}

/// Binds `pinned` (the root, a writable path: the object checked to be
/// what it was at the server's start) back onto itself, with the mounts
/// below it, read-only or writable: a copy of its tree made from the
/// descriptor and moved onto the place the descriptor was opened at, then
/// remounted through the copy's own descriptor. No path is looked up, so
/// no rename meanwhile can send either end of the bind elsewhere.
fn bind_back(pinned: &OwnedFd, read_only: bool) -> rustix::io::Result<()> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};
    let tree = open_tree(
        pinned,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )?;
    let here = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH;
    move_mount(&tree, "", pinned, "", here)?;
    read_only::remount(&tree, read_only)
}

/// A `/dev/pts` of the view's own (`devpts`, `newinstance`) with
/// `/dev/ptmx` bound to its `ptmx`: a command opens new terminals there
/// (`script`, Python's `pty`), and none of the host's, the server's or the
/// user's (`/dev/pts/N`), which it could write on. Nothing when there is
/// no `/dev/pts` (a minimal container: no terminal to reach either).
///
/// # Errors
/// The kernel refused the instance or the bind: the command must not run
/// with the host's terminals.
fn own_terminals() -> Result<(), Error> {
    let pts = Path::new("/dev/pts");
    let flags = MountFlags::NOSUID | MountFlags::NOEXEC;
    match rustix::mount::mount(
        "devpts",
        pts,
        "devpts",
        flags,
        c"newinstance,ptmxmode=0666,mode=620",
    ) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(Error::os_at("devpts", pts, e)),
    }
    // Opening /dev/ptmx finds the instance at the /dev/pts beside it
    // (Linux 4.7+); bound, it is that instance's ptmx whatever it is.
    match rustix::mount::mount_bind("/dev/pts/ptmx", "/dev/ptmx") {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(Error::os_at("ptmx", "/dev/ptmx", e)),
    }
}

/// The paths below which commands may rename directories (see the
/// read_only module): the writable ones, and `/dev/shm` (the host's bound
/// back, or covered), as mountinfo shows them (links resolved, from the
/// object [`SandboxConfig::open_pinned`] checked). A command's `TMPDIR`
/// is not among them: made by the server for it alone, no mount lies
/// below it, and its parent is not writable.
fn movable(
    sandbox: &SandboxConfig,
    writable: &[PathBuf],
    shm: &Path,
) -> Result<Vec<PathBuf>, Error> {
    let mut movable = Vec::with_capacity(writable.len() + 1);
    for path in writable.iter().map(PathBuf::as_path).chain(std::iter::once(shm)) {
        let Some(fd) = sandbox.open_pinned(path)? else { continue };
        let canonical = std::fs::read_link(read_only::fd_path(&fd))
            .map_err(|error| Error::Io { step: "writable path", error })?;
        movable.push(canonical);
    }
    Ok(movable)
}
