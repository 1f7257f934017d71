//! Where the writers of one root meet, whoever runs them: one directory
//! per user, `<base>/serverfs-roots.<uid>/`, in one machine-wide directory
//! (serverfs-dev: [`RENDEZVOUS_BASE`], `/var/tmp`). Found from the
//! effective uid alone — never from `HOME`, `XDG_STATE_HOME` or the state
//! directory — so a systemd service and a desktop server of one user meet
//! whatever their environments. Each root has its own directory in it
//! (see [`crate::shared`]).
//!
//! Guarantees:
//! - **A user's directory is that user's.** It is created with mode 0711
//!   (others may enter it to find a root's presence file by name, not list
//!   it) and used only while it is a real directory owned by the effective
//!   uid and writable by no one else; a directory another user created
//!   first under that name is refused, naming it, never used. Only its
//!   owner can create entries in it, so no other user plants a lock there.
//! - **Out of every command's reach.** [`prepare_rendezvous`] refuses a base
//!   below any path commands may write (or, when narrowed, read), and a
//!   base every user may write without the sticky bit (another user could
//!   rename a user's directory away).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serverfs_core::ConfigError;

use crate::state_dir::{Reach, below, plain_reason};

/// The machine-wide directory the servers of serverfs-dev meet in: every
/// user may create in it (sticky), commands may not, and it is not
/// emptied at boot under a running server.
pub const RENDEZVOUS_BASE: &str = "/var/tmp";

/// Prefix of each user's directory in the base; the uid follows.
pub(crate) const USER_DIR_PREFIX: &str = "serverfs-roots.";

/// Mode of a user's directory and of each root's directory in it.
pub(crate) const ENTER_ONLY: u32 = 0o711;

/// The effective uid: whose files this process creates.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `<base>/serverfs-roots.<uid>`.
pub(crate) fn user_dir(base: &Path, uid: u32) -> PathBuf {
    base.join(format!("{USER_DIR_PREFIX}{uid}"))
}

/// Checks `base` against `reach` (the paths commands may reach), then
/// creates or checks this user's directory in it; returns that directory.
/// Errors name the directory (a fixed machine path, no secret) and the fix.
pub fn prepare_rendezvous(base: &Path, reach: &[Reach]) -> Result<PathBuf, ConfigError> {
    let dir = user_dir(base, euid());
    let named = format!("the servers' rendezvous directory {}", dir.display());
    let unusable = |e: &std::io::Error| {
        ConfigError::named(
            &named,
            format!("{} cannot be used: {}", base.display(), plain_reason(e)),
        )
    };
    let meta = std::fs::metadata(base).map_err(|e| unusable(&e))?;
    let canonical = base.canonicalize().map_err(|e| unusable(&e))?;
    if let Some(reached) = below(&canonical, reach).map_err(|e| unusable(&e))? {
        return Err(ConfigError::named(
            &named,
            format!(
                "{} is below {reached}, which commands can reach; every server of a root meets \
                 there, so it must stay out of their reach: serve a directory that does not \
                 contain it, and do not make it command-writable",
                base.display()
            ),
        ));
    }
    if meta.mode() & 0o1002 == 0o002 {
        return Err(ConfigError::named(
            &named,
            format!(
                "{} is writable by every user without the sticky bit; restore its mode (1777)",
                base.display()
            ),
        ));
    }
    ensure_user_dir(&dir).map_err(|reason| ConfigError::named(&named, reason))?;
    Ok(dir)
}

/// Creates `dir` (this user's directory) if missing, then checks that it
/// is a real directory of this user and writable by no one else, and
/// gives it [`ENTER_ONLY`] (the umask may have narrowed it). The error is
/// the reason, with the fix.
pub(crate) fn ensure_user_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(ENTER_ONLY).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot be created: {}", plain_reason(&e))),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot be used: {}", plain_reason(&e)))?;
    if !meta.is_dir() {
        return Err("it is not a directory (a symbolic link?); remove it".to_owned());
    }
    if meta.uid() != euid() {
        return Err(format!(
            "it belongs to another user (uid {}), who could hold or replace this user's locks \
             there; remove it",
            meta.uid()
        ));
    }
    if meta.mode() & 0o7777 != ENTER_ONLY {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(ENTER_ONLY))
            .map_err(|e| format!("cannot be given mode 0711: {}", plain_reason(&e)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A base commands can reach is refused; a user's directory is
    /// created with mode 0711 whatever the umask did, and one that is a
    /// link or not this user's is refused, naming the fix.
    #[test]
    fn the_rendezvous_is_this_users_and_out_of_reach() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base");
        std::fs::create_dir(&base).unwrap();
        let err = prepare_rendezvous(&base, &[Reach::new(tmp.path(), "the project root")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("is below the project root, which commands can reach"), "{err}");
        assert!(!user_dir(&base, euid()).exists());

        let dir = prepare_rendezvous(&base, &[]).unwrap();
        assert_eq!(dir, user_dir(&base, euid()));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        prepare_rendezvous(&base, &[]).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, ENTER_ONLY);

        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = prepare_rendezvous(&base, &[]).unwrap_err().to_string();
        assert!(err.contains("without the sticky bit"), "{err}");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();

        std::fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(tmp.path(), &dir).unwrap();
        let err = prepare_rendezvous(&base, &[]).unwrap_err().to_string();
        assert!(err.contains("not a directory (a symbolic link?); remove it"), "{err}");
        std::fs::remove_file(&dir).unwrap();

        if euid() == 0 {
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            let err = prepare_rendezvous(&base, &[]).unwrap_err().to_string();
            assert!(err.contains("belongs to another user (uid 65534)"), "{err}");
        }
    }
}
