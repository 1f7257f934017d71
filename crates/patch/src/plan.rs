//! `plan_update`: one file's bytes and its hunks → the new bytes, plus
//! where and how each hunk matched. No I/O.
//!
//! The file model: an optional UTF-8 BOM, then UTF-8 text split into lines
//! at `\n`. Each line keeps its own ending (`\r\n`, `\n`, or nothing for a
//! last line without a final newline). The file's line-ending style is the
//! ending of its first line: CRLF if that line ends in `\r\n`, otherwise LF,
//! and LF for a file with no line ending at all. Inserted lines are
//! written in that style. Every original line that is kept, whether it is
//! outside the hunks or a hunk's context line, is written back with its
//! own bytes, even when a lenient pass matched it. The one exception is a
//! last line without a final newline that gets a line after it: it takes
//! the file's ending, because a line needs one to be followed by another.
//!
//! Placement of hunk *k*, searching only after the end of hunk *k−1*'s
//! match (the "cursor"):
//! 1. Each `@@ text` line is located in order, as a single line, uniquely
//!    under the first pass that finds it. The cursor moves past it.
//! 2. The old lines (context and `-`) are located as a block after the
//!    cursor, uniquely under the first pass that finds them. With
//!    `*** End of File`, the only candidate is the block that ends the file.
//! 3. A hunk with no old lines (add-only) is inserted right after its last
//!    `@@` line. With no `@@` text, or with `*** End of File`, it is
//!    appended at the end of the file.
//!
//! Cost: a search is O(file lines × hunk lines) per pass, which is bounded
//! by the server's file cap (256 KiB) and patch cap (1 MiB).

use serverfs_core::ErrorCode;

use crate::error::{PatchError, quote};
use crate::{Hunk, HunkLine, MatchPass};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// At most this many candidate line numbers are listed in an ambiguity
/// message; the count is always complete.
const LISTED_CANDIDATES: usize = 10;

/// The result of [`plan_update`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The file's new bytes.
    pub bytes: Vec<u8>,
    /// One report per hunk, in order.
    pub hunks: Vec<HunkReport>,
}

/// Where and how one hunk matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HunkReport {
    /// The most lenient pass used for the hunk, over its `@@` lines and its
    /// old lines. [`MatchPass::Exact`] means everything matched exactly.
    pub pass: MatchPass,
    /// The 1-based line of the original file where the hunk's old lines
    /// begin. For an add-only hunk, it is the line number the first
    /// inserted line takes, counted in the original file (the number of
    /// lines + 1 when appending).
    pub line: usize,
}

/// The bytes of a new file from the lines of an `*** Add File:`: the
/// lines joined with `\n`, with a final `\n`. No lines gives an empty file.
pub fn add_file_bytes(lines: &[String]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Applies `hunks` to `original` in memory and returns the new bytes.
///
/// `path_for_messages` is used only in error messages (give the path as
/// the patch wrote it).
///
/// Errors: `UNSUPPORTED_TEXT_ENCODING` when the file (after a BOM) is not
/// UTF-8; `PATCH_CONTEXT_NOT_FOUND` when a hunk or an `@@` line has no
/// match under any pass after the previous hunk; `PATCH_CONTEXT_AMBIGUOUS`
/// when the first pass that finds one finds several.
pub fn plan_update(
    original: &[u8],
    hunks: &[Hunk],
    path_for_messages: &str,
) -> Result<Planned, PatchError> {
    let (bom, body) = match original.strip_prefix(BOM) {
        Some(rest) => (BOM, rest),
        None => (&[][..], original),
    };
    let text = std::str::from_utf8(body).map_err(|e| {
        PatchError::new(
            ErrorCode::UnsupportedTextEncoding,
            format!(
                "{}: the file is not UTF-8 text (invalid byte at offset {}); apply_patch edits \
                 UTF-8 text only",
                quote(path_for_messages),
                bom.len() + e.valid_up_to()
            ),
        )
    })?;
    let lines = split_lines(text);
    let eol = match lines.first() {
        Some(first) if first.ending == "\r\n" => "\r\n",
        _ => "\n",
    };

    let mut edits: Vec<Edit<'_>> = Vec::with_capacity(hunks.len());
    let mut reports = Vec::with_capacity(hunks.len());
    let mut cursor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let at = Where { path: path_for_messages, number: index + 1, hunk };
        let mut pass = MatchPass::Exact;
        for context in &hunk.contexts {
            let (found, found_pass) =
                at.locate(&lines, cursor, &[context.as_str()], Target::AtAtLine)?;
            pass = pass.max(found_pass);
            cursor = found + 1;
        }
        let old: Vec<&str> = hunk.old_lines().collect();
        let (start, end) = if old.is_empty() {
            let insert_at =
                if hunk.contexts.is_empty() || hunk.end_of_file { lines.len() } else { cursor };
            (insert_at, insert_at)
        } else {
            let target = if hunk.end_of_file { Target::BodyAtEnd } else { Target::Body };
            let (found, found_pass) = at.locate(&lines, cursor, &old, target)?;
            pass = pass.max(found_pass);
            (found, found + old.len())
        };
        let mut pieces = Vec::with_capacity(hunk.lines.len());
        let mut next = start;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    pieces.push(Piece::Original(next));
                    next += 1;
                }
                HunkLine::Remove(_) => next += 1,
                HunkLine::Add(text) => pieces.push(Piece::Added(text)),
            }
        }
        edits.push(Edit { start, end, pieces });
        reports.push(HunkReport { pass, line: start + 1 });
        cursor = end;
    }

    let mut out = Vec::with_capacity(lines.len());
    let mut next = 0;
    for edit in edits {
        out.extend((next..edit.start).map(Piece::Original));
        out.extend(edit.pieces);
        next = edit.end;
    }
    out.extend((next..lines.len()).map(Piece::Original));

    let mut bytes = Vec::with_capacity(original.len());
    bytes.extend_from_slice(bom);
    let last = out.len().saturating_sub(1);
    for (k, piece) in out.iter().enumerate() {
        let (content, ending) = match piece {
            Piece::Original(i) => match lines.get(*i) {
                Some(line) if line.ending.is_empty() && k < last => (line.content, eol),
                Some(line) => (line.content, line.ending),
                None => continue,
            },
            Piece::Added(text) => (*text, eol),
        };
        bytes.extend_from_slice(content.as_bytes());
        bytes.extend_from_slice(ending.as_bytes());
    }
    Ok(Planned { bytes, hunks: reports })
}

/// One line of the original file.
struct Line<'a> {
    /// The text without its ending.
    content: &'a str,
    /// `"\r\n"`, `"\n"`, or `""` for a last line without a final newline.
    ending: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some(newline) = rest.find('\n') else {
            lines.push(Line { content: rest, ending: "" });
            break;
        };
        let (line, after) = rest.split_at(newline + 1);
        let line = match line.strip_suffix("\r\n") {
            Some(content) => Line { content, ending: "\r\n" },
            None => Line { content: &line[..newline], ending: "\n" },
        };
        lines.push(line);
        rest = after;
    }
    lines
}

/// A line of the new file.
enum Piece<'a> {
    /// The original line at this index, bytes kept.
    Original(usize),
    /// An inserted line, written with the file's line ending.
    Added(&'a str),
}

/// Original lines `start..end` are replaced by `pieces`.
struct Edit<'a> {
    start: usize,
    end: usize,
    pieces: Vec<Piece<'a>>,
}

/// What a search looks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// One `@@` line, anywhere after the cursor.
    AtAtLine,
    /// The old lines of a hunk, anywhere after the cursor.
    Body,
    /// The old lines of a `*** End of File` hunk: only at the very end.
    BodyAtEnd,
}

/// The hunk being placed, for messages.
struct Where<'a> {
    path: &'a str,
    /// 1-based hunk number within the update.
    number: usize,
    hunk: &'a Hunk,
}

impl Where<'_> {
    /// Finds the unique start of `pattern` in `lines[from..]` (only the
    /// block ending the file for [`Target::BodyAtEnd`]) under the first
    /// pass that finds any, or the error saying why not.
    fn locate(
        &self,
        lines: &[Line<'_>],
        from: usize,
        pattern: &[&str],
        target: Target,
    ) -> Result<(usize, MatchPass), PatchError> {
        let at_end = target == Target::BodyAtEnd;
        for pass in MatchPass::ALL {
            let starts = candidates(lines, from, pattern, at_end, pass);
            match starts.as_slice() {
                [] => continue,
                [start] => return Ok((*start, pass)),
                several => return Err(self.ambiguous(pattern, target, several, pass)),
            }
        }
        Err(self.not_found(lines, from, pattern, target))
    }

    /// `path: hunk 2 (patch line 9)`.
    fn prefix(&self) -> String {
        format!("{}: hunk {} (patch line {})", quote(self.path), self.number, self.hunk.patch_line)
    }

    /// What is being looked for, for messages.
    fn what(pattern: &[&str], target: Target) -> String {
        match (target, pattern) {
            (Target::AtAtLine, [line, ..]) => format!("the '@@' line {}", quote(line)),
            (_, [first, ..]) => format!(
                "the hunk's {} context and '-' line(s), starting with {},",
                pattern.len(),
                quote(first)
            ),
            (_, []) => "the hunk's context".to_owned(),
        }
    }

    fn ambiguous(
        &self,
        pattern: &[&str],
        target: Target,
        starts: &[usize],
        pass: MatchPass,
    ) -> PatchError {
        let mut numbers: Vec<String> =
            starts.iter().take(LISTED_CANDIDATES).map(|s| (s + 1).to_string()).collect();
        if starts.len() > LISTED_CANDIDATES {
            numbers.push("…".to_owned());
        }
        PatchError::new(
            ErrorCode::PatchContextAmbiguous,
            format!(
                "{}: {} found at {} places ({} match): lines {}; add context lines (or an '@@' \
                 line naming the enclosing block) so that it matches exactly one place",
                self.prefix(),
                Self::what(pattern, target),
                starts.len(),
                pass.as_str(),
                numbers.join(", ")
            ),
        )
    }

    fn not_found(
        &self,
        lines: &[Line<'_>],
        from: usize,
        pattern: &[&str],
        target: Target,
    ) -> PatchError {
        let at_end = target == Target::BodyAtEnd;
        let place = match (at_end, from) {
            (true, _) => "at the end of the file ('*** End of File')".to_owned(),
            (false, 0) => "in the file".to_owned(),
            (false, from) => format!("after line {from}"),
        };
        // A block that exists only before the cursor is a hunk out of order
        // or overlapping its predecessor; say so, it is the likely fix.
        let earlier = from > 0
            && !at_end
            && MatchPass::ALL.iter().any(|&p| !candidates(lines, 0, pattern, false, p).is_empty());
        let hint = if earlier {
            " (it does occur earlier, before the end of the previous hunk or '@@' line: hunks \
             must follow file order and must not overlap)"
        } else {
            ""
        };
        PatchError::new(
            ErrorCode::PatchContextNotFound,
            format!(
                "{}: {} not found {place}, even ignoring whitespace and typographic quotes, \
                 dashes and spaces{hint}; re-read the file and write the patch against its \
                 current content",
                self.prefix(),
                Self::what(pattern, target),
            ),
        )
    }
}

/// Every start index `s >= from` where `pattern` matches `lines[s..]`
/// under `pass` (only `s = lines.len() - pattern.len()` when `at_end`).
fn candidates(
    lines: &[Line<'_>],
    from: usize,
    pattern: &[&str],
    at_end: bool,
    pass: MatchPass,
) -> Vec<usize> {
    let Some(last_start) = lines.len().checked_sub(pattern.len()) else {
        return Vec::new();
    };
    let first_start = if at_end { last_start.max(from) } else { from };
    (first_start..=last_start)
        .filter(|&s| {
            lines[s..]
                .iter()
                .zip(pattern)
                .all(|(line, wanted)| pass.lines_equal(line.content, wanted))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::ErrorCode::*;

    fn hunk(contexts: &[&str], body: &str) -> Hunk {
        let lines = body
            .lines()
            .map(|l| match l.split_at(1) {
                (" ", t) => HunkLine::Context(t.into()),
                ("-", t) => HunkLine::Remove(t.into()),
                ("+", t) => HunkLine::Add(t.into()),
                _ => panic!("bad test line {l:?}"),
            })
            .collect();
        Hunk {
            contexts: contexts.iter().map(|c| c.to_string()).collect(),
            lines,
            end_of_file: false,
            patch_line: 3,
        }
    }

    fn eof(mut h: Hunk) -> Hunk {
        h.end_of_file = true;
        h
    }

    fn plan(file: &str, hunks: &[Hunk]) -> Result<(String, Vec<(MatchPass, usize)>), PatchError> {
        let planned = plan_update(file.as_bytes(), hunks, "f.txt")?;
        let reports = planned.hunks.iter().map(|r| (r.pass, r.line)).collect();
        Ok((String::from_utf8(planned.bytes).unwrap(), reports))
    }

    fn fails(file: &str, hunks: &[Hunk], code: ErrorCode, needle: &str) {
        let e = plan(file, hunks).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(needle), "{:?} lacks {needle:?}", e.message());
    }

    #[test]
    fn replaces_a_line() {
        let got = plan("a\nb\nc\n", &[hunk(&[], " a\n-b\n+B\n c")]).unwrap();
        assert_eq!(got, ("a\nB\nc\n".into(), vec![(MatchPass::Exact, 1)]));
    }

    #[test]
    fn lenient_passes_are_reported_and_original_bytes_kept() {
        let file = "x  \n  y\n\u{201C}z\u{201D}\n";
        let got = plan(file, &[hunk(&[], " x\n-y\n+Y")]).unwrap();
        assert_eq!(got, ("x  \nY\n\u{201C}z\u{201D}\n".into(), vec![(MatchPass::Whitespace, 1)]));
        let got = plan(file, &[hunk(&[], " x\n+new")]).unwrap();
        assert_eq!(got.1, [(MatchPass::TrailingWhitespace, 1)]);
        assert_eq!(got.0, "x  \nnew\n  y\n\u{201C}z\u{201D}\n");
        let got = plan(file, &[hunk(&[], "-\"z\"")]).unwrap();
        assert_eq!(got, ("x  \n  y\n".into(), vec![(MatchPass::Typography, 3)]));
    }

    #[test]
    fn exact_wins_over_lenient_candidates() {
        // "a " matches leniently too, but an exact match exists: no ambiguity.
        let got = plan("a \na\n", &[hunk(&[], "-a")]).unwrap();
        assert_eq!(got, ("a \n".into(), vec![(MatchPass::Exact, 2)]));
    }

    #[test]
    fn ambiguity_at_the_first_pass_with_candidates() {
        fails(
            "a\nb\na\nb\n",
            &[hunk(&[], "-a")],
            PatchContextAmbiguous,
            "found at 2 places (exact match): lines 1, 3",
        );
        fails(
            "a \na  \n",
            &[hunk(&[], "-a")],
            PatchContextAmbiguous,
            "(trailing-whitespace match): lines 1, 2",
        );
        let many = "x\n".repeat(12);
        fails(
            &many,
            &[hunk(&[], "-x")],
            PatchContextAmbiguous,
            "12 places (exact match): lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …",
        );
    }

    #[test]
    fn not_found_names_the_hunk_and_asks_to_reread() {
        fails(
            "a\nb\n",
            &[hunk(&[], "-a"), hunk(&[], " zz\n-b")],
            PatchContextNotFound,
            "\"f.txt\": hunk 2 (patch line 3): the hunk's 2 context and '-' line(s), starting with \"zz\", not found after line 1",
        );
        fails("a\n", &[hunk(&[], "-q")], PatchContextNotFound, "re-read the file");
    }

    #[test]
    fn later_hunk_before_or_inside_the_previous_one_is_not_found() {
        let file = "a\nb\nc\nd\n";
        fails(
            file,
            &[hunk(&[], " c\n-d"), hunk(&[], "-a")],
            PatchContextNotFound,
            "does occur earlier",
        );
        fails(
            file,
            &[hunk(&[], " b\n-c"), hunk(&[], " c\n+x")],
            PatchContextNotFound,
            "after line 3",
        );
        // Adjacent is fine.
        let got = plan(file, &[hunk(&[], "-b"), hunk(&[], "-c")]).unwrap();
        assert_eq!(got, ("a\nd\n".into(), vec![(MatchPass::Exact, 2), (MatchPass::Exact, 3)]));
    }

    #[test]
    fn a_later_hunk_must_be_unique_only_in_the_remainder() {
        let file = "k\nx\nk\ny\n";
        let got = plan(file, &[hunk(&[], "-x"), hunk(&[], " k\n+z")]).unwrap();
        assert_eq!(
            got,
            ("k\nk\nz\ny\n".into(), vec![(MatchPass::Exact, 2), (MatchPass::Exact, 3)])
        );
    }

    #[test]
    fn stacked_at_at_lines_are_located_in_order() {
        let file = "class A\n  def f\n    v = 1\nclass B\n  def f\n    v = 1\n";
        let got = plan(file, &[hunk(&["class B", "def f"], "-    v = 1\n+    v = 2")]).unwrap();
        assert_eq!(got.0, "class A\n  def f\n    v = 1\nclass B\n  def f\n    v = 2\n");
        // `def f` matched only with whitespace ignored: reported.
        assert_eq!(got.1, [(MatchPass::Whitespace, 6)]);
        // Without the class line, `def f` is ambiguous.
        fails(
            file,
            &[hunk(&["def f"], "-    v = 1")],
            PatchContextAmbiguous,
            "the '@@' line \"def f\" found at 2 places",
        );
        fails(
            file,
            &[hunk(&["class C"], "-    v = 1")],
            PatchContextNotFound,
            "the '@@' line \"class C\" not found in the file",
        );
        // The body is searched after the last '@@' line only.
        fails(
            file,
            &[hunk(&["class B"], " class B\n+x")],
            PatchContextNotFound,
            "does occur earlier",
        );
    }

    #[test]
    fn add_only_hunks() {
        let got = plan("a\nb\n", &[hunk(&["a"], "+x\n+y")]).unwrap();
        assert_eq!(got, ("a\nx\ny\nb\n".into(), vec![(MatchPass::Exact, 2)]));
        let got = plan("a\nb\n", &[hunk(&[], "+x")]).unwrap();
        assert_eq!(got, ("a\nb\nx\n".into(), vec![(MatchPass::Exact, 3)]));
        let got = plan("a\nb", &[hunk(&[], "+x")]).unwrap();
        assert_eq!(got.0, "a\nb\nx\n");
        let got = plan("", &[hunk(&[], "+x")]).unwrap();
        assert_eq!(got, ("x\n".into(), vec![(MatchPass::Exact, 1)]));
        let got = plan("a\nb\n", &[eof(hunk(&["a"], "+x"))]).unwrap();
        assert_eq!(got.0, "a\nb\nx\n");
    }

    #[test]
    fn end_of_file_anchors_at_the_end() {
        let file = "x\ny\nx\n";
        let got = plan(file, &[eof(hunk(&[], "-x\n+z"))]).unwrap();
        assert_eq!(got, ("x\ny\nz\n".into(), vec![(MatchPass::Exact, 3)]));
        fails(file, &[eof(hunk(&[], "-y"))], PatchContextNotFound, "at the end of the file");
        fails("x\n", &[eof(hunk(&[], " a\n-x"))], PatchContextNotFound, "at the end of the file");
    }

    #[test]
    fn crlf_files_stay_crlf_and_mixed_endings_are_kept() {
        let got = plan("a\r\nb\nc\r\n", &[hunk(&[], " a\n-b\n+B\n+C\n c")]).unwrap();
        assert_eq!(got.0, "a\r\nB\r\nC\r\nc\r\n");
        let got = plan("a\nb\r\n", &[hunk(&[], "+x")]).unwrap();
        assert_eq!(got.0, "a\nb\r\nx\n");
    }

    #[test]
    fn bom_is_kept() {
        let planned = plan_update(b"\xEF\xBB\xBFa\nb\n", &[hunk(&[], "-a\n+A")], "f").unwrap();
        assert_eq!(planned.bytes, b"\xEF\xBB\xBFA\nb\n");
        let planned = plan_update(b"\xEF\xBB\xBF", &[hunk(&[], "+x")], "f").unwrap();
        assert_eq!(planned.bytes, b"\xEF\xBB\xBFx\n");
    }

    #[test]
    fn no_final_newline_is_kept_when_the_last_line_is_untouched() {
        assert_eq!(plan("a\nb", &[hunk(&[], "-a\n+A")]).unwrap().0, "A\nb");
        assert_eq!(plan("a\nb", &[hunk(&[], " a\n b\n+c")]).unwrap().0, "a\nb\nc\n");
        assert_eq!(plan("a\nb", &[hunk(&[], "-b\n+B")]).unwrap().0, "a\nB\n");
        assert_eq!(plan("a\nb", &[hunk(&[], "-b")]).unwrap().0, "a\n");
    }

    #[test]
    fn removing_everything_leaves_only_the_bom() {
        let planned = plan_update(b"\xEF\xBB\xBFa\r\nb", &[hunk(&[], "-a\n-b")], "f").unwrap();
        assert_eq!(planned.bytes, BOM);
    }

    #[test]
    fn not_utf8_is_unsupported_encoding() {
        let e = plan_update(b"ok\n\xFF\n", &[hunk(&[], "+x")], "bin.dat").unwrap_err();
        assert_eq!(e.code(), UnsupportedTextEncoding);
        assert!(e.message().contains("\"bin.dat\"") && e.message().contains("offset 3"), "{e}");
    }

    #[test]
    fn add_file_bytes_joins_with_lf() {
        assert_eq!(add_file_bytes(&["a".into(), String::new()]), b"a\n\n");
        assert_eq!(add_file_bytes(&[]), b"");
    }

    #[test]
    fn split_lines_keeps_endings() {
        let got: Vec<(&str, &str)> =
            split_lines("a\r\nb\n\rc\r").iter().map(|l| (l.content, l.ending)).collect();
        assert_eq!(got, [("a", "\r\n"), ("b", "\n"), ("\rc\r", "")]);
        assert!(split_lines("").is_empty());
    }
}
