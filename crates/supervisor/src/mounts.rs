//! The file system a sandboxed command sees: a mount namespace of its own
//! in which every mount is read-only but the paths it may write.
//!
//! Landlock governs creating, writing, renaming, linking, truncating and
//! removing files, not their metadata; a read-only mount refuses that too
//! (`EROFS`). So in a command's view:
//!
//! - **Every mount is read-only** (`/`, `/proc`, `/sys`, `/dev`, …) but
//!   the root, `/tmp`, `/dev/pts` and the `--command-writable` paths, bound
//!   back as they were: `chmod`, `chown`, `utimensat`, extended attributes,
//!   ACLs and `FS_IOC_SETFLAGS` on anything else fail, whoever owns it.
//!   Mounts below a writable path are read-only unless writable themselves.
//! - **Other commands' `TMPDIR`s are gone**: the server keeps them in one
//!   directory (`serverfs-cmd-<pid>-<random>`), which the view covers with
//!   an empty read-only file system holding only the command's own
//!   `TMPDIR`; every other server's such directory of the same user is
//!   covered with an empty one.
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
//! layer: Landlock still holds, metadata outside is not covered.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{StatVfsMountFlags, statvfs};
use rustix::io::Errno;
use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::Error;
use crate::protocol::TMPDIR_PARENT_PREFIX;
use crate::sandbox::SandboxConfig;

/// Paths bound back writable beside the root and `--command-writable`
/// (the directories of the sandbox's always-writable list; its devices are
/// special files, which a read-only mount does not stop).
const BOUND_BACK: [&str; 2] = ["/tmp", "/dev/pts"];

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
            .chain(BOUND_BACK.iter().map(PathBuf::from))
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
        for mount_point in mount_points()? {
            match remount(&mount_point, true) {
                // Not reachable by path (so not by a command either).
                Ok(()) | Err(Errno::NOENT | Errno::ACCESS | Errno::NOTDIR | Errno::LOOP) => {}
                Err(e) => return Err(Error::os_at("read-only", mount_point, e)),
            }
        }
        for (path, read_only) in writable.iter().zip(was_read_only) {
            // The root and the --command-writable paths must lead where they
            // did at the server's start, before the bind and after it (so
            // that a rename meanwhile cannot move either end of it).
            let pinned = sandbox.identity(path).is_some();
            if pinned {
                sandbox.open_pinned(path)?;
            }
            match rustix::mount::mount_bind_recursive(path, path) {
                Ok(()) => {}
                // A writable path that is not there (/dev/pts in a
                // minimal container): nothing to bind back.
                Err(Errno::NOENT) if !pinned => continue,
                Err(e) => return Err(Error::os_at("bind", path, e)),
            }
            if pinned {
                sandbox.open_pinned(path)?;
            }
            remount(path, read_only).map_err(|e| Error::os_at("writable", path, e))?;
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
        remount(parent, true).map_err(|e| fail("TMPDIR read-only", e))?;
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
    pub(crate) fn pin_git(&self) -> Result<(), Error> {
        for git_dir in &crate::repos::below(&self.root) {
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
                remount(&path, true).map_err(|e| fail("git read-only", &path, e))?;
            }
        }
        Ok(())
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

/// Remounts the mount at `path` (a bind's own flags) read-only or
/// writable, keeping its `nosuid`, `nodev` and `noexec` (a user namespace
/// may not drop them) and its access-time mode (the kernel keeps it).
fn remount(path: &Path, read_only: bool) -> rustix::io::Result<()> {
    let now = statvfs(path)?.f_flag;
    let mut flags = MountFlags::BIND;
    for (st, ms) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
    ] {
        if now.contains(st) {
            flags |= ms;
        }
    }
    if read_only {
        flags |= MountFlags::RDONLY;
    }
    rustix::mount::mount_remount(path, flags, c"")
}

/// Every mount point in this namespace (`/proc/self/mountinfo`'s fifth
/// field, its `\ooo` escapes undone).
fn mount_points() -> Result<Vec<PathBuf>, Error> {
    let info = std::fs::read("/proc/self/mountinfo")
        .map_err(|error| Error::Io { step: "mountinfo", error })?;
    Ok(info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(|field| PathBuf::from(OsString::from_vec(unescape(field))))
        .collect())
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/mnt/a\040b\011c\134d\012"), b"/mnt/a b\tc\\d\n");
        assert_eq!(unescape(br"/plain"), b"/plain");
        // Not an escape: left as it is.
        assert_eq!(unescape(br"/x\09y\0"), br"/x\09y\0");
    }
}
