//! Where the writer's journal lives: a state directory of the user, out
//! of every command's reach. Checked before it is created, so a refused
//! configuration leaves nothing behind ([`Writer::open`] checks again, by
//! device and inode, that the directory it opens is not inside the root).
//! Errors name the setting (`SERVERFS_STATE_DIR (--state-dir)`) and never
//! a host path.
//!
//! Guarantees: [`prepare_state_dir`] refuses a directory below any of the
//! paths it is given (serverfs-dev gives the root, `/tmp`, `/dev/shm`, the
//! commands' `TMPDIR` parent, every `--command-writable` path and, when
//! set, every `--command-readable` path). "Below" is decided by device and
//! inode on every ancestor of the directory's nearest existing ancestor,
//! so a symbolic link or a bind mount of a refused path is refused too; and
//! a directory reached through a symbolic link that lies in one of those
//! paths is refused (a command could re-point it before the next start).
//!
//! [`Writer::open`]: crate::Writer::open

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serverfs_core::ConfigError;

/// `$XDG_STATE_HOME/<app>`, else `$HOME/.local/state/<app>` (relative
/// values are ignored, as the XDG spec says), with the variable it came
/// from; `env` looks up environment variables.
pub fn default_state_dir(
    app: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(PathBuf, &'static str)> {
    let absolute = |key: &str| env(key).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_STATE_HOME")
        .map(|base| (base.join(app), "XDG_STATE_HOME"))
        .or_else(|| absolute("HOME").map(|home| (home.join(".local/state").join(app), "HOME")))
}

/// A path commands may reach, and how an error names it (`"/tmp"`, `"the
/// project root"`).
#[derive(Clone, Debug)]
pub struct Reach {
    pub path: PathBuf,
    pub named: String,
}

impl Reach {
    pub fn new(path: impl Into<PathBuf>, named: impl Into<String>) -> Self {
        Self { path: path.into(), named: named.into() }
    }
}

/// Creates the directory `dir` (mode 0700, with missing parents) if it is
/// missing — after checking that it is below none of `reach`. `setting`
/// names where `dir` came from in the error (`SERVERFS_STATE_DIR
/// (--state-dir)`). A path of `reach` that does not exist is skipped.
pub fn prepare_state_dir(setting: &str, dir: &Path, reach: &[Reach]) -> Result<(), ConfigError> {
    use std::os::unix::fs::DirBuilderExt;
    let existing = dir.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
    let existing = existing.canonicalize().map_err(|e| {
        ConfigError::named(setting, format!("cannot resolve it: {}", plain_reason(&e)))
    })?;
    let below = below(&existing, reach).map_err(|e| {
        ConfigError::named(setting, format!("cannot resolve: {}", plain_reason(&e)))
    })?;
    if let Some(named) = below {
        return Err(ConfigError::named(
            setting,
            format!("it is below {named}, which commands can reach; choose a directory outside it"),
        ));
    }
    if let Some(named) = link_in_reach(dir, reach) {
        return Err(ConfigError::named(
            setting,
            format!(
                "it goes through a symbolic link in {named}, where a command could point it \
                 elsewhere; give the directory's real path"
            ),
        ));
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| {
        let reason = format!("cannot create the state directory: {}", plain_reason(&e));
        ConfigError::named(setting, reason)
    })
}

/// Why a path could not be used, in plain words (never the OS's text).
pub(crate) fn plain_reason(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist",
        std::io::ErrorKind::PermissionDenied => "permission denied",
        std::io::ErrorKind::NotADirectory => "a part of it is not a directory",
        std::io::ErrorKind::ReadOnlyFilesystem => "the file system is read-only",
        std::io::ErrorKind::StorageFull => "the disk is full",
        _ => "it is not accessible",
    }
}

/// The first of `reach` holding a symbolic link that `dir` (as given)
/// goes through: a command could re-point it, and the next start would
/// follow it.
fn link_in_reach<'r>(dir: &Path, reach: &'r [Reach]) -> Option<&'r str> {
    dir.ancestors()
        .filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
        .filter_map(|link| link.parent()?.canonicalize().ok())
        .find_map(|holder| below(&holder, reach).ok().flatten())
}

/// The first of `reach` that `program`'s directory is at or below (by
/// device and inode, every symbolic link resolved): where a command could
/// replace the program before the next start runs it.
///
/// # Errors
/// The program's directory cannot be resolved.
pub fn program_reached<'r>(program: &Path, reach: &'r [Reach]) -> std::io::Result<Option<&'r str>> {
    let dir = program.parent().unwrap_or(Path::new("/")).canonicalize()?;
    below(&dir, reach)
}

/// The first of `reach` that `dir` (canonical, existing) is at or below.
pub(crate) fn below<'r>(dir: &Path, reach: &'r [Reach]) -> std::io::Result<Option<&'r str>> {
    let ids: Vec<((u64, u64), &str)> = reach
        .iter()
        .filter_map(|r| std::fs::metadata(&r.path).ok().map(|m| ((m.dev(), m.ino()), &*r.named)))
        .collect();
    for ancestor in dir.ancestors() {
        let meta = std::fs::metadata(ancestor)?;
        if let Some((_, named)) = ids.iter().find(|(id, _)| *id == (meta.dev(), meta.ino())) {
            return Ok(Some(named));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Below a refused path, through a symbolic link to it, or at it:
    /// refused, naming it, creating nothing; beside it: created.
    #[test]
    fn a_state_dir_a_command_can_reach_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let reached = tmp.path().join("writable");
        std::fs::create_dir(&reached).unwrap();
        std::os::unix::fs::symlink(&reached, tmp.path().join("link")).unwrap();
        let reach = [Reach::new(&reached, "a --command-writable path")];
        for dir in ["writable/state/x", "link/state", "writable"] {
            let err = prepare_state_dir("S (--s)", &tmp.path().join(dir), &reach)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("S (--s): it is below a --command-writable path"), "{err}");
            assert!(!err.contains(&*tmp.path().to_string_lossy()), "{err}");
        }
        assert!(!reached.join("state").exists());
        prepare_state_dir("S", &tmp.path().join("state/deep"), &reach).unwrap();
        assert!(tmp.path().join("state/deep").is_dir());
        // A link that commands could re-point, though it leads outside
        // their reach today: refused; a link outside their reach: followed.
        let away = tmp.path().join("away");
        std::fs::create_dir(&away).unwrap();
        std::os::unix::fs::symlink(&away, reached.join("to-away")).unwrap();
        let err = prepare_state_dir("S (--s)", &reached.join("to-away/state"), &reach)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "S (--s): it goes through a symbolic link in a --command-writable path"
            ),
            "{err}"
        );
        assert!(!away.join("state").exists());
        std::os::unix::fs::symlink(&away, tmp.path().join("safe-link")).unwrap();
        prepare_state_dir("S", &tmp.path().join("safe-link/state"), &reach).unwrap();
        assert!(away.join("state").is_dir());
        // A missing path of `reach` is no reason to refuse.
        prepare_state_dir("S", &tmp.path().join("s2"), &[Reach::new("/no/such", "x")]).unwrap();
    }
}
