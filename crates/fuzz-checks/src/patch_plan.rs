//! Fuzzes the planner, `serverfs_patch::plan_update`, on hunks parsed from
//! the input: a file's bytes, a NUL byte, then the body of one
//! `*** Update File:` (the target wraps it in the patch frame, so most
//! inputs parse). Seeds in this format are easy to write by hand.
//!
//! Properties: nothing panics and planning is deterministic; the same
//! hunks with their `+` lines dropped and `-` lines turned into context
//! (the identity edit) match in exactly the same places, or fail with
//! exactly the same error, and give back the original bytes; a plan keeps
//! a BOM, is UTF-8, reports one hunk each with a line inside the file
//! (or one past it), and has the line count the hunks imply; a file that
//! is not UTF-8 is refused with UNSUPPORTED_TEXT_ENCODING and only then.

use serverfs_core::ErrorCode;
use serverfs_patch::{
    Hunk, HunkLine, MatchPass, Operation, PatchError, PatchLimits, Planned, parse, plan_update,
};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The target: checks every property above on `data`.
pub fn check(data: &[u8]) {
    let Some(split) = data.iter().position(|&b| b == 0) else { return };
    let (file, rest) = (&data[..split], &data[split + 1..]);
    let Ok(hunks) = std::str::from_utf8(rest) else { return };
    let text = format!("*** Begin Patch\n*** Update File: f\n{hunks}\n*** End Patch\n");
    let Ok(patch) = parse(&text, &PatchLimits::default()) else { return };
    let Some(Operation::Update { hunks, .. }) = patch.operations.first() else { return };

    let result = plan_update(file, hunks, "f");
    assert_eq!(plan_update(file, hunks, "f"), result, "not deterministic");

    // The planner retries a hunk it cannot find without its trailing blank
    // context lines (the blank line models leave before `*** End Patch`).
    // The identity edit turns `-` lines into context and drops `+` lines,
    // so that retry can apply to it and not to the original (or trim more):
    // the property holds for hunks whose trailing blank run is the same in
    // both (found by this target).
    let identity: Vec<Hunk> = hunks.iter().map(identity).collect();
    let same = plan_update(file, &identity, "f");
    // It has no `+` lines, so it is never re-indented nor refused for
    // their indentation: compare where and by which pass hunks matched, and
    // only when the original was not refused for its `+` lines.
    let reindent_refused =
        matches!(&result, Err(e) if e.code() == ErrorCode::PatchIndentationAmbiguous);
    if !reindent_refused
        && hunks.iter().zip(&identity).all(|(h, i)| trailing_blank(h) == trailing_blank(i))
    {
        let places =
            |r: &Result<Planned, PatchError>| -> Result<Vec<(MatchPass, usize)>, PatchError> {
                r.clone().map(|p| p.hunks.iter().map(|h| (h.pass, h.line)).collect())
            };
        assert_eq!(places(&same), places(&result), "the identity edit matched differently");
    }
    if let Ok(same) = &same {
        assert_eq!(same.bytes, file, "the identity edit changed the file");
    }

    let body = file.strip_prefix(BOM).unwrap_or(file);
    let utf8 = std::str::from_utf8(body);
    match result {
        Ok(planned) => {
            let old = utf8.expect("planned a non-UTF-8 file");
            // Kept; an added first line may itself start with U+FEFF.
            assert!(!file.starts_with(BOM) || planned.bytes.starts_with(BOM));
            // Only a BOM the file had is not content: a line that starts
            // with U+FEFF may become the first one (found by this target).
            let new_body = if file.starts_with(BOM) {
                planned.bytes.strip_prefix(BOM).unwrap_or(&planned.bytes)
            } else {
                &planned.bytes[..]
            };
            let new = std::str::from_utf8(new_body).expect("planned bytes are not UTF-8");
            assert_eq!(planned.hunks.len(), hunks.len());
            let old_count = line_count(old);
            for report in &planned.hunks {
                assert!(report.line >= 1 && report.line <= old_count + 1, "{report:?}");
            }
            let (removed, added) =
                hunks.iter().flat_map(|h| &h.lines).fold((0, 0), |(r, a), l| match l {
                    HunkLine::Remove(_) => (r + 1, a),
                    HunkLine::Add(_) => (r, a + 1),
                    HunkLine::Context(_) => (r, a),
                });
            // A file without a final newline keeps that state: when its new
            // last line is empty (added, or left by a deleted last line), it
            // has no newline and so is not counted as a line (found by this
            // target, twice).
            let expected = old_count - removed + added;
            let empty_last =
                !old.is_empty() && !old.ends_with('\n') && (new.is_empty() || new.ends_with('\n'));
            let counted = line_count(new);
            assert!(
                counted == expected || (empty_last && counted + 1 == expected),
                "{old:?} -> {new:?}: {counted} lines, {expected} expected"
            );
        }
        Err(e) => {
            assert!(!e.message().contains('\n'), "{e}");
            let encoding = e.code() == ErrorCode::UnsupportedTextEncoding;
            assert_eq!(encoding, utf8.is_err(), "{e}");
            assert!(
                encoding
                    || matches!(
                        e.code(),
                        ErrorCode::PatchContextNotFound
                            | ErrorCode::PatchContextAmbiguous
                            | ErrorCode::PatchIndentationAmbiguous
                    ),
                "{e}"
            );
        }
    }
}

/// The hunk with `+` lines dropped and `-` lines kept as context.
fn identity(hunk: &Hunk) -> Hunk {
    let lines = hunk
        .lines
        .iter()
        .filter_map(|l| match l {
            HunkLine::Context(t) | HunkLine::Remove(t) => Some(HunkLine::Context(t.clone())),
            HunkLine::Add(_) => None,
        })
        .collect();
    Hunk { lines, ..hunk.clone() }
}

/// How many empty context lines end the hunk (what the planner's retry
/// drops).
fn trailing_blank(hunk: &Hunk) -> usize {
    hunk.lines
        .iter()
        .rev()
        .take_while(|l| matches!(l, HunkLine::Context(t) if t.is_empty()))
        .count()
}

/// Lines as the planner counts them: one per `\n`, plus a last line
/// without a final newline.
fn line_count(text: &str) -> usize {
    text.matches('\n').count() + usize::from(!text.is_empty() && !text.ends_with('\n'))
}
