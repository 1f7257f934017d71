//! Which directories serverfs-mcp serves, from its configuration:
//! the Docker slots `01`…`16` under `SERVERFS_WORKDIRS_DIR`
//! with `WORKDIR_NN_ALIAS`/`_DESCRIPTION`, or `--workdir ALIAS=PATH`.
//!
//! Guarantees: every invalid configuration is one error line that names the
//! setting or the slot (`slot 03: …`) and never a slot's host path (a
//! `--workdir` error may name the path the operator typed); no slot is
//! silently renamed or skipped, and a slot past the sixteenth is warned
//! about (it is not served). The result is plain data, parsed once at
//! start-up and passed down. `selfcheck` uses the same slot numbering.

use std::path::Path;

use serverfs_core::ConfigError;
use serverfs_core::config::tilde_hint;
use serverfs_core::policy::SENTINEL;

use crate::workdirs::WorkdirSpec;

/// Number of Docker slots, `01` … `16`.
pub(crate) const SLOT_COUNT: usize = 16;
/// Longest alias.
const MAX_ALIAS_LEN: usize = 32;

/// `^[A-Za-z][A-Za-z0-9_-]{0,31}$`.
///
/// # Errors
/// Why the alias is not valid.
// A `String`: the message of the slot's or the flag's `ConfigError`.
pub(crate) fn validate_alias(alias: &str) -> Result<(), String> {
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
pub(crate) fn slot_specs(
    workdirs_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<WorkdirSpec>, ConfigError> {
    if std::fs::symlink_metadata(workdirs_dir).is_err() {
        // Nothing Docker-like here: the operator most likely ran the binary
        // by hand and meant --workdir.
        return Err(ConfigError::named(
            "--workdir",
            "none is given: pass --workdir ALIAS=PATH (for example --workdir docs=/usr/share/doc), or mount the Docker slots 01…16 under SERVERFS_WORKDIRS_DIR",
        ));
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
            Ok(_) => {
                return Err(ConfigError::named(&origin, "the slot mount point is not a directory"));
            }
            Err(_) => {
                return Err(ConfigError::named(
                    &origin,
                    format!("the slot directory {slot} is missing from SERVERFS_WORKDIRS_DIR"),
                ));
            }
        }
        let disabled = std::fs::symlink_metadata(dir.join(SENTINEL)).is_ok();
        match (alias.is_empty(), disabled) {
            (true, true) => {
                if !description.is_empty() {
                    return Err(ConfigError::named(
                        &origin,
                        format!(
                            "WORKDIR_{slot}_DESCRIPTION is set but WORKDIR_{slot}_ALIAS is empty"
                        ),
                    ));
                }
            }
            (false, true) => {
                return Err(ConfigError::named(
                    &origin,
                    format!(
                        "WORKDIR_{slot}_ALIAS is set but no host directory is mounted (is WORKDIR_{slot}_PATH empty?), or the directory holds the reserved file {SENTINEL}"
                    ),
                ));
            }
            (true, false) => {
                return Err(ConfigError::named(
                    &origin,
                    format!(
                        "a host directory is mounted but WORKDIR_{slot}_ALIAS is empty; set an alias or unset WORKDIR_{slot}_PATH"
                    ),
                ));
            }
            (false, false) => {
                validate_alias(&alias).map_err(|e| ConfigError::named(&origin, e))?;
                if let Some((other, _)) = specs.iter().find(|(_, s)| s.alias == alias) {
                    return Err(ConfigError::named(
                        &origin,
                        format!("alias '{alias}' is already used by {other}"),
                    ));
                }
                let spec = WorkdirSpec {
                    alias,
                    description: (!description.is_empty()).then_some(description),
                    host_path: dir,
                    origin: origin.clone(),
                    relative: false,
                };
                specs.push((origin, spec));
            }
        }
    }
    for ignored in beyond_the_slots(workdirs_dir, env) {
        tracing::warn!(event = "config_warning", message = %ignored);
    }
    let specs: Vec<WorkdirSpec> = specs.into_iter().map(|(_, s)| s).collect();
    if specs.is_empty() {
        return Err(ConfigError::named(
            "WORKDIR_01_ALIAS",
            "no slot is enabled: set WORKDIR_01_ALIAS and WORKDIR_01_PATH (or pass --workdir ALIAS=PATH)",
        ));
    }
    Ok(specs)
}

/// What configures a slot past [`SLOT_COUNT`] (`WORKDIR_17_ALIAS`, a
/// directory `17` under `workdirs_dir`): it is not served, so each is said
/// rather than dropped silently.
fn beyond_the_slots(workdirs_dir: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut ignored = Vec::new();
    for n in SLOT_COUNT + 1..=99 {
        for key in ["ALIAS", "PATH", "DESCRIPTION"].map(|k| format!("WORKDIR_{n:02}_{k}")) {
            if env(&key).is_some_and(|v| !v.is_empty()) {
                ignored.push(format!(
                    "{key} is set but only slots 01…{SLOT_COUNT} exist: it is ignored \
                     (use a free slot, or run without Docker with --workdir ALIAS=PATH)"
                ));
            }
        }
    }
    let mut extra: Vec<String> = std::fs::read_dir(workdirs_dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.parse::<usize>().is_ok_and(|n| n > SLOT_COUNT) && name.len() == 2)
        .collect();
    extra.sort();
    for name in extra {
        ignored.push(format!(
            "SERVERFS_WORKDIRS_DIR holds {name}, but only slots 01…{SLOT_COUNT} exist: it is not served"
        ));
    }
    ignored
}

/// Workdirs from `--workdir ALIAS=PATH` (split at the first `=`) and
/// `--workdir-description ALIAS=TEXT`.
///
/// # Errors
/// One line naming the alias.
pub(crate) fn arg_specs(
    workdirs: &[String],
    descriptions: &[String],
) -> Result<Vec<WorkdirSpec>, ConfigError> {
    let mut specs: Vec<WorkdirSpec> = Vec::new();
    for arg in workdirs {
        let (alias, path) = arg.split_once('=').ok_or_else(|| {
            ConfigError::named("--workdir", "takes ALIAS=PATH (for example projects=/srv/projects)")
        })?;
        validate_alias(alias).map_err(|e| ConfigError::named("--workdir", e))?;
        if path.is_empty() {
            return Err(ConfigError::named(format!("--workdir '{alias}'"), "the path is empty"));
        }
        if specs.iter().any(|s| s.alias == alias) {
            return Err(ConfigError::named(format!("--workdir '{alias}'"), "alias is given twice"));
        }
        // Resolved once, so the root never depends on a later working
        // directory; `absolute` fails only on an empty path, refused above.
        let host_path = std::path::absolute(path).map_err(|_| {
            ConfigError::named(format!("--workdir '{alias}'"), "the path cannot be resolved")
        })?;
        // Said here, where the path as typed is known.
        let hint = tilde_hint(std::path::Path::new(path));
        if !hint.is_empty() && !host_path.exists() {
            let reason = format!("the directory does not exist{hint}");
            return Err(ConfigError::named(format!("--workdir '{alias}'"), reason));
        }
        specs.push(WorkdirSpec {
            alias: alias.to_owned(),
            description: None,
            host_path,
            // Named by alias only, like a slot: errors and logs never carry
            // a host path.
            origin: format!("--workdir '{alias}'"),
            relative: std::path::Path::new(path).is_relative(),
        });
    }
    for arg in descriptions {
        let (alias, text) = arg
            .split_once('=')
            .ok_or_else(|| ConfigError::named("--workdir-description", "takes ALIAS=TEXT"))?;
        let spec = specs.iter_mut().find(|s| s.alias == alias).ok_or_else(|| {
            ConfigError::named(
                format!("--workdir-description '{alias}'"),
                "no --workdir has that alias",
            )
        })?;
        spec.description = (!text.is_empty()).then(|| text.to_owned());
    }
    if specs.is_empty() {
        return Err(ConfigError::named("--workdir", "none is given"));
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_seventeenth_slot_is_said_not_dropped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("16")).unwrap();
        let env = |k: &str| (k == "WORKDIR_16_ALIAS").then(|| "ok".to_owned());
        assert!(beyond_the_slots(dir.path(), &env).is_empty());
        std::fs::create_dir(dir.path().join("17")).unwrap();
        let env = |k: &str| (k == "WORKDIR_17_ALIAS").then(|| "more".to_owned());
        let said = beyond_the_slots(dir.path(), &env);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("WORKDIR_17_ALIAS is set but only slots 01…16 exist"));
        assert!(said[1].contains("holds 17"), "{said:?}");
    }

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
        /// The slots, or the one line a slot error prints.
        fn load(&self) -> Result<Vec<WorkdirSpec>, String> {
            let env = |k: &str| self.env.get(k).cloned();
            slot_specs(self.dir.path(), &env).map_err(|e| e.to_string())
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

        assert!(
            Slots::new().load().unwrap_err().starts_with("WORKDIR_01_ALIAS: no slot is enabled")
        );

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
