//! Resolution beneath a root handle: the only code in the workspace that
//! turns a normalised [`RelPath`] into a file descriptor. Crate-private;
//! [`Root`](crate::Root) is the API and maps every failure to an error code.
//!
//! Guarantees, whatever the [`SymlinkRule`] and [`ResolveMode`]:
//! - Every lookup starts at the root handle (never at a host path) and
//!   every step is relative to a handle this module opened, so nothing is
//!   canonicalised and re-opened by name.
//! - [`SymlinkRule::Never`]: no symlink is followed anywhere in the path
//!   (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`,
//!   or one `openat(O_NOFOLLOW)` per component), so a directory swapped for
//!   a symlink while a call runs yields `ELOOP`, never a foreign entry.
//! - [`SymlinkRule::FollowWithinRoot`]: links are followed by [`follow_walk`],
//!   hop by hop, and never by the kernel. Each link is read on its own
//!   `O_PATH` handle, its target composed *lexically* with the link's
//!   position in the root and the components still to resolve, and the new
//!   path must stay inside the root, be nameable as a client path and pass
//!   the [`Policy`] — then resolution starts again from the root handle.
//!   Letting the kernel follow (`openat2` without `RESOLVE_NO_SYMLINKS`)
//!   would keep it beneath the root but skip the policy, so
//!   `ln -s .env notes.txt` would serve the `.env`.
//!
//! `..` in a link target is applied lexically, like `..` in a client path:
//! a target `sub/other/../x` is `sub/x` even when `other` is
//! itself a link (POSIX would climb from wherever `other` leads). That can
//! name another entry than POSIX would, never one outside the root or one
//! the policy refuses: every path opened is one the policy accepted.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::path::RelPath;
use crate::policy::{Policy, Refusal};

/// Links followed in one resolution before giving up (Linux's own
/// `MAXSYMLINKS` is 40 as well).
pub(crate) const MAX_SYMLINK_HOPS: usize = 40;

/// How paths are resolved beneath a root handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolveMode {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: one call for a
    /// path without links (under [`SymlinkRule::FollowWithinRoot`], a path
    /// that meets a link continues with the hop-by-hop walk).
    Openat2,
    /// `openat(O_NOFOLLOW)` one component at a time (kernels before 5.6,
    /// or seccomp filters that refuse `openat2`).
    ComponentWalk,
}

impl ResolveMode {
    /// `Openat2` if the running kernel accepts it beneath `dir`.
    pub(crate) fn detect(dir: &OwnedFd) -> Self {
        match rustix::fs::openat2(dir, ".", path_flags(), Mode::empty(), beneath_flags()) {
            Ok(_) => Self::Openat2,
            // ENOSYS: old kernel; EPERM: seccomp; EINVAL/E2BIG: unknown bits.
            Err(_) => Self::ComponentWalk,
        }
    }
}

/// Whether symbolic links inside a root are followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SymlinkRule {
    /// No link is followed anywhere in a path, even one pointing inside
    /// the root: `SYMLINK_NOT_ALLOWED` (serverfs-mcp). A link
    /// can still be listed and inspected as itself.
    #[default]
    Never,
    /// Relative links are followed for reads if every hop stays inside the
    /// root and passes the policy (serverfs-dev). Absolute targets
    /// are refused, so `/proc` magic links cannot be reached. Writes never
    /// follow a link whatever the rule ([`Root::open_parent`]).
    ///
    /// [`Root::open_parent`]: crate::Root::open_parent
    FollowWithinRoot,
}

/// Whether the final component is followed when it is a link (only under
/// [`SymlinkRule::FollowWithinRoot`]; `Never` follows nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Last {
    /// Open what the link leads to (reads, listings).
    Follow,
    /// Open the entry itself (`lstat` semantics).
    NoFollow,
}

/// Why a resolution failed. [`crate::root`] turns each into an error code
/// in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The kernel's answer.
    Errno(Errno),
    /// A followed link leads above the root.
    LinkEscapes,
    /// A followed link has an absolute target.
    AbsoluteLink,
    /// A followed link's target cannot be named as a client path (not
    /// UTF-8, a backslash, a component too long).
    UnnameableLink,
    /// A followed link leads to a path the policy refuses.
    LinkRefused(Refusal),
    /// More than [`MAX_SYMLINK_HOPS`] links.
    TooManyLinks,
}

impl From<Errno> for Failure {
    fn from(e: Errno) -> Self {
        Self::Errno(e)
    }
}

/// What one resolution works with: the root handle and its rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Beneath<'a> {
    pub(crate) root: &'a OwnedFd,
    pub(crate) policy: &'a Policy,
    pub(crate) mode: ResolveMode,
    pub(crate) symlinks: SymlinkRule,
}

impl Beneath<'_> {
    /// Opens `path` with `flags` (which must include `O_NOFOLLOW` and
    /// `O_CLOEXEC`) beneath the root, following links as the rule says and
    /// the final one only when `last` is [`Last::Follow`].
    pub(crate) fn open(
        &self,
        path: &RelPath,
        flags: OFlags,
        last: Last,
    ) -> Result<OwnedFd, Failure> {
        if path.is_root() {
            return Ok(rustix::fs::openat(self.root, ".", flags, Mode::empty())?);
        }
        match (self.symlinks, self.mode) {
            (SymlinkRule::Never, ResolveMode::Openat2) => {
                Ok(openat2_beneath(self.root, path, flags)?)
            }
            (SymlinkRule::Never, ResolveMode::ComponentWalk) => {
                Ok(walk_beneath(self.root, path, flags)?)
            }
            (SymlinkRule::FollowWithinRoot, ResolveMode::Openat2) => {
                // Most paths hold no link: one kernel call. One that meets a
                // link takes the hop-by-hop walk: ELOOP, ENOTDIR (a final
                // link opened `O_DIRECTORY | O_NOFOLLOW`), or an `O_PATH`
                // handle on a final link that is to be followed.
                match openat2_beneath(self.root, path, flags) {
                    Err(Errno::LOOP | Errno::NOTDIR) => {
                        follow_walk(self.root, self.policy, path, flags, last)
                    }
                    Ok(fd) if last == Last::Follow && flags.contains(OFlags::PATH) => {
                        if is_symlink(&fd)? {
                            follow_walk(self.root, self.policy, path, flags, last)
                        } else {
                            Ok(fd)
                        }
                    }
                    other => Ok(other?),
                }
            }
            (SymlinkRule::FollowWithinRoot, ResolveMode::ComponentWalk) => {
                follow_walk(self.root, self.policy, path, flags, last)
            }
        }
    }
}

/// `O_PATH | O_NOFOLLOW | O_CLOEXEC`: a handle on the entry itself.
pub(crate) fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn beneath_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

fn is_symlink(fd: &OwnedFd) -> Result<bool, Errno> {
    Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode) == FileType::Symlink)
}

fn openat2_beneath(root: &OwnedFd, path: &RelPath, flags: OFlags) -> Result<OwnedFd, Errno> {
    let joined = path.as_relative();
    // EAGAIN: a concurrent rename somewhere on the system; the kernel asks
    // for a retry. Bounded, as in cap-std.
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(root, &joined, flags, Mode::empty(), beneath_flags()) {
            Err(Errno::AGAIN) if attempts < 8 => attempts += 1,
            other => return other,
        }
    }
}

/// The fallback for [`SymlinkRule::Never`]: every intermediate component
/// is opened `O_PATH | O_NOFOLLOW` relative to the previous handle and must
/// be a directory; since a [`RelPath`] has no `..`, the walk cannot climb.
fn walk_beneath(root: &OwnedFd, path: &RelPath, flags: OFlags) -> Result<OwnedFd, Errno> {
    let (last, parents) = path.components().split_last().ok_or(Errno::INVAL)?;
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let base = current.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        let next = rustix::fs::openat(base, name.as_str(), path_flags(), Mode::empty())?;
        match FileType::from_raw_mode(rustix::fs::fstat(&next)?.st_mode) {
            FileType::Directory => current = Some(next),
            FileType::Symlink => return Err(Errno::LOOP),
            _ => return Err(Errno::NOTDIR),
        }
    }
    let base = current.as_ref().map_or(root.as_fd(), AsFd::as_fd);
    rustix::fs::openat(base, last.as_str(), flags, Mode::empty())
}

/// [`SymlinkRule::FollowWithinRoot`]: one component at a time from the
/// root handle, each opened `O_PATH | O_NOFOLLOW` and classified with
/// `fstat` on that handle. A directory is descended into; a link is read
/// (`readlinkat` on the link's own handle, so it is the link that was
/// classified), its target composed with the link's position and the rest
/// of the path ([`compose`]), the new path checked against the policy, and
/// the walk starts again from the root handle. At most
/// [`MAX_SYMLINK_HOPS`] links, so loops end.
///
/// The final entry, once it is not a link to follow, is the classified
/// handle itself (`O_PATH`), or a directory re-opened through it (`.`), or
/// else opened with `flags` by name beneath its parent's handle, where a
/// link swapped in at that instant meets `O_NOFOLLOW`, never its target.
fn follow_walk(
    root: &OwnedFd,
    policy: &Policy,
    path: &RelPath,
    flags: OFlags,
    last: Last,
) -> Result<OwnedFd, Failure> {
    // `todo` holds the components still to resolve, the next one last;
    // `done` is the position in the root of `dir` (the root when `None`).
    let mut todo: Vec<String> = path.components().iter().rev().cloned().collect();
    let mut done: Vec<String> = Vec::new();
    let mut dir: Option<OwnedFd> = None;
    let mut hops = 0;
    loop {
        let Some(name) = todo.pop() else {
            // A link led to the root itself (`.`, `a/..`).
            return Ok(rustix::fs::openat(root, ".", flags, Mode::empty())?);
        };
        let base = dir.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        let is_last = todo.is_empty();
        if is_last && last == Last::NoFollow {
            return Ok(rustix::fs::openat(base, name.as_str(), flags, Mode::empty())?);
        }
        let handle = rustix::fs::openat(base, name.as_str(), path_flags(), Mode::empty())?;
        match FileType::from_raw_mode(rustix::fs::fstat(&handle)?.st_mode) {
            FileType::Symlink => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(Failure::TooManyLinks);
                }
                // An empty path reads the link the O_PATH handle is on
                // (Linux ≥ 2.6.39), not whatever the name holds by now.
                let target = rustix::fs::readlinkat(&handle, "", Vec::new())?;
                let next = compose(&done, target.as_bytes(), &todo)?;
                if let Some(refusal) = policy.check(&next) {
                    return Err(Failure::LinkRefused(refusal));
                }
                todo = next.components().iter().rev().cloned().collect();
                done.clear();
                dir = None;
            }
            FileType::Directory if !is_last => {
                done.push(name);
                dir = Some(handle);
            }
            _ if !is_last => return Err(Errno::NOTDIR.into()),
            _ if flags == path_flags() => return Ok(handle),
            FileType::Directory => {
                return Ok(rustix::fs::openat(&handle, ".", flags, Mode::empty())?);
            }
            _ => return Ok(rustix::fs::openat(base, name.as_str(), flags, Mode::empty())?),
        }
    }
}

/// The path a link leads to: `target` read relative to `dir` (the link's
/// directory, as components from the root), followed by `rest` (still to
/// resolve, next one last), normalised lexically.
///
/// # Errors
/// [`Failure::AbsoluteLink`], [`Failure::LinkEscapes`] (a `..` above the
/// root), [`Failure::UnnameableLink`]; `ENOENT` for an empty target, as
/// the kernel answers.
fn compose(dir: &[String], target: &[u8], rest: &[String]) -> Result<RelPath, Failure> {
    let target = std::str::from_utf8(target).map_err(|_| Failure::UnnameableLink)?;
    if target.is_empty() {
        return Err(Errno::NOENT.into());
    }
    if target.starts_with('/') {
        return Err(Failure::AbsoluteLink);
    }
    let mut parts: Vec<String> = dir.to_vec();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or(Failure::LinkEscapes)?;
            }
            name => parts.push(name.to_owned()),
        }
    }
    parts.extend(rest.iter().rev().cloned());
    RelPath::from_components(parts).ok_or(Failure::UnnameableLink)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    fn composed(dir: &[&str], target: &str, rest: &[&str]) -> Result<String, Failure> {
        let rest: Vec<String> = strings(rest).into_iter().rev().collect();
        compose(&strings(dir), target.as_bytes(), &rest).map(|p| p.as_relative())
    }

    #[test]
    fn targets_are_relative_to_the_links_directory() {
        assert_eq!(composed(&["a"], "b", &["c", "d"]).unwrap(), "a/b/c/d");
        assert_eq!(composed(&["a", "b"], "../x", &[]).unwrap(), "a/x");
        assert_eq!(composed(&["a"], "./x//y/", &["z"]).unwrap(), "a/x/y/z");
        assert_eq!(composed(&["a"], "..", &[]).unwrap(), "");
        assert_eq!(composed(&[], ".", &["x"]).unwrap(), "x");
    }

    #[test]
    fn targets_that_leave_or_cannot_be_named_are_refused() {
        assert_eq!(composed(&["a"], "../../x", &[]), Err(Failure::LinkEscapes));
        assert_eq!(composed(&[], "..", &["x"]), Err(Failure::LinkEscapes));
        assert_eq!(composed(&["a"], "/etc/passwd", &[]), Err(Failure::AbsoluteLink));
        assert_eq!(composed(&["a"], "x\\y", &[]), Err(Failure::UnnameableLink));
        assert_eq!(composed(&["a"], "", &[]), Err(Failure::Errno(Errno::NOENT)));
        let bad = compose(&[], b"\xff", &[]);
        assert_eq!(bad.map(|p| p.as_relative()), Err(Failure::UnnameableLink));
    }
}
