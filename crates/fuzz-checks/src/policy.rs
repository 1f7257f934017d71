//! Fuzzes the hidden/deny policy: `split_glob_list`, `Policy::new` on
//! arbitrary deny-glob lists, `Policy::check` and `Policy::entry_visible`.
//!
//! Properties: nothing panics; `split_glob_list` yields trimmed, non-empty
//! items and, without braces or backslashes, is a plain comma split; a
//! refused list names the glob; for an accepted list, `check` agrees with
//! a slow reference (a path is denied iff some prefix of it matches
//! `**/<normalised rule>` for a built-in or configured rule; else hidden
//! iff a component starts with `.` and hidden paths are off), so the
//! name-rule/path-rule split and the tail pre-filter lose nothing; the
//! built-in rules survive any configuration; and `entry_visible` agrees
//! with `check` for an entry whose parent passed (what listings and the
//! walk rely on).

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use globset::{GlobBuilder, GlobMatcher};
use serverfs_core::policy::{BUILTIN_DENY_GLOBS, Refusal, split_glob_list};
use serverfs_core::{Policy, RelPath};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    allow_hidden: bool,
    /// A `--deny-glob`/`SERVERFS_DENY_GLOBS` value: comma-separated.
    globs: &'a str,
    paths: Vec<&'a str>,
}

/// The documented meaning of a rule, written the slow, obvious way: the
/// components of the rule (no `""`/`.`, trailing `/**` dropped), anchored
/// at any depth.
fn reference(rule: &str) -> Option<GlobMatcher> {
    let mut parts: Vec<&str> =
        rule.trim().split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    while parts.len() > 1 && parts.last() == Some(&"**") {
        parts.pop();
    }
    let glob = format!("**/{}", parts.join("/"));
    GlobBuilder::new(&glob)
        .case_insensitive(true)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

fn reference_check(rules: &[GlobMatcher], allow_hidden: bool, path: &RelPath) -> Option<Refusal> {
    let comps = path.components();
    let denied = (1..=comps.len()).any(|n| {
        let prefix = comps[..n].join("/");
        rules.iter().any(|r| r.is_match(&prefix))
    });
    let hidden = comps.iter().any(|c| c.starts_with('.'));
    if denied {
        Some(Refusal::Denied)
    } else if hidden && !allow_hidden {
        Some(Refusal::Hidden)
    } else {
        None
    }
}

/// The target: checks every property above on the input libFuzzer's
/// `fuzz_target!` would decode from `data`.
pub fn check(data: &[u8]) {
    let Some(input) = crate::input::<Input<'_>>(data) else { return };
    let items = split_glob_list(input.globs);
    assert!(items.iter().all(|i| !i.is_empty() && i.trim() == i), "{items:?}");
    if !input.globs.contains(['{', '}', '\\']) {
        let plain: Vec<&str> =
            input.globs.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(items, plain, "{:?}", input.globs);
    }
    // Globset compile time grows with the rules; a handful says as much.
    let items: Vec<String> = items.into_iter().take(8).collect();
    let policy = match Policy::new(input.allow_hidden, &items) {
        Ok(p) => p,
        Err(message) => {
            assert!(message.contains("deny glob"), "{items:?}: {message}");
            return;
        }
    };
    // Compiling globs dominates the time per input: the built-in rules'
    // references are compiled once.
    static BUILTIN: OnceLock<Vec<GlobMatcher>> = OnceLock::new();
    let builtin = BUILTIN.get_or_init(|| {
        BUILTIN_DENY_GLOBS.iter().map(|r| reference(r).expect("built-in rule")).collect()
    });
    let rules: Vec<GlobMatcher> = builtin
        .iter()
        .cloned()
        .chain(items.iter().map(|r| {
            reference(r).unwrap_or_else(|| panic!("accepted rule {r:?} does not compile"))
        }))
        .collect();
    for raw in input.paths.iter().take(16).copied().chain(["a/.env", "x/.ssh/id_rsa", "id_rsa"]) {
        let Ok(path) = RelPath::parse(raw, "w") else { continue };
        let got = policy.check(&path);
        assert_eq!(got, reference_check(&rules, input.allow_hidden, &path), "{items:?} {raw:?}");
        if path.components().iter().any(|c| c.eq_ignore_ascii_case(".env")) {
            assert_eq!(got, Some(Refusal::Denied), "built-in rule lifted by {items:?}");
        }
        if let Some(name) = path.file_name() {
            let parent =
                RelPath::from_components(path.components()[..path.components().len() - 1].to_vec());
            if parent.is_some_and(|p| policy.check(&p).is_none()) {
                assert_eq!(
                    policy.entry_visible(&path.as_relative(), name),
                    got.is_none(),
                    "{items:?} {raw:?}"
                );
            }
        }
    }
}
