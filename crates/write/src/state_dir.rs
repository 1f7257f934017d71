//! Where the writer's journal lives: a state directory of the user, never
//! inside the root. Checked before it is created, so a refused
//! configuration leaves nothing behind in the project ([`Writer::open`]
//! checks again, by device and inode, on the directory it opens).
//! Errors name the setting (`SERVERFS_STATE_DIR (--state-dir)`).
//!
//! [`Writer::open`]: crate::Writer::open

use std::path::{Path, PathBuf};

/// `$XDG_STATE_HOME/<app>`, else `$HOME/.local/state/<app>` (relative
/// values are ignored, as the XDG spec says); `env` looks up environment
/// variables.
pub fn default_state_dir(app: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |key: &str| env(key).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))
        .map(|base| base.join(app))
}

/// Creates the state directory `dir` (mode 0700) if it is missing — after
/// checking that it is not inside `root`.
pub fn prepare_state_dir(root: &Path, dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let inside = "SERVERFS_STATE_DIR (--state-dir) is inside the project root; choose a directory outside it";
    let root = root.canonicalize().map_err(|e| format!("SERVERFS_ROOT (--root): {}", e.kind()))?;
    let existing = dir.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
    let existing = existing.canonicalize().map_err(|e| {
        format!("SERVERFS_STATE_DIR (--state-dir): cannot resolve it: {}", e.kind())
    })?;
    if existing.starts_with(&root) {
        return Err(inside.to_owned());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| {
        format!("SERVERFS_STATE_DIR (--state-dir): cannot create the state directory: {}", e.kind())
    })
}
