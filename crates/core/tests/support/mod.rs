//! The one constructor the core's integration tests open roots with.

use std::path::Path;

use serverfs_core::{Policy, ResolveMode, Root, RootOptions, SymlinkRule};

/// `dir` as a root named `a`, under the built-in policy (hidden paths
/// off), resolved in `mode` with the symlink rule `rule`.
pub(crate) fn root(dir: &Path, mode: ResolveMode, rule: SymlinkRule) -> Root {
    let options = RootOptions::new("a", Policy::new(false, &[]).unwrap());
    Root::open(dir, options.resolve_mode(mode).symlinks(rule)).unwrap()
}
