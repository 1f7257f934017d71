//! Every mount of a new mount namespace made read-only, each one found by
//! its mount id, never taken on trust from its path.
//!
//! A path read from `/proc/self/mountinfo` may lead elsewhere by the time
//! it is used: a command renames a directory above a mount (which it may,
//! below the root), and a remount by that path misses the mount, which then
//! stays writable in the view. `mount_setattr(2)` with `AT_RECURSIVE` would
//! make the whole tree read-only in one call, by mount, but neither rustix
//! nor nix wraps it and this crate forbids unsafe code. So, with the
//! calls rustix has:
//!
//! - each mount is opened at its path (`O_PATH`), and used only when the
//!   descriptor is that mount's own root (`statx`: the mount id of its
//!   mountinfo line, `STATX_ATTR_MOUNT_ROOT`); it is then remounted through
//!   the descriptor (`/proc/self/fd/N`), never by the path again;
//! - a mount missed is looked for again in a fresh mountinfo, for a few
//!   rounds (a rename moves the path, not the mount);
//! - a mount still missed fails the view (the command is refused), unless
//!   no command can reach it either:
//!   - **covered**: other mounts sit on its root (as a container's
//!     `/dev/pts` on the host's), checked with descriptors, not paths: the
//!     mount found at its path lies above it in the mount tree, and `..`
//!     from that mount's root leads out of it;
//!   - **fixed**: the directory holding it is below no path commands may
//!     write. Nothing above it can then be renamed by a command (Landlock
//!     refuses renames but within the writable paths), so its path is where
//!     it is; and a supervisor reaches all that its commands reach (same
//!     user, and capabilities in its own user namespace), so what it cannot
//!     reach there (a directory it may not search; a mount over a directory
//!     above it) no command reaches.
//!
//! Mounts already read-only are left as they are (nothing to do, and a
//! command cannot make them writable).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, StatVfsMountFlags, StatxAttributes, StatxFlags};
use rustix::io::Errno;
use rustix::mount::MountFlags;

use crate::Error;

/// How many times the mounts are looked for (mountinfo read anew each
/// time) before one still missed fails the view. A rename loop makes a
/// path stale only now and then; the rounds are cheap (one read of
/// mountinfo, one `open` and `statx` per mount not yet read-only).
const ROUNDS: usize = 64;

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Mount {
    /// Its mount id (as `statx`'s `STATX_MNT_ID` gives it).
    id: u64,
    /// The mount it is mounted on (itself or unlisted for the root).
    parent: u64,
    /// Where it is mounted, as of the read.
    point: PathBuf,
    /// Whether the mount itself (not its file system) is read-only.
    read_only: bool,
}

/// Makes every mount of this namespace read-only (see the module's doc).
/// `movable`: the paths commands may write (canonical, as mountinfo shows
/// paths), below which a command can rename directories.
///
/// # Errors
/// A mount could not be made read-only: [`Error::Unreachable`] for one
/// that kept being missed, or the kernel's answer.
pub(crate) fn make_all_read_only(movable: &[PathBuf]) -> Result<(), Error> {
    let mut missed = PathBuf::new();
    for _ in 0..ROUNDS {
        let table = table()?;
        let mut left = None;
        for mount in table.iter().filter(|m| !m.read_only) {
            match reach(mount)? {
                Some(fd) => {
                    remount(&fd, true).map_err(|e| Error::os_at("read-only", &mount.point, e))?;
                }
                None if covered(mount, &table)? || fixed(mount, movable) => {}
                None => left = Some(mount.point.clone()),
            }
        }
        match left {
            None => return Ok(()),
            Some(point) => missed = point,
        }
    }
    Err(Error::Unreachable(missed))
}

/// The mount's root, opened at its path, if that is where the path leads.
fn reach(mount: &Mount) -> Result<Option<OwnedFd>, Error> {
    let Ok(fd) = open_path(&mount.point) else { return Ok(None) };
    let (id, root) = mount_of(&fd)?;
    Ok((id == mount.id && root).then_some(fd))
}

/// Whether other mounts sit on `mount`'s root, so that no path reaches it:
/// the mount its path leads to is a root lying above `mount` in the tree,
/// and climbing `..` from there passes `mount`'s root (every mount between
/// is stacked on the one below) instead of stopping within it.
fn covered(mount: &Mount, table: &[Mount]) -> Result<bool, Error> {
    let Ok(fd) = open_path(&mount.point) else { return Ok(false) };
    let (top, root) = mount_of(&fd)?;
    if !root || top == mount.id || !descends(top, mount.id, table) {
        return Ok(false);
    }
    let Ok(up) = rustix::fs::openat(&fd, "..", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
    else {
        return Ok(false);
    };
    let (below, _) = mount_of(&up)?;
    Ok(below != mount.id && !descends(below, mount.id, table))
}

/// Whether mount `id` lies (strictly) below mount `ancestor` in the tree.
fn descends(id: u64, ancestor: u64, table: &[Mount]) -> bool {
    let mut at = id;
    // At most one step per mount: a malformed table cannot loop.
    for _ in 0..table.len() {
        let Some(mount) = table.iter().find(|m| m.id == at) else { return false };
        if mount.parent == ancestor {
            return true;
        }
        if mount.parent == mount.id {
            return false;
        }
        at = mount.parent;
    }
    false
}

/// Whether no command can move anything above `mount`: the directory
/// holding it is below none of the `movable` paths.
fn fixed(mount: &Mount, movable: &[PathBuf]) -> bool {
    mount.point.parent().is_none_or(|dir| !movable.iter().any(|m| dir.starts_with(m)))
}

/// `path` itself (`O_PATH`, a last component that is a link not followed).
fn open_path(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

/// The mount `fd` is on, and whether `fd` is that mount's root.
fn mount_of(fd: impl AsFd) -> Result<(u64, bool), Error> {
    let st = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)
        .map_err(|e| Error::os("statx", e))?;
    // Both since Linux 5.8 (Landlock, which the sandbox needs, since 5.13).
    if !StatxFlags::from_bits_retain(st.stx_mask).contains(StatxFlags::MNT_ID)
        || !st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
    {
        return Err(Error::os("statx mount id", Errno::NOSYS));
    }
    Ok((st.stx_mnt_id, st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)))
}

/// `/proc/self/fd/N` for `fd`: the path the kernel resolves to exactly the
/// place `fd` was opened at, whatever was renamed since.
pub(crate) fn fd_path(fd: impl AsFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// Remounts the mount whose root `fd` is (a bind's own flags) read-only or
/// writable, keeping its `nosuid`, `nodev` and `noexec` (a user namespace
/// may not drop them) and its access-time mode (the kernel keeps it).
pub(crate) fn remount(fd: impl AsFd, read_only: bool) -> rustix::io::Result<()> {
    let now = rustix::fs::fstatvfs(&fd)?.f_flag;
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
    rustix::mount::mount_remount(fd_path(fd), flags, c"")
}

/// Every mount of this namespace.
///
/// # Errors
/// mountinfo cannot be read, or has a line this cannot parse (a mount
/// must never be missed for that).
fn table() -> Result<Vec<Mount>, Error> {
    let info = std::fs::read("/proc/self/mountinfo")
        .map_err(|error| Error::Io { step: "mountinfo", error })?;
    info.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            parse(line).ok_or_else(|| Error::Io {
                step: "mountinfo",
                error: std::io::Error::other(String::from_utf8_lossy(line).into_owned()),
            })
        })
        .collect()
}

/// A mountinfo line: `id parent major:minor root point options …`.
fn parse(line: &[u8]) -> Option<Mount> {
    let number = |field: &[u8]| std::str::from_utf8(field).ok()?.parse().ok();
    let mut fields = line.split(|&b| b == b' ');
    let id = number(fields.next()?)?;
    let parent = number(fields.next()?)?;
    let point = fields.nth(2)?;
    let options = fields.next()?;
    Some(Mount {
        id,
        parent,
        point: PathBuf::from(OsString::from_vec(unescape(point))),
        read_only: options.split(|&b| b == b',').any(|o| o == b"ro"),
    })
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
    use super::{Mount, descends, fixed, parse, unescape};
    use std::path::PathBuf;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/mnt/a\040b\011c\134d\012"), b"/mnt/a b\tc\\d\n");
        assert_eq!(unescape(br"/plain"), b"/plain");
        // Not an escape: left as it is.
        assert_eq!(unescape(br"/x\09y\0"), br"/x\09y\0");
    }

    fn mount(id: u64, parent: u64, point: &str) -> Mount {
        Mount { id, parent, point: point.into(), read_only: false }
    }

    #[test]
    fn mountinfo_lines_are_parsed() {
        let line = br"28 27 0:25 / /mnt/a\040b ro,nosuid,relatime shared:1 - tmpfs x ro,size=4k";
        let want = Mount { read_only: true, ..mount(28, 27, "/mnt/a b") };
        assert_eq!(parse(line), Some(want));
        let line = b"26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600";
        assert_eq!(parse(line), Some(mount(26, 24, "/dev/pts")));
        assert_eq!(parse(b"26 x 0:24 / /dev/pts rw"), None);
        assert_eq!(parse(b"26 24 0:24 /"), None);
    }

    #[test]
    fn the_tree_is_climbed_by_parent_ids() {
        let table = [mount(1, 1, "/"), mount(2, 1, "/dev"), mount(3, 2, "/dev/pts")];
        assert!(descends(3, 1, &table) && descends(3, 2, &table) && descends(2, 1, &table));
        assert!(!descends(1, 3, &table) && !descends(2, 3, &table) && !descends(9, 1, &table));
    }

    #[test]
    fn only_mounts_above_which_commands_rename_nothing_are_fixed() {
        let movable = [PathBuf::from("/home/u/proj"), PathBuf::from("/tmp")];
        assert!(fixed(&mount(1, 1, "/dev/pts"), &movable));
        assert!(fixed(&mount(1, 1, "/home/u/other"), &movable));
        // A mount at a movable path itself: what holds it is outside.
        assert!(fixed(&mount(1, 1, "/home/u/proj"), &movable));
        assert!(fixed(&mount(1, 1, "/"), &movable));
        assert!(!fixed(&mount(1, 1, "/home/u/proj/a/m"), &movable));
        assert!(!fixed(&mount(1, 1, "/tmp/m"), &movable));
        assert!(!fixed(&mount(1, 1, "/dev/pts"), &[PathBuf::from("/")]));
    }
}
