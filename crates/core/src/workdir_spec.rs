//! [`WorkdirSpec`]: a named workdir as configuration describes it, before
//! its [`Root`](crate::Root) is opened.
//!
//! Plain data with no behaviour. It lives in the core only while the
//! configuration code that builds it (`config`) does; the registry that
//! opens it is `serverfs_readonly::Workdirs`, which re-exports it, so
//! importers use that path and are unaffected when the type moves there.

use std::path::PathBuf;

/// A workdir definition before its root is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkdirSpec {
    /// Validated alias.
    pub alias: String,
    /// Description, `None` when empty.
    pub description: Option<String>,
    /// Where the root is on this host. Never shown to clients.
    pub host_path: PathBuf,
    /// How the spec names itself in start-up errors (`slot 03`, `workdir
    /// 'docs'`): never the host path.
    pub origin: String,
}
