//! The hidden and deny rules: the single definition
//! used by the resolver, by listings and by the search walk.
//!
//! Guarantee: the built-in deny rules cannot be switched off; matching is
//! case-insensitive and applies to every component and to every prefix of a
//! path, so a rule `X/**` denies `X` itself and everything beneath it.
//! Configured rules are normalised like client paths before they are
//! compiled (`a//b` and `a/./b` are `a/b`; a trailing `/` means "this
//! directory and everything under it", like `/**`), and a rule that could
//! never match what it names (`..`, nothing left after normalising) is
//! refused, so no accepted rule silently denies nothing.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{ErrorCode, FsError};
use crate::path::RelPath;

/// The reserved sentinel that marks a disabled slot.
pub const SENTINEL: &str = ".serverfs-disabled";

/// Credential material that is never served, whatever the configuration.
pub const BUILTIN_DENY_GLOBS: &[&str] = &[
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".ssh/**",
    ".aws/**",
    ".gnupg/**",
    ".kube/**",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    SENTINEL,
];

/// Why a path is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A deny rule matches.
    Denied,
    /// A component starts with `.` and hidden paths are off.
    Hidden,
}

/// Compiled hidden/deny rules. Build once at start-up; matching allocates
/// nothing for name rules.
#[derive(Clone, Debug)]
pub struct Policy {
    allow_hidden: bool,
    /// Rules without `/`: matched against each component name.
    name_rules: GlobSet,
    /// Rules with `/`, anchored anywhere (`**/` prefix, `/**` suffix
    /// dropped): matched against each path prefix `a`, `a/b`, ….
    path_rules: GlobSet,
    /// The last segment of each path rule: a cheap name test that must
    /// pass before a path is run through `path_rules` (the walk asks for
    /// every entry).
    path_rule_tails: GlobSet,
}

impl Policy {
    /// Compiles the built-in rules plus `extra_deny_globs` (normalised as
    /// the module docs say).
    ///
    /// # Errors
    /// A malformed or empty extra glob, or one with a `..` component (the
    /// message names the glob, not a path).
    // A `String`: the message of the `ConfigError` the caller names the
    // setting for; no caller tells its causes apart.
    pub fn new(allow_hidden: bool, extra_deny_globs: &[String]) -> Result<Self, String> {
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        let mut tails = GlobSetBuilder::new();
        let rules = BUILTIN_DENY_GLOBS
            .iter()
            .copied()
            .chain(extra_deny_globs.iter().map(String::as_str))
            .map(|raw| normalise_deny_glob(raw).map(|glob| (raw, glob)))
            .collect::<Result<Vec<_>, _>>()?;
        for (raw, normal) in rules {
            let pattern = normal.as_str();
            let glob = |text: &str| {
                GlobBuilder::new(text)
                    .case_insensitive(true)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| format!("invalid deny glob '{raw}': {}", e.kind()))
            };
            match pattern.rsplit_once('/') {
                Some((head, tail)) => {
                    let anchored = if pattern.starts_with("**/") {
                        pattern.to_owned()
                    } else {
                        format!("**/{pattern}")
                    };
                    paths.add(glob(&anchored)?);
                    // The text after the last `/` is the rule's last
                    // component only if that `/` is not inside a class or
                    // an alternation (`a/[x/y]`, `x/{a,b/c}`): then the
                    // head does not compile alone. A wrong tail would hide
                    // the rule from the entries it names (found by
                    // fuzz/fuzz_targets/policy.rs), so such a rule is
                    // tried on every name instead.
                    let tail = match (glob(head), glob(tail)) {
                        (Ok(_), Ok(tail)) => tail,
                        _ => glob("*")?,
                    };
                    tails.add(tail);
                }
                None => {
                    names.add(glob(pattern)?);
                }
            }
        }
        let build = |b: GlobSetBuilder| b.build().map_err(|e| format!("deny globs: {e}"));
        Ok(Self {
            allow_hidden,
            name_rules: build(names)?,
            path_rules: build(paths)?,
            path_rule_tails: build(tails)?,
        })
    }

    /// Whether hidden paths are allowed.
    pub fn allow_hidden(&self) -> bool {
        self.allow_hidden
    }

    /// Checks every component and prefix of `path`; deny before hidden.
    pub fn check(&self, path: &RelPath) -> Option<Refusal> {
        let comps = path.components();
        let mut prefix = String::new();
        let mut hidden = false;
        for (i, name) in comps.iter().enumerate() {
            if i > 0 {
                prefix.push('/');
            }
            prefix.push_str(name);
            if self.denied(&prefix, name) {
                return Some(Refusal::Denied);
            }
            hidden |= is_hidden(name);
        }
        (hidden && !self.allow_hidden).then_some(Refusal::Hidden)
    }

    /// Like [`Policy::check`], as an error naming `alias:/path`.
    pub fn enforce(&self, alias: &str, path: &RelPath) -> Result<(), FsError> {
        match self.check(path) {
            None => Ok(()),
            Some(Refusal::Denied) => {
                let shown = path.as_relative();
                // `.git` is denied where it is work, not secret (serverfs-dev).
                let why = if shown.split('/').any(|c| c == ".git") {
                    "is inside .git, whose internals the file tools never touch (use git itself)"
                } else {
                    "matches a deny rule (credential files and the like) and is never served"
                };
                Err(FsError::new(ErrorCode::DeniedPath, format!("{alias}:/{shown} {why}.")))
            }
            Some(Refusal::Hidden) => Err(FsError::new(
                ErrorCode::HiddenPathNotAllowed,
                format!("{alias}:/{} is hidden; hidden paths are not served.", path.as_relative()),
            )),
        }
    }

    /// For walks and listings whose ancestors already passed: may the entry
    /// `name`, at `relative` (its full relative path, `/`-joined), be shown?
    pub fn entry_visible(&self, relative: &str, name: &str) -> bool {
        !(self.denied(relative, name) || (!self.allow_hidden && is_hidden(name)))
    }

    /// The deny rule, for the entry `name` at `relative` (which ends with
    /// it). The tail test keeps the path globs off almost every entry.
    fn denied(&self, relative: &str, name: &str) -> bool {
        self.name_rules.is_match(name)
            || (self.path_rule_tails.is_match(name) && self.path_rules.is_match(relative))
    }
}

/// A configured deny glob as the matcher takes it: components joined by
/// single `/`, no `.`, no leading `/` (rules match at any depth), and no
/// trailing `/` or `/**` (a rule on a directory covers what is beneath).
// A `String` error: part of `Policy::new`'s message.
fn normalise_deny_glob(raw: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in raw.trim().split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "deny glob '{raw}': '..' cannot appear in a path inside a workdir"
                ));
            }
            _ => parts.push(part),
        }
    }
    while parts.len() > 1 && parts.last() == Some(&"**") {
        parts.pop();
    }
    if parts.is_empty() {
        return Err(format!("deny glob '{raw}' names nothing"));
    }
    Ok(parts.join("/"))
}

/// Splits a comma-separated list of globs at the commas that are not inside
/// `{…}` (and not escaped with `\`), so `{a,b}.txt` stays one glob. Items
/// are trimmed; empty ones are dropped.
pub fn split_glob_list(value: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let (mut depth, mut escaped) = (0usize, false);
    for c in value.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items.into_iter().map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect()
}

/// A component starting with `.` (never `.`/`..`: those are gone after
/// normalisation).
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(p: &Policy, raw: &str) -> Option<Refusal> {
        p.check(&RelPath::parse(raw, "w").unwrap())
    }

    #[test]
    fn builtin_denies_case_insensitively() {
        let p = Policy::new(true, &[]).unwrap();
        for raw in [
            ".env",
            ".ENV",
            ".env.local",
            "prod.env",
            "Secret.env",
            "a/server.pem",
            "Server.KEY",
            "x.p12",
            "x.PFX",
            "id_rsa",
            "ID_RSA",
            "home/id_ed25519",
            "id_dsa",
            "id_ecdsa",
            ".ssh",
            "home/.ssh/known_hosts",
            ".aws/credentials",
            "u/.gnupg/x",
            ".kube/config",
            "u/.docker/config.json",
            ".netrc",
            ".git-credentials",
            ".pgpass",
            ".serverfs-disabled",
            "deep/.env/inside",
        ] {
            assert_eq!(check(&p, raw), Some(Refusal::Denied), "{raw}");
        }
    }

    #[test]
    fn near_misses_are_allowed() {
        let p = Policy::new(true, &[]).unwrap();
        for raw in [
            "environment",
            "env",
            "a.envy",
            "key.txt",
            "keys/x",
            ".docker/other.json",
            "id_rsa.pub.txt.x",
            "docker/config.json",
        ] {
            assert_eq!(check(&p, raw), None, "{raw}");
        }
    }

    #[test]
    fn hidden_after_deny() {
        let p = Policy::new(false, &[]).unwrap();
        assert_eq!(check(&p, ".git/config"), Some(Refusal::Hidden));
        assert_eq!(check(&p, "a/.cache"), Some(Refusal::Hidden));
        assert_eq!(check(&p, ".env"), Some(Refusal::Denied));
        assert_eq!(check(&p, ".ssh/id_rsa.pub"), Some(Refusal::Denied));
        assert_eq!(check(&p, "src/main.rs"), None);
        assert_eq!(check(&p, ""), None);
        // allowing hidden paths never lifts a deny rule
        let open = Policy::new(true, &[]).unwrap();
        assert_eq!(check(&open, ".git/config"), None);
        assert_eq!(check(&open, ".env"), Some(Refusal::Denied));
        assert!(open.entry_visible(".github", ".github"));
        assert!(!open.entry_visible(".ssh", ".ssh"));
    }

    #[test]
    fn extra_globs_add_rules() {
        let p =
            Policy::new(false, &["*.sqlite".into(), "secrets/**".into(), "conf/prod.yml".into()])
                .unwrap();
        assert_eq!(check(&p, "db/app.SQLITE"), Some(Refusal::Denied));
        assert_eq!(check(&p, "secrets"), Some(Refusal::Denied));
        assert_eq!(check(&p, "a/secrets/b"), Some(Refusal::Denied));
        assert_eq!(check(&p, "x/conf/prod.yml"), Some(Refusal::Denied));
        assert_eq!(check(&p, "conf/dev.yml"), None);
        assert!(Policy::new(false, &["[".into()]).is_err());
    }

    /// Each spelling denies what it names (they used to be accepted and
    /// deny nothing); spellings that can name nothing are refused.
    #[test]
    fn extra_globs_are_normalised_or_refused() {
        for (glob, denied, allowed) in [
            ("secrets/", &["secrets", "secrets/a.txt", "x/secrets/b/c"][..], &["secretsx"][..]),
            ("secrets/**/", &["secrets", "secrets/a.txt"], &["other/a.txt"]),
            ("/secrets", &["secrets/a.txt"], &["a.txt"]),
            ("prod.yml/", &["prod.yml", "conf/prod.yml"], &["prod.yaml"]),
            ("conf//prod.yml", &["conf/prod.yml", "x/conf/prod.yml"], &["prod.yml"]),
            ("conf/./prod.yml", &["conf/prod.yml"], &["conf/dev.yml"]),
            ("./conf/prod.yml", &["conf/prod.yml"], &["conf/dev.yml"]),
            ("{a,b}.txt", &["a.txt", "d/b.txt"], &["c.txt"]),
        ] {
            let p = Policy::new(false, &[glob.to_owned()]).unwrap();
            for path in denied {
                assert_eq!(check(&p, path), Some(Refusal::Denied), "{glob}: {path}");
            }
            for path in allowed {
                assert_eq!(check(&p, path), None, "{glob}: {path}");
            }
        }
        for bad in ["/", "./", "//", ".", "../x", "a/../b", "  "] {
            let err = Policy::new(false, &[bad.to_owned()]).unwrap_err();
            assert!(err.contains("deny glob"), "{bad}: {err}");
        }
    }

    /// A `/` inside a class or an alternation is not a component
    /// boundary; such rules deny what they name (the first was found by
    /// the policy fuzz target and used to deny nothing).
    #[test]
    fn a_slash_inside_a_class_or_alternation_still_denies() {
        for (glob, denied, allowed) in [
            ("[!..dd%FF**/id_r\u{7f}\u{7f}/*/;]", &["]", "dd/x"][..], &["d", "ab"][..]),
            ("a/[x/y]", &["a/x", "b/a/y"], &["a/z", "a"]),
            ("a/[!/]", &["a/b"], &["a/bc"]),
            ("x/{a,b/c}", &["x/a", "x/b/c", "q/x/b/c"], &["x/b", "x/c"]),
        ] {
            let p = Policy::new(true, &[glob.to_owned()]).unwrap();
            for path in denied {
                assert_eq!(check(&p, path), Some(Refusal::Denied), "{glob}: {path}");
                let name = path.rsplit('/').next().unwrap();
                assert!(!p.entry_visible(path, name), "{glob}: {path}");
            }
            for path in allowed {
                let Ok(rel) = RelPath::parse(path, "w") else { continue };
                assert_eq!(p.check(&rel), None, "{glob}: {path}");
            }
        }
    }

    #[test]
    fn glob_lists_split_outside_braces() {
        assert_eq!(
            split_glob_list("a, {b,c}.txt ,,d/{e,{f,g}}/**"),
            ["a", "{b,c}.txt", "d/{e,{f,g}}/**"]
        );
        assert_eq!(split_glob_list(r"x\,y,z"), [r"x\,y", "z"]);
        assert_eq!(split_glob_list(""), Vec::<String>::new());
    }

    #[test]
    fn entry_visible_matches_check() {
        let p = Policy::new(false, &["conf/prod.yml".into()]).unwrap();
        for (rel, name) in [
            ("a/.env", ".env"),
            ("a/.x", ".x"),
            ("u/.docker/config.json", "config.json"),
            ("conf/prod.yml", "prod.yml"),
            ("a/b.rs", "b.rs"),
        ] {
            let whole = check(&p, rel).is_none();
            assert_eq!(p.entry_visible(rel, name), whole, "{rel}");
        }
    }
}
