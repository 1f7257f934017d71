//! [`Workdirs`]: serverfs-mcp's named workdirs, a thin registry over core
//! [`Root`]s.
//!
//! Guarantees: every workdir is a [`Root`] opened with the one policy and
//! [`SymlinkRule::Never`] (serverfs-mcp never follows a link);
//! aliases are matched exactly and case-sensitively, and an unknown one is
//! `WORKDIR_NOT_FOUND`; paths are then the root's business, shown to
//! clients as `alias:/relative`. Start-up errors name the workdir by its
//! origin (`slot 03`), never by its host path.

use std::fmt;

use serverfs_core::{
    ConfigError, ErrorCode, FsError, Location, Policy, ResolveMode, Root, RootError, RootOptions,
    SymlinkRule,
};

/// A workdir as configuration describes it, before its root is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkdirSpec {
    /// Validated alias.
    pub alias: String,
    /// Description, `None` when empty.
    pub description: Option<String>,
    /// Where the root is on this host. Never shown to clients.
    pub host_path: std::path::PathBuf,
    /// How the spec names itself in start-up errors (`slot 03`,
    /// `--workdir 'docs'`): never a host path.
    pub origin: String,
    /// Given as a relative path: `host_path` was resolved against the
    /// working directory at start (logged once, by alias).
    pub relative: bool,
}

/// One configured workdir: its alias, description and root.
#[derive(Debug)]
pub struct Workdir {
    alias: String,
    description: Option<String>,
    root: Root,
}

impl Workdir {
    /// The alias clients use (also the root's display name).
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The optional description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The root every path of this workdir resolves beneath.
    pub fn root(&self) -> &Root {
        &self.root
    }
}

/// A workdir that could not be opened at start-up.
#[derive(Debug)]
pub struct WorkdirError {
    /// The spec's origin (`slot 03`, `workdir 'docs'`).
    pub origin: String,
    /// Why its root could not be opened.
    pub source: RootError,
}

/// `origin: reason`, one line, no host path unless the origin (an operator's
/// `--workdir` argument) carries it.
impl fmt::Display for WorkdirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.source)
    }
}

impl From<WorkdirError> for ConfigError {
    fn from(e: WorkdirError) -> Self {
        Self::named(e.origin, e.source.to_string())
    }
}

impl std::error::Error for WorkdirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// All configured workdirs, in configuration order.
#[derive(Debug)]
pub struct Workdirs {
    workdirs: Vec<Workdir>,
}

impl Workdirs {
    /// Opens every workdir's root under `policy`, never following links.
    ///
    /// # Errors
    /// The first workdir whose root cannot be opened (see [`RootError`]).
    pub fn open(specs: Vec<WorkdirSpec>, policy: Policy) -> Result<Self, WorkdirError> {
        let mut workdirs = Vec::with_capacity(specs.len());
        for spec in specs {
            let options =
                RootOptions::new(spec.alias.clone(), policy.clone()).symlinks(SymlinkRule::Never);
            let root = Root::open(&spec.host_path, options)
                .map_err(|source| WorkdirError { origin: spec.origin, source })?;
            workdirs.push(Workdir { alias: spec.alias, description: spec.description, root });
        }
        Ok(Self { workdirs })
    }

    /// Workdirs in configuration order.
    pub fn workdirs(&self) -> &[Workdir] {
        &self.workdirs
    }

    /// The resolve mode of the first root (all share one kernel); `Openat2`
    /// when there is none.
    pub fn mode(&self) -> ResolveMode {
        self.workdirs.first().map_or(ResolveMode::Openat2, |w| w.root.mode())
    }

    /// Whether files are re-opened in place through procfs (see
    /// [`Root::reopens_in_place`]).
    pub fn reopens_in_place(&self) -> bool {
        self.workdirs.first().is_some_and(|w| w.root.reopens_in_place())
    }

    /// Whether hidden paths are served (one policy for all workdirs).
    pub fn allow_hidden(&self) -> bool {
        self.workdirs.first().is_some_and(|w| w.root.policy().allow_hidden())
    }

    /// Looks up a workdir by exact, case-sensitive alias.
    ///
    /// # Errors
    /// `WORKDIR_NOT_FOUND`.
    pub fn workdir(&self, alias: &str) -> Result<&Workdir, FsError> {
        self.workdirs.iter().find(|w| w.alias == alias).ok_or_else(|| {
            let shown: String = alias.chars().filter(|c| !c.is_control()).take(64).collect();
            FsError::new(
                ErrorCode::WorkdirNotFound,
                format!("workdir '{shown}' is not configured; call list_workdirs to see the available workdirs."),
            )
        })
    }

    /// The workdir's root and the client path located in it (parsed,
    /// normalised, policy-checked). Does not touch the filesystem.
    ///
    /// # Errors
    /// `WORKDIR_NOT_FOUND`, then the root's [`Root::locate`] errors.
    pub fn locate(&self, alias: &str, raw_path: &str) -> Result<(&Root, Location<'_>), FsError> {
        let root = self.workdir(alias)?.root();
        Ok((root, root.locate(raw_path)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(alias: &str, dir: &std::path::Path) -> WorkdirSpec {
        WorkdirSpec {
            alias: alias.into(),
            description: None,
            host_path: dir.into(),
            origin: format!("workdir '{alias}'"),
            relative: false,
        }
    }

    #[test]
    fn aliases_are_exact_and_case_sensitive() {
        let dir = tempfile::tempdir().unwrap();
        let workdirs =
            Workdirs::open(vec![spec("w", dir.path())], Policy::new(false, &[]).unwrap()).unwrap();
        let (_, loc) = workdirs.locate("w", "a/../b").unwrap();
        assert_eq!(loc.to_string(), "w:/b");
        for alias in ["W", "nope", "", "w "] {
            let e = workdirs.locate(alias, "").unwrap_err();
            assert_eq!(e.code(), ErrorCode::WorkdirNotFound, "{alias:?}");
        }
        // The alias is checked before the path.
        let e = workdirs.locate("nope", "../x").unwrap_err();
        assert_eq!(e.code(), ErrorCode::WorkdirNotFound);
    }

    #[test]
    fn sentinel_in_a_workdir_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(serverfs_core::policy::SENTINEL), "").unwrap();
        let e = Workdirs::open(vec![spec("w", dir.path())], Policy::new(false, &[]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("workdir 'w':") && e.contains(".serverfs-disabled"), "{e}");
        assert!(!e.contains(&*dir.path().to_string_lossy()));
    }
}
