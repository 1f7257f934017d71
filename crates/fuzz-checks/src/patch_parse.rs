//! Fuzzes the apply_patch parser, `serverfs_patch::parse`.
//!
//! Properties: it never panics and is deterministic; an accepted patch
//! respects the operation limit, names each (non-empty, trimmed) path
//! once, has a hunk or a move in every update and a `-`/`+` line in every
//! hunk; it survives a round trip (rendered back to text with CRLF line
//! endings, it parses to the same operations); a patch without `\r`
//! parses the same with CRLF endings; a refusal is a one-line message,
//! and a PATCH_SYNTAX one names a line that exists (or the one after the
//! last).

use std::collections::HashSet;

use serverfs_core::ErrorCode;
use serverfs_patch::{HunkLine, Operation, Patch, PatchLimits, parse};

/// A small operation limit, so that PATCH_TOO_LARGE is reachable.
const LIMITS: PatchLimits = PatchLimits { max_patch_bytes: 1 << 20, max_operations: 8 };
const UNLIMITED: PatchLimits =
    PatchLimits { max_patch_bytes: usize::MAX, max_operations: usize::MAX };

/// The target: checks every property above on the input libFuzzer's
/// `fuzz_target!` would decode from `data`.
pub fn check(data: &[u8]) {
    let Some(text) = crate::input::<&str>(data) else { return };
    let result = parse(text, &LIMITS);
    assert_eq!(parse(text, &LIMITS), result, "not deterministic");
    match result {
        Ok(patch) => {
            check_accepted(&patch);
            let rendered = render(&patch);
            let again =
                parse(&rendered, &UNLIMITED).unwrap_or_else(|e| panic!("{rendered:?}: {e}"));
            assert_eq!(without_lines(&again), without_lines(&patch), "round trip of {rendered:?}");
            if !text.contains('\r') {
                let crlf = parse(&text.replace('\n', "\r\n"), &UNLIMITED);
                assert_eq!(crlf.map(|p| without_lines(&p)), Ok(without_lines(&patch)));
            }
        }
        Err(e) => {
            assert!(!e.message().is_empty() && !e.message().contains('\n'), "{e}");
            if e.code() == ErrorCode::PatchSyntax {
                let rest = e.message().strip_prefix("line ").expect("names a line");
                let number: usize = rest[..rest.find(':').unwrap()].parse().unwrap();
                assert!(number >= 1 && number <= text.split('\n').count() + 1, "{e}");
            }
        }
    }
}

fn check_accepted(patch: &Patch) {
    assert!(patch.operations.len() <= LIMITS.max_operations);
    let mut seen = HashSet::new();
    for op in &patch.operations {
        let mut paths = vec![op.path()];
        if let Operation::Update { move_to: Some(target), .. } = op {
            paths.push(target);
        }
        for path in paths {
            assert!(!path.is_empty() && path.trim() == path, "{path:?}");
            assert!(seen.insert(path.to_owned()), "{path:?} twice");
        }
        if let Operation::Update { move_to, hunks, .. } = op {
            assert!(move_to.is_some() || !hunks.is_empty());
            for hunk in hunks {
                assert!(hunk.lines.iter().any(|l| !matches!(l, HunkLine::Context(_))));
            }
        }
    }
}

/// The patch as text, every line ending in CRLF (so a line whose content
/// ends in `\r` survives the parser's stripping of one `\r`).
fn render(patch: &Patch) -> String {
    let mut out = String::from("*** Begin Patch\r\n");
    for op in &patch.operations {
        match op {
            Operation::Add { path, lines, .. } => {
                out += &format!("*** Add File: {path}\r\n");
                for line in lines {
                    out += &format!("+{line}\r\n");
                }
            }
            Operation::Delete { path, .. } => out += &format!("*** Delete File: {path}\r\n"),
            Operation::Update { path, move_to, hunks, .. } => {
                out += &format!("*** Update File: {path}\r\n");
                if let Some(target) = move_to {
                    out += &format!("*** Move to: {target}\r\n");
                }
                for hunk in hunks {
                    if hunk.contexts.is_empty() {
                        out += "@@\r\n";
                    }
                    for context in &hunk.contexts {
                        out += &format!("@@ {context}\r\n");
                    }
                    for line in &hunk.lines {
                        let (marker, text) = match line {
                            HunkLine::Context(t) => (' ', t),
                            HunkLine::Remove(t) => ('-', t),
                            HunkLine::Add(t) => ('+', t),
                        };
                        out += &format!("{marker}{text}\r\n");
                    }
                    if hunk.end_of_file {
                        out += "*** End of File\r\n";
                    }
                }
            }
        }
    }
    out + "*** End Patch\r\n"
}

/// The operations with every patch line number set to 0.
fn without_lines(patch: &Patch) -> Vec<Operation> {
    let mut ops = patch.operations.clone();
    for op in &mut ops {
        match op {
            Operation::Add { line, .. } | Operation::Delete { line, .. } => *line = 0,
            Operation::Update { line, hunks, .. } => {
                *line = 0;
                for hunk in hunks {
                    hunk.patch_line = 0;
                }
            }
        }
    }
    ops
}
