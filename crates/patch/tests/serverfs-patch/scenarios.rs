//! Runs every scenario under `tests/scenarios/<name>/` through `parse` and
//! `plan_update`, simulating the file operations on an in-memory tree.
//!
//! A scenario directory holds:
//! - `patch.txt`: the patch, as sent (bytes kept: `.gitattributes` there
//!   turns off line-ending conversion);
//! - `before/`: the files before (optional; `.keep` files are ignored);
//! - either `after/`, the exact expected files, or `error.txt`, whose first
//!   line is the expected code and whose other lines must each appear in
//!   the message;
//! - optionally `hunks.txt`: one `<path> <pass> <line>` per hunk, in order;
//! - optionally `limits.txt`: `max_patch_bytes N` / `max_operations N`;
//! - optionally `syntax.txt`: one `<path> <line> <error>` per syntax error
//!   the patch introduces (serverfs-syntax, as apply_patch reports them);
//!   without it, no patch that succeeds may introduce any: no scenario's
//!   result gains a false syntax warning.
//!
//! To add a case, add a directory. Every failure is listed, not just the
//! first.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serverfs_patch::{Operation, PatchLimits, add_file_bytes, parse, plan_update};
use serverfs_syntax::{Limits, Verdict, check_edit};

type Tree = BTreeMap<String, Vec<u8>>;

fn read_tree(root: &Path) -> Tree {
    fn walk(dir: &Path, prefix: &str, tree: &mut Tree) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().into_string().unwrap();
            let path = format!("{prefix}{name}");
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{path}/"), tree);
            } else if name != ".keep" {
                tree.insert(path, fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut tree = Tree::new();
    if root.is_dir() {
        walk(root, "", &mut tree);
    }
    tree
}

/// Applies the patch to `files`: the new tree and one report line per
/// hunk, or `(code, message)`. Existence checks stand in for the server's:
/// an added file or a move target must not exist (`ALREADY_EXISTS`), a file
/// to update or delete must (`PATH_NOT_FOUND`).
fn run(
    text: &str,
    limits: &PatchLimits,
    mut files: Tree,
) -> Result<(Tree, Vec<String>), (String, String)> {
    let fail =
        |e: serverfs_patch::PatchError| (e.code().as_str().to_owned(), e.message().to_owned());
    let missing = |p: &str| ("PATH_NOT_FOUND".to_owned(), p.to_owned());
    let patch = parse(text, limits).map_err(fail)?;
    let mut reports = Vec::new();
    for op in &patch.operations {
        match op {
            Operation::Add { path, lines, .. } => {
                if files.insert(path.clone(), add_file_bytes(lines)).is_some() {
                    return Err(("ALREADY_EXISTS".to_owned(), path.clone()));
                }
            }
            Operation::Delete { path, .. } => {
                files.remove(path).ok_or_else(|| missing(path))?;
            }
            Operation::Update { path, move_to, hunks, .. } => {
                let before = files.remove(path).ok_or_else(|| missing(path))?;
                let planned = plan_update(&before, hunks, path).map_err(fail)?;
                for hunk in &planned.hunks {
                    reports.push(format!("{path} {} {}", hunk.pass.as_str(), hunk.line));
                }
                let target = move_to.clone().unwrap_or_else(|| path.clone());
                if move_to.is_some() && files.contains_key(&target) {
                    return Err(("ALREADY_EXISTS".to_owned(), target));
                }
                files.insert(target, planned.bytes);
            }
        }
    }
    Ok((files, reports))
}

fn limits(dir: &Path) -> PatchLimits {
    let mut limits = PatchLimits::default();
    if let Ok(text) = fs::read_to_string(dir.join("limits.txt")) {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line.split_once(' ').expect("limits.txt: `key value`");
            let value = value.trim().parse().expect("limits.txt: a number");
            match key {
                "max_patch_bytes" => limits.max_patch_bytes = value,
                "max_operations" => limits.max_operations = value,
                _ => panic!("limits.txt: unknown key {key}"),
            }
        }
    }
    limits
}

/// The syntax errors the patch introduced (`<path> <line> <error>`), as
/// apply_patch would report them (serverfs-syntax's rule; a moved file
/// counts as new): a file the patch leaves clean, or broken only as it
/// was, gives none.
fn syntax_warnings(before: &Tree, after: &Tree) -> Vec<String> {
    let mut warnings = Vec::new();
    for (path, bytes) in after {
        let old = before.get(path).map(Vec::as_slice);
        if old == Some(bytes.as_slice()) {
            continue;
        }
        if let Verdict::Broken(_, errors) = check_edit(path, old, bytes, &Limits::default()) {
            warnings.extend(errors.iter().map(|e| format!("{path} {} {}", e.line, e.message)));
        }
    }
    warnings
}

fn show(tree: &Tree) -> String {
    tree.iter().map(|(p, b)| format!("  {p}: {:?}\n", String::from_utf8_lossy(b))).collect()
}

/// `None` when the scenario passes, else why not.
fn check(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("patch.txt")).expect("patch.txt");
    let outcome = run(&text, &limits(dir), read_tree(&dir.join("before")));
    let expected_error = fs::read_to_string(dir.join("error.txt")).ok();
    let expected_after = dir.join("after").is_dir().then(|| read_tree(&dir.join("after")));
    match (outcome, expected_error, expected_after) {
        (_, Some(_), Some(_)) | (_, None, None) => {
            Some("needs exactly one of after/ and error.txt".into())
        }
        (Err((code, message)), Some(expected), None) => {
            let mut wanted = expected.lines().filter(|l| !l.is_empty());
            let wanted_code = wanted.next().unwrap_or_default();
            if code != wanted_code {
                return Some(format!("code {code}, expected {wanted_code} (message: {message})"));
            }
            let missing: Vec<&str> = wanted.filter(|w| !message.contains(w)).collect();
            (!missing.is_empty()).then(|| format!("message {message:?} lacks {missing:?}"))
        }
        (Ok((tree, _)), Some(_), None) => {
            Some(format!("succeeded, expected an error; files:\n{}", show(&tree)))
        }
        (Err((code, message)), None, Some(_)) => Some(format!("failed: {code}: {message}")),
        (Ok((tree, reports)), None, Some(after)) => {
            if tree != after {
                return Some(format!("files:\n{}expected:\n{}", show(&tree), show(&after)));
            }
            if let Ok(wanted) = fs::read_to_string(dir.join("hunks.txt")) {
                let wanted: Vec<&str> = wanted.lines().filter(|l| !l.is_empty()).collect();
                if reports != wanted {
                    return Some(format!("hunk reports {reports:?}, expected {wanted:?}"));
                }
            }
            let warnings = syntax_warnings(&read_tree(&dir.join("before")), &tree);
            let wanted = fs::read_to_string(dir.join("syntax.txt")).unwrap_or_default();
            let wanted: Vec<&str> = wanted.lines().filter(|l| !l.is_empty()).collect();
            (warnings != wanted)
                .then(|| format!("syntax warnings {warnings:?}, expected {wanted:?}"))
        }
    }
}

#[test]
fn scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut dirs: Vec<_> =
        fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    // Guards against a runner that silently finds nothing.
    assert!(dirs.len() >= 25, "only {} scenarios under {}", dirs.len(), root.display());
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            check(dir).map(|why| format!("{name}: {why}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}
