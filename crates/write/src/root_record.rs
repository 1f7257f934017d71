//! Where the root led when this state directory last served it, so that a
//! restart does not serve whatever the path names by then.
//!
//! A command may rename an ancestor of the root (where it can write one)
//! and leave a symbolic link to a directory of its choosing where the root
//! was. A running server is not fooled (it pins the root's identity at
//! start), but a restarted one — a stdio server restarts with every client
//! session — would open the link's target as its root, `/` included.
//!
//! Guarantee: [`check_root_record`] refuses a start whose root resolves
//! (every symbolic link followed) to another real path than when this state
//! directory last served the path as given. A directory made anew at the
//! same real path (a fresh clone) is the same root; a symbolic link in the
//! path that now leads elsewhere is not. The record lives in the state
//! directory, out of every command's reach: `root-records/<sha256 of the given
//! path>`, holding the real path.

use std::path::Path;

use serverfs_core::ConfigError;
use sha2::Digest;

/// The record's directory in the state directory.
const RECORDS: &str = "root-records";

/// Checks `root` (as given) against this state directory's record of it,
/// then records where it leads now. `setting` names the root's setting in
/// errors.
///
/// # Errors
/// The root leads elsewhere than recorded (with the record to remove if
/// that was the operator's doing), or the record cannot be read or written.
pub fn check_root_record(setting: &str, state_dir: &Path, root: &Path) -> Result<(), ConfigError> {
    use std::os::unix::ffi::OsStrExt;
    let real = root.canonicalize().map_err(|e| {
        ConfigError::new(
            setting,
            format!("cannot resolve it: {}", crate::state_dir::plain_reason(&e)),
        )
    })?;
    let digest = sha2::Sha256::digest(root.as_os_str().as_bytes());
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let dir = state_dir.join(RECORDS);
    let record = dir.join(&name);
    let failed = |e: std::io::Error| {
        ConfigError::named(
            "SERVERFS_STATE_DIR (--state-dir)",
            format!("cannot keep the root's record: {}", crate::state_dir::plain_reason(&e)),
        )
    };
    match std::fs::read(&record) {
        Ok(recorded) if recorded == real.as_os_str().as_bytes() => return Ok(()),
        Ok(recorded) => {
            return Err(ConfigError::new(
                setting,
                format!(
                    "{} now leads to {}, not to {} as when this state directory last served it: \
                     a directory above it was moved and a symbolic link left in its place, \
                     which a command can do; if you changed it yourself, remove {} and start again",
                    root.display(),
                    real.display(),
                    String::from_utf8_lossy(&recorded),
                    record.display(),
                ),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(failed(e)),
    }
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(failed)?;
    }
    // Written whole or not at all: a second server starting beside this
    // one writes the same bytes.
    let staged = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&staged, real.as_os_str().as_bytes())
        .and_then(|()| std::fs::rename(&staged, &record))
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_that_leads_elsewhere_through_a_link_is_refused_a_new_directory_is_not() {
        let t = tempfile::tempdir().unwrap();
        let (state, a, outside) = (t.path().join("state"), t.path().join("a"), t.path().join("o"));
        std::fs::create_dir_all(a.join("project")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let root = a.join("project");
        check_root_record("SERVERFS_ROOT", &state, &root).unwrap();
        check_root_record("SERVERFS_ROOT", &state, &root).unwrap();
        // A fresh directory at the same real path: the same root.
        std::fs::rename(&a, t.path().join("a.old")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        check_root_record("SERVERFS_ROOT", &state, &root).unwrap();
        // A link where the root was, to a directory of a command's choosing.
        std::fs::rename(&a, t.path().join("a.old2")).unwrap();
        std::fs::create_dir_all(&a).unwrap();
        std::os::unix::fs::symlink(&outside, &root).unwrap();
        let e = check_root_record("SERVERFS_ROOT", &state, &root).unwrap_err().to_string();
        assert!(e.contains("now leads to") && e.contains("remove"), "{e}");
        // Refused again: the record is not replaced by a refused start.
        assert!(check_root_record("SERVERFS_ROOT", &state, &root).is_err());
    }
}
