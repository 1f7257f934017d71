//! The near-miss hint of `PATCH_CONTEXT_NOT_FOUND`: the place in the file
//! closest to a block that matched nowhere, and the first character where
//! the two differ, so a model can fix its patch in one step.
//!
//! Guarantees:
//! - Bounded text: a hint is at most [`HINT_BYTES`] bytes, whatever the
//!   lines' lengths.
//! - Bounded work, counted against the planner's budget: voting reads at
//!   most [`MAX_VOTES`] line positions (rarest lines first, they say the
//!   most), and the fallback compares one patch line with each file line
//!   once, O(file bytes). No quadratic case.
//! - Deterministic: ties go to the place nearest the search start.

use crate::MatchPass;
use crate::error::PatchError;

/// The most bytes a hint adds to the message.
pub(crate) const HINT_BYTES: usize = 1200;

/// The most line positions voting reads.
const MAX_VOTES: usize = 1 << 16;

/// File lines shown around the first differing line.
const SHOWN_AROUND: usize = 1;

/// Characters shown of the file's line around the differing one.
const SHOWN_CHARS: usize = 80;

/// Characters shown of the differing lines (the file's and the patch's):
/// enough for a long line whole, else a window around the difference.
const SHOWN_DIFFERING_CHARS: usize = 200;

/// Marks, in a quoted differing line, where the two lines part. Not an
/// ASCII character, so a model cannot mistake it for code it wrote.
const MARK: char = '‸';

/// Where the block most nearly matches: its first file line (0-based) and
/// how many of its lines are equal there under the most lenient pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Region {
    pub start: usize,
    pub equal: usize,
}

/// The start in `from..=last` where most block lines sit at their place.
/// `lines` gives, for each block line `j` the file has at all, the file
/// lines equal to it (ascending), and how many there are.
pub(crate) fn by_votes<'p>(
    lines: impl Iterator<Item = (usize, &'p [usize])>,
    from: usize,
    last: usize,
    tick: &mut dyn FnMut() -> Result<(), PatchError>,
) -> Result<Option<Region>, PatchError> {
    let mut lines: Vec<(usize, &[usize])> = lines.collect();
    lines.sort_by_key(|(_, positions)| positions.len());
    let mut votes = vec![0u32; last - from + 1];
    let mut read = 0;
    for (j, positions) in lines {
        let lo = positions.partition_point(|&p| p < from + j);
        let hi = positions.partition_point(|&p| p <= last + j);
        if read + (hi - lo) > MAX_VOTES {
            break;
        }
        read += hi - lo;
        for &p in &positions[lo..hi] {
            tick()?;
            votes[p - j - from] += 1;
        }
    }
    let mut best: Option<Region> = None;
    for (offset, &count) in votes.iter().enumerate() {
        if count > 0 && best.is_none_or(|b| count as usize > b.equal) {
            best = Some(Region { start: from + offset, equal: count as usize });
        }
    }
    Ok(best)
}

/// When no block line occurs in the file: the start that puts the file
/// line most like the block's longest line at its place, if at least half
/// of that line (after its indentation) is shared as a prefix and suffix.
pub(crate) fn by_similarity(
    file: &[&str],
    block: &[&str],
    from: usize,
    last: usize,
    tick: &mut dyn FnMut() -> Result<(), PatchError>,
) -> Result<Option<Region>, PatchError> {
    let Some((j, wanted)) = block.iter().enumerate().max_by_key(|(_, l)| l.trim().len()) else {
        return Ok(None);
    };
    let wanted = wanted.trim();
    let mut best: Option<(usize, usize)> = None;
    for (i, line) in file.iter().enumerate().take(last + j + 1).skip(from + j) {
        tick()?;
        let shared = shared_ends(line.trim(), wanted);
        if best.is_none_or(|(_, b)| shared > b) {
            best = Some((i, shared));
        }
    }
    Ok(best.filter(|&(_, shared)| shared > 0 && 2 * shared >= wanted.len()).map(|(i, _)| {
        let start = i - j;
        let equal = block
            .iter()
            .zip(&file[start..])
            .filter(|(b, f)| MatchPass::Typography.key(b) == MatchPass::Typography.key(f))
            .count();
        Region { start, equal }
    }))
}

/// Bytes of the longest common prefix plus the longest common suffix of
/// `a` and `b`, at most the shorter length.
fn shared_ends(a: &str, b: &str) -> usize {
    let prefix = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let suffix = a.bytes().rev().zip(b.bytes().rev()).take_while(|(x, y)| x == y).count();
    (prefix + suffix).min(a.len().min(b.len()))
}

/// The hint for `block` placed at `region` of `file`: the region's line
/// numbers, how many lines are equal, the first differing line and
/// character, and the file's lines around it.
pub(crate) fn describe(file: &[&str], block: &[&str], region: Region) -> String {
    let Region { start, equal } = region;
    let end = start + block.len();
    let mut hint = format!(
        "the closest place is line{} {} ({equal} of {} line{} equal ignoring whitespace)",
        if block.len() == 1 { "" } else { "s" },
        if block.len() == 1 { (start + 1).to_string() } else { format!("{}-{end}", start + 1) },
        block.len(),
        if block.len() == 1 { "" } else { "s" },
    );
    let differing = block
        .iter()
        .zip(&file[start..end])
        .position(|(b, f)| MatchPass::Typography.key(b) != MatchPass::Typography.key(f));
    if let Some(j) = differing {
        let (file_line, patch_line) = (file[start + j], block[j]);
        let (in_file, in_patch) = first_difference(file_line, patch_line);
        hint.push_str(&format!(
            "; line {} differs at column {} (marked {MARK}): {}. The file there:",
            start + j + 1,
            in_file + 1,
            difference_words(file_line, patch_line),
        ));
        let shown = (start + j).saturating_sub(SHOWN_AROUND).max(start)
            ..(start + j + SHOWN_AROUND + 1).min(end);
        // One line: error messages never contain a line break.
        let lines: Vec<String> = shown
            .map(|i| {
                let quoted = if i == start + j { marked(file[i], in_file) } else { clip(file[i]) };
                format!("line {} {quoted}", i + 1)
            })
            .collect();
        hint.push_str(&format!(
            " {}; the patch: {}",
            lines.join(", "),
            marked(patch_line, in_patch)
        ));
    }
    bound(hint)
}

/// Where `file` and `patch` first differ, comparing after their
/// indentation and reading typographic characters as ASCII: the 0-based
/// character index in each line.
fn first_difference(file: &str, patch: &str) -> (usize, usize) {
    let indent = |line: &str| line[..line.len() - line.trim_start().len()].chars().count();
    let k = differing_chars(file.trim_start(), patch.trim_start()).0;
    (indent(file) + k, indent(patch) + k)
}

/// `the file has '"' where the patch has '\''`, or which line ends first.
fn difference_words(file: &str, patch: &str) -> String {
    match differing_chars(file.trim_start(), patch.trim_start()).1 {
        (Some(f), Some(p)) => format!("the file has {f:?} where the patch has {p:?}"),
        (Some(f), None) => format!("the patch's line ends where the file's goes on with {f:?}"),
        (None, Some(p)) => format!("the file's line ends where the patch's goes on with {p:?}"),
        (None, None) => "they differ only in whitespace".to_owned(),
    }
}

/// The index (in characters) of the first pair of characters that differ
/// even read as ASCII, and that pair (`None` past a line's end).
fn differing_chars(a: &str, b: &str) -> (usize, (Option<char>, Option<char>)) {
    let ascii = |c: char| MatchPass::Typography.key(c.encode_utf8(&mut [0; 4])).into_owned();
    let (mut a, mut b) = (a.chars(), b.chars());
    let mut k = 0;
    loop {
        match (a.next(), b.next()) {
            (None, None) => return (k, (None, None)),
            (Some(x), Some(y)) if x == y || ascii(x) == ascii(y) => k += 1,
            pair => return (k, pair),
        }
    }
}

/// A line as shown in a hint: quoted, at most [`SHOWN_CHARS`] characters.
fn clip(line: &str) -> String {
    match line.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}…", &line[..cut]),
        None => format!("{line:?}"),
    }
}

/// A differing line as shown in a hint: quoted, [`MARK`] before its
/// character `at` (0-based), at most [`SHOWN_DIFFERING_CHARS`] characters of
/// it — from its start when the mark falls in them, else a window that
/// puts the mark in its middle (`…` where the line is cut).
fn marked(line: &str, at: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    let from = if at < SHOWN_DIFFERING_CHARS { 0 } else { at - SHOWN_DIFFERING_CHARS / 2 };
    let to = chars.len().min(from + SHOWN_DIFFERING_CHARS);
    let mut shown: String = chars[from..to.max(from)].iter().collect();
    let mark_at = chars[from..at.min(chars.len())].iter().map(|c| c.len_utf8()).sum();
    shown.insert(mark_at, MARK);
    format!(
        "{}{shown:?}{}",
        if from > 0 { "…" } else { "" },
        if to < chars.len() { "…" } else { "" }
    )
}

/// `hint` cut to [`HINT_BYTES`] at a character boundary.
fn bound(mut hint: String) -> String {
    if hint.len() > HINT_BYTES {
        let mut cut = HINT_BYTES - '…'.len_utf8();
        while !hint.is_char_boundary(cut) {
            cut -= 1;
        }
        hint.truncate(cut);
        hint.push('…');
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_limit() -> impl FnMut() -> Result<(), PatchError> {
        || Ok(())
    }

    #[test]
    fn votes_pick_the_start_where_most_lines_sit() {
        // Block lines 0 and 2 occur at file lines 5 and 7 (start 5); line 0
        // also at 1 (start 1, one vote).
        let zero = [1, 5];
        let two = [7];
        let lines = [(0, &zero[..]), (2, &two[..])].into_iter();
        let region = by_votes(lines, 0, 8, &mut no_limit()).unwrap();
        assert_eq!(region, Some(Region { start: 5, equal: 2 }));
        // Out of the window: nothing.
        let lines = [(0, &zero[..])].into_iter();
        assert_eq!(by_votes(lines, 6, 8, &mut no_limit()).unwrap(), None);
    }

    #[test]
    fn similarity_needs_half_the_line() {
        let file = ["fn a() {", "    prnt(\"hello world\");", "}"];
        let found = by_similarity(&file, &["print(\"hello world\");"], 0, 2, &mut no_limit());
        assert_eq!(found.unwrap(), Some(Region { start: 1, equal: 0 }));
        let found = by_similarity(&file, &["something else entirely"], 0, 2, &mut no_limit());
        assert_eq!(found.unwrap(), None);
    }

    #[test]
    fn describe_names_line_column_and_characters() {
        let file = ["def f():", "    print(\"hi\")", "    return 1"];
        let hint = describe(&file, &["def f():", "    print('hi')"], Region { start: 0, equal: 1 });
        assert_eq!(
            hint,
            "the closest place is lines 1-2 (1 of 2 lines equal ignoring whitespace); line 2 \
             differs at column 11 (marked ‸): the file has '\"' where the patch has '\\''. The \
             file there: line 1 \"def f():\", line 2 \"    print(‸\\\"hi\\\")\"; the patch: \
             \"    print(‸'hi')\""
        );
        let hint = describe(&["a = 1"], &["a  = 1"], Region { start: 0, equal: 0 });
        assert!(hint.contains(
            "line 1 differs at column 3 (marked ‸): the file has '=' where the patch has ' '"
        ));
        let hint = describe(&["abc"], &["ab"], Region { start: 0, equal: 0 });
        assert!(hint.contains(
            "column 3 (marked ‸): the patch's line ends where the file's goes on with 'c'"
        ));
        assert!(hint.ends_with("the patch: \"ab‸\""), "{hint}");
    }

    #[test]
    fn a_long_differing_line_is_quoted_to_200_characters_with_the_mark() {
        // The difference within the first 200 characters: the line from its start.
        let file_line = format!("{}{}", "a".repeat(150), "b".repeat(100));
        let patch_line = format!("{}{}", "a".repeat(150), "c".repeat(100));
        let hint = describe(&[file_line.as_str()], &[patch_line.as_str()], Region::default());
        let quoted = format!("\"{}‸{}\"…", "a".repeat(150), "b".repeat(50));
        assert!(hint.contains(&quoted), "{hint}");
        // Far along a long line: a window with the mark in its middle.
        let file_line = format!("{}X{}", "a".repeat(1_000), "z".repeat(1_000));
        let patch_line = format!("{}Y{}", "a".repeat(1_000), "z".repeat(1_000));
        let hint = describe(&[file_line.as_str()], &[patch_line.as_str()], Region::default());
        let quoted = format!("…\"{}‸X{}\"…", "a".repeat(100), "z".repeat(99));
        assert!(hint.contains("differs at column 1001"), "{hint}");
        assert!(hint.contains(&quoted), "{hint}");
        assert!(hint.len() <= HINT_BYTES, "{}", hint.len());
    }

    #[test]
    fn hints_are_bounded() {
        let long = "x".repeat(10_000);
        let file = [long.as_str(), long.as_str(), long.as_str()];
        let other = format!("{long}y");
        let block = [long.as_str(), other.as_str(), long.as_str()];
        let hint = describe(&file, &block, Region { start: 0, equal: 2 });
        assert!(hint.len() <= HINT_BYTES, "{}", hint.len());
        assert!(!hint.contains('\n'), "{hint}");
        let wide = "é".repeat(1_000);
        let hint = bound(wide);
        assert!(hint.len() <= HINT_BYTES && hint.ends_with('…'));
    }
}
