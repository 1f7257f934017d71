//! Validated configuration: limits and workdir definitions (SPEC §2.1,
//! §2.6 "Config").
//!
//! Guarantees: every invalid configuration is one error line that names the
//! setting or the slot (`slot 03: …`) and never a host path; no slot is
//! silently renamed or skipped. The result is plain data, parsed once at
//! start-up and passed down.

use std::path::Path;
use std::time::Duration;

use crate::policy::SENTINEL;
use crate::workdir_spec::WorkdirSpec;

/// Number of Docker slots, `01` … `16`.
pub const SLOT_COUNT: usize = 16;
/// Longest alias.
pub const MAX_ALIAS_LEN: usize = 32;

/// Per-call limits. Defaults are SPEC §2.1's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes one read may return (default 524288).
    pub max_read_bytes: u64,
    /// Lines one read may return (default 500).
    pub max_read_lines: u64,
    /// Default list page size (default 100).
    pub default_list_limit: u64,
    /// Largest list page (default 500).
    pub max_list_entries: u64,
    /// Default search result count (default 50).
    pub default_search_results: u64,
    /// Largest search result count (default 100).
    pub max_search_results: u64,
    /// Entries one find/search may visit (default 200000).
    pub max_walk_entries: u64,
    /// Wall-clock budget of one find/search (default 15 s).
    pub search_timeout: Duration,
    /// Larger files are not searched (default 50 MiB).
    pub search_max_file_bytes: u64,
}

/// `max_lines` of read_text_file when the client gives none.
pub const DEFAULT_READ_LINES: u64 = 200;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_read_bytes: 524_288,
            max_read_lines: 500,
            default_list_limit: 100,
            max_list_entries: 500,
            default_search_results: 50,
            max_search_results: 100,
            max_walk_entries: 200_000,
            search_timeout: Duration::from_secs(15),
            search_max_file_bytes: 52_428_800,
        }
    }
}

impl Limits {
    /// Every limit ≥ 1; a default above its maximum is an error.
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn validate(&self) -> Result<(), String> {
        let named = [
            ("SERVERFS_MAX_READ_BYTES", self.max_read_bytes),
            ("SERVERFS_MAX_READ_LINES", self.max_read_lines),
            ("SERVERFS_DEFAULT_LIST_LIMIT", self.default_list_limit),
            ("SERVERFS_MAX_LIST_ENTRIES", self.max_list_entries),
            ("SERVERFS_DEFAULT_SEARCH_RESULTS", self.default_search_results),
            ("SERVERFS_MAX_SEARCH_RESULTS", self.max_search_results),
            ("SERVERFS_MAX_WALK_ENTRIES", self.max_walk_entries),
            ("SERVERFS_SEARCH_TIMEOUT_SECONDS", self.search_timeout.as_secs()),
            ("SERVERFS_SEARCH_MAX_FILE_BYTES", self.search_max_file_bytes),
        ];
        if let Some((name, _)) = named.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if self.default_list_limit > self.max_list_entries {
            return Err(format!(
                "SERVERFS_DEFAULT_LIST_LIMIT ({}) is above SERVERFS_MAX_LIST_ENTRIES ({})",
                self.default_list_limit, self.max_list_entries
            ));
        }
        if self.default_search_results > self.max_search_results {
            return Err(format!(
                "SERVERFS_DEFAULT_SEARCH_RESULTS ({}) is above SERVERFS_MAX_SEARCH_RESULTS ({})",
                self.default_search_results, self.max_search_results
            ));
        }
        Ok(())
    }

    /// read_text_file's default `max_lines`, clamped to the maximum.
    pub fn default_read_lines(&self) -> u64 {
        DEFAULT_READ_LINES.min(self.max_read_lines)
    }
}

/// `^[A-Za-z][A-Za-z0-9_-]{0,31}$`.
///
/// # Errors
/// Why the alias is not valid.
pub fn validate_alias(alias: &str) -> Result<(), String> {
    let mut chars = alias.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && alias.len() <= MAX_ALIAS_LEN;
    if ok {
        Ok(())
    } else {
        let shown: String = alias.chars().filter(|c| !c.is_control()).take(40).collect();
        Err(format!(
            "alias '{shown}' is invalid: it must start with a letter and hold only letters, digits, '_' or '-', at most {MAX_ALIAS_LEN} characters"
        ))
    }
}

/// Reads the Docker slots `01`…`16` under `workdirs_dir`, with aliases and
/// descriptions from `env` (`WORKDIR_NN_ALIAS`, `WORKDIR_NN_DESCRIPTION`).
///
/// The sentinel decides each slot: empty alias + sentinel = disabled; alias
/// + no sentinel = enabled; the other two cases are errors.
///
/// # Errors
/// `slot NN: …`, never a host path.
pub fn slot_specs(
    workdirs_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<WorkdirSpec>, String> {
    if std::fs::symlink_metadata(workdirs_dir).is_err() {
        // Nothing Docker-like here: the operator most likely ran the binary
        // by hand and meant --workdir.
        return Err(
            "no workdir is configured: pass --workdir ALIAS=PATH (for example --workdir docs=/usr/share/doc), or mount the Docker slots 01…16 under SERVERFS_WORKDIRS_DIR".into(),
        );
    }
    let mut specs: Vec<(String, WorkdirSpec)> = Vec::new();
    for n in 1..=SLOT_COUNT {
        let slot = format!("{n:02}");
        let origin = format!("slot {slot}");
        let alias = env(&format!("WORKDIR_{slot}_ALIAS")).unwrap_or_default();
        let description = env(&format!("WORKDIR_{slot}_DESCRIPTION")).unwrap_or_default();
        let dir = workdirs_dir.join(&slot);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(format!("{origin}: the slot mount point is not a directory")),
            Err(_) => {
                return Err(format!(
                    "{origin}: the slot directory {slot} is missing from SERVERFS_WORKDIRS_DIR"
                ));
            }
        }
        let disabled = std::fs::symlink_metadata(dir.join(SENTINEL)).is_ok();
        match (alias.is_empty(), disabled) {
            (true, true) => {
                if !description.is_empty() {
                    return Err(format!(
                        "{origin}: WORKDIR_{slot}_DESCRIPTION is set but WORKDIR_{slot}_ALIAS is empty"
                    ));
                }
            }
            (false, true) => {
                return Err(format!(
                    "{origin}: WORKDIR_{slot}_ALIAS is set but no host directory is mounted (is WORKDIR_{slot}_PATH empty?), or the directory holds the reserved file {SENTINEL}"
                ));
            }
            (true, false) => {
                return Err(format!(
                    "{origin}: a host directory is mounted but WORKDIR_{slot}_ALIAS is empty; set an alias or unset WORKDIR_{slot}_PATH"
                ));
            }
            (false, false) => {
                validate_alias(&alias).map_err(|e| format!("{origin}: {e}"))?;
                if let Some((other, _)) = specs.iter().find(|(_, s)| s.alias == alias) {
                    return Err(format!("{origin}: alias '{alias}' is already used by {other}"));
                }
                let spec = WorkdirSpec {
                    alias,
                    description: (!description.is_empty()).then_some(description),
                    host_path: dir,
                    origin: origin.clone(),
                };
                specs.push((origin, spec));
            }
        }
    }
    let specs: Vec<WorkdirSpec> = specs.into_iter().map(|(_, s)| s).collect();
    if specs.is_empty() {
        return Err("no workdir is configured: set WORKDIR_01_ALIAS and WORKDIR_01_PATH (or pass --workdir ALIAS=PATH)".into());
    }
    Ok(specs)
}

/// Workdirs from `--workdir ALIAS=PATH` (split at the first `=`) and
/// `--workdir-description ALIAS=TEXT`.
///
/// # Errors
/// One line naming the alias.
pub fn arg_specs(workdirs: &[String], descriptions: &[String]) -> Result<Vec<WorkdirSpec>, String> {
    let mut specs: Vec<WorkdirSpec> = Vec::new();
    for arg in workdirs {
        let (alias, path) = arg.split_once('=').ok_or_else(|| {
            "--workdir takes ALIAS=PATH (for example projects=/srv/projects)".to_owned()
        })?;
        validate_alias(alias).map_err(|e| format!("--workdir: {e}"))?;
        if path.is_empty() {
            return Err(format!("--workdir '{alias}': the path is empty"));
        }
        if specs.iter().any(|s| s.alias == alias) {
            return Err(format!("--workdir '{alias}': alias is given twice"));
        }
        specs.push(WorkdirSpec {
            alias: alias.to_owned(),
            description: None,
            host_path: path.into(),
            // The operator typed this path, so errors may name it (slots
            // never do: their host path is not the operator's input).
            origin: format!("workdir '{alias}' ({path})"),
        });
    }
    for arg in descriptions {
        let (alias, text) = arg
            .split_once('=')
            .ok_or_else(|| "--workdir-description takes ALIAS=TEXT".to_owned())?;
        let spec = specs.iter_mut().find(|s| s.alias == alias).ok_or_else(|| {
            format!("--workdir-description '{alias}': no --workdir has that alias")
        })?;
        spec.description = (!text.is_empty()).then(|| text.to_owned());
    }
    if specs.is_empty() {
        return Err("no workdir is configured".into());
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn aliases() {
        for ok in [
            "projects",
            "logs",
            "app-logs",
            "bioinfo",
            "paper_db",
            "ProjectA",
            "a",
            &"a".repeat(32),
        ] {
            assert!(validate_alias(ok).is_ok(), "{ok}");
        }
        for bad in [
            "/foo",
            "../foo",
            "foo/bar",
            "foo bar",
            "123project",
            "",
            "_x",
            "-x",
            "é",
            &"a".repeat(33),
            "a.b",
        ] {
            assert!(validate_alias(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_validation() {
        assert!(Limits::default().validate().is_ok());
        let zero = Limits { max_walk_entries: 0, ..Limits::default() };
        assert!(zero.validate().unwrap_err().contains("SERVERFS_MAX_WALK_ENTRIES"));
        let inverted = Limits { default_list_limit: 600, ..Limits::default() };
        assert!(inverted.validate().unwrap_err().contains("SERVERFS_DEFAULT_LIST_LIMIT"));
        let inverted = Limits { default_search_results: 101, ..Limits::default() };
        assert!(inverted.validate().unwrap_err().contains("SERVERFS_DEFAULT_SEARCH_RESULTS"));
        let small = Limits { max_read_lines: 50, ..Limits::default() };
        assert_eq!(small.default_read_lines(), 50);
    }

    struct Slots {
        dir: tempfile::TempDir,
        env: HashMap<String, String>,
    }

    impl Slots {
        /// All 16 slots disabled, as Compose mounts `.empty`.
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            for n in 1..=SLOT_COUNT {
                let slot = dir.path().join(format!("{n:02}"));
                std::fs::create_dir(&slot).unwrap();
                std::fs::write(slot.join(SENTINEL), "").unwrap();
            }
            Self { dir, env: HashMap::new() }
        }
        fn enable(&mut self, n: usize, alias: &str) -> &mut Self {
            std::fs::remove_file(self.dir.path().join(format!("{n:02}")).join(SENTINEL)).unwrap();
            self.env.insert(format!("WORKDIR_{n:02}_ALIAS"), alias.into());
            self
        }
        fn set(&mut self, key: &str, value: &str) -> &mut Self {
            self.env.insert(key.into(), value.into());
            self
        }
        fn load(&self) -> Result<Vec<WorkdirSpec>, String> {
            let env = |k: &str| self.env.get(k).cloned();
            slot_specs(self.dir.path(), &env)
        }
    }

    #[test]
    fn sixteen_slots_in_order_with_descriptions() {
        let mut s = Slots::new();
        for n in 1..=SLOT_COUNT {
            s.enable(n, &format!("w{n}"));
        }
        s.set("WORKDIR_02_DESCRIPTION", "日志");
        let specs = s.load().unwrap();
        assert_eq!(specs.len(), 16);
        assert_eq!(specs[0].alias, "w1");
        assert_eq!(specs[15].alias, "w16");
        assert_eq!(specs[0].description, None);
        assert_eq!(specs[1].description.as_deref(), Some("日志"));
    }

    #[test]
    fn sentinel_cases() {
        let mut s = Slots::new();
        s.enable(1, "projects");
        assert_eq!(s.load().unwrap().len(), 1);

        let mut s = Slots::new();
        s.set("WORKDIR_03_ALIAS", "logs");
        let e = s.load().unwrap_err();
        assert!(e.starts_with("slot 03:") && e.contains("no host directory"), "{e}");

        let mut s = Slots::new();
        s.enable(1, "projects");
        std::fs::remove_file(s.dir.path().join("04").join(SENTINEL)).unwrap();
        let e = s.load().unwrap_err();
        assert!(e.starts_with("slot 04:") && e.contains("ALIAS is empty"), "{e}");
    }

    #[test]
    fn invalid_duplicate_missing_and_empty() {
        let mut s = Slots::new();
        s.enable(2, "9lives");
        assert!(s.load().unwrap_err().starts_with("slot 02: alias '9lives' is invalid"));

        let mut s = Slots::new();
        s.enable(1, "dup").enable(5, "dup");
        assert_eq!(s.load().unwrap_err(), "slot 05: alias 'dup' is already used by slot 01");

        let mut s = Slots::new();
        s.enable(1, "Dup").enable(2, "dup");
        assert!(s.load().is_ok(), "aliases are case-sensitive");

        let s = Slots::new();
        std::fs::remove_dir_all(s.dir.path().join("16")).unwrap();
        let e = s.load().unwrap_err();
        assert!(e.starts_with("slot 16:") && !e.contains(&*s.dir.path().to_string_lossy()), "{e}");

        assert!(Slots::new().load().unwrap_err().starts_with("no workdir"));

        let mut s = Slots::new();
        s.set("WORKDIR_07_DESCRIPTION", "orphan");
        assert!(s.load().unwrap_err().starts_with("slot 07:"));
    }

    #[test]
    fn workdir_args() {
        let specs = arg_specs(&["a=/x=y".into(), "b=/z".into()], &["b=Bee".into()]).unwrap();
        assert_eq!(specs[0].host_path, Path::new("/x=y"));
        assert_eq!(specs[1].description.as_deref(), Some("Bee"));
        assert!(arg_specs(&["a=/x".into(), "a=/y".into()], &[]).is_err());
        assert!(arg_specs(&["noequals".into()], &[]).is_err());
        assert!(arg_specs(&["1a=/x".into()], &[]).is_err());
        assert!(arg_specs(&["a=".into()], &[]).is_err());
        assert!(arg_specs(&["a=/x".into()], &["c=Cee".into()]).is_err());
    }
}
