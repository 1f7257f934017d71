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
//! own bytes, even when a lenient pass matched it. The file's end-of-file
//! state is kept like its BOM: a non-empty file without a final newline
//! gets none, whatever line ends up last; a file with one keeps one.
//!
//! Placement of hunk *k*, searching only after the end of hunk *k−1*'s
//! match (the "cursor"):
//! 1. Each `@@ text` line is located in order, as a single line, uniquely
//!    under the first pass that finds it. The cursor moves past it.
//! 2. The old lines (context and `-`) are located as a block after the
//!    cursor, uniquely under the first pass that finds them. With
//!    `*** End of File`, the only candidate is the block that ends the file.
//!    When the block is not found and the hunk ends with empty context
//!    lines (a blank line a model left before `*** End Patch`), it is
//!    searched again without them, as Codex does.
//! 3. A hunk with no old lines (add-only) is inserted right after its last
//!    `@@` line. With no `@@` text, or with `*** End of File`, it is
//!    appended at the end of the file.
//!
//! Cost, for a file of F bytes in N lines and hunks of P bytes in total:
//! each pass reads every file line into an interned key once, on first
//! use, and builds a suffix automaton of the key sequence (O(F) per pass).
//! A block of M lines is then looked up in the automaton in O(M) steps;
//! when it occurs at most once in the whole file, that settles it. Only a
//! block that occurs several times in the file (so it must be unique after
//! the cursor) is searched by comparing integer keys: through the
//! positions of its rarest line when that is cheaper, otherwise by a
//! Knuth–Morris–Pratt scan of the rest of the file, O(M log N + min(c·M,
//! N)) where c is how often its rarest line occurs after the cursor. So a
//! patch whose hunks are unique in the file (the usual case) costs
//! O(F + P); the worst case, H hunks each repeated earlier in the file, is
//! O(F + P + H·N) — linear per hunk, never quadratic in a block's size.
//! A block found nowhere adds one near-miss search for the message
//! ([`nearest`]): at most 65,536 position reads and one O(F) scan.
//! The `stop` callback of [`plan_update_until`] is polled every few
//! thousand steps, so a deadline or a cancellation ends the work within a
//! few milliseconds.

use std::borrow::Cow;
use std::collections::HashMap;

use serverfs_core::ErrorCode;

use crate::automaton::Automaton;
use crate::error::{PatchError, quote};
use crate::indent::{self, Mapping, Style};
use crate::nearest;
use crate::{Hunk, HunkLine, MatchPass};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// At most this many candidate line numbers are listed in an ambiguity
/// message; the count is always complete.
const LISTED_CANDIDATES: usize = 10;

/// Work units (line keys or comparisons) between two polls of `stop`.
const STEPS_PER_POLL: u32 = 4096;

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
    /// The file's indentation the hunk's inserted lines were re-indented
    /// to, when it matched only by ignoring leading whitespace and its
    /// indentation differed from the file's.
    pub reindented: Option<Style>,
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

/// [`plan_update_until`] with no way to stop it early.
///
/// # Errors
/// As [`plan_update_until`], never `TIMEOUT`.
pub fn plan_update(
    original: &[u8],
    hunks: &[Hunk],
    path_for_messages: &str,
) -> Result<Planned, PatchError> {
    plan_update_until(original, hunks, path_for_messages, &|| false)
}

/// Applies `hunks` to `original` in memory and returns the new bytes.
///
/// `path_for_messages` is used only in error messages (give the path as
/// the patch wrote it). `stop` is polled while planning runs (every few
/// thousand steps); once it returns `true` planning ends with `TIMEOUT`.
///
/// # Errors
/// `UNSUPPORTED_TEXT_ENCODING` when the file (after a BOM) is not UTF-8;
/// `PATCH_CONTEXT_NOT_FOUND` when a hunk or an `@@` line has no match
/// under any pass after the previous hunk; `PATCH_CONTEXT_AMBIGUOUS` when
/// the first pass that finds one finds several; `TIMEOUT` when `stop` said
/// so.
pub fn plan_update_until(
    original: &[u8],
    hunks: &[Hunk],
    path_for_messages: &str,
    stop: &dyn Fn() -> bool,
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
    let mut search = Search::new(&lines, stop);

    let mut edits: Vec<Edit<'_>> = Vec::with_capacity(hunks.len());
    let mut reports = Vec::with_capacity(hunks.len());
    let mut cursor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        search.budget.poll()?;
        let at = Where { path: path_for_messages, number: index + 1, hunk };
        let mut pass = MatchPass::Exact;
        for context in &hunk.contexts {
            let (found, found_pass) =
                at.locate(&mut search, cursor, &[context.as_str()], Target::AtAtLine)?;
            pass = pass.max(found_pass);
            cursor = found + 1;
        }
        let placed = match at.place(&mut search, cursor, &hunk.lines) {
            Err(e) if e.code() == ErrorCode::PatchContextNotFound => {
                // A trailing blank line is most often the one a model left
                // before `*** End Patch`: try again without it.
                let trimmed = without_trailing_blank(&hunk.lines);
                if trimmed.len() == hunk.lines.len() {
                    return Err(e);
                }
                at.place(&mut search, cursor, trimmed).map_err(|retry| {
                    if retry.code() == ErrorCode::PatchContextNotFound { e } else { retry }
                })?
            }
            placed => placed?,
        };
        let Placed { body, start, end, pass: body_pass } = placed;
        pass = pass.max(body_pass);
        let mapping = if body_pass >= MatchPass::Whitespace {
            at.indentation(&mut search, body, start)?
        } else {
            None
        };
        let mut pieces = Vec::with_capacity(body.len());
        let mut next = start;
        for line in body {
            match line {
                HunkLine::Context(_) => {
                    pieces.push(Piece::Original(next));
                    next += 1;
                }
                HunkLine::Remove(_) => next += 1,
                HunkLine::Add(text) => pieces.push(Piece::Added(match &mapping {
                    Some(m) => m.apply(text).map_err(|e| at.unindentable(&e.line))?,
                    None => Cow::Borrowed(text.as_str()),
                })),
            }
        }
        edits.push(Edit { start, end, pieces });
        let reindented = mapping.map(|m| m.target());
        reports.push(HunkReport { pass, line: start + 1, reindented });
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

    // The end-of-file state of the original, kept for the new last line.
    let final_newline = lines.last().is_none_or(|l| !l.ending.is_empty());
    let mut bytes = Vec::with_capacity(original.len());
    bytes.extend_from_slice(bom);
    let last = out.len().saturating_sub(1);
    for (k, piece) in out.iter().enumerate() {
        let content = match piece {
            Piece::Original(i) => lines[*i].content,
            Piece::Added(text) => text.as_ref(),
        };
        let ending = match piece {
            _ if k == last && !final_newline => "",
            Piece::Original(i) if !lines[*i].ending.is_empty() => lines[*i].ending,
            _ => eol,
        };
        bytes.extend_from_slice(content.as_bytes());
        bytes.extend_from_slice(ending.as_bytes());
    }
    Ok(Planned { bytes, hunks: reports })
}

/// The lines of `body` the file must have: context and `-` lines.
fn old_lines(body: &[HunkLine]) -> impl Iterator<Item = &str> + Clone {
    body.iter().filter_map(|l| match l {
        HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
        HunkLine::Add(_) => None,
    })
}

/// `lines` without its trailing empty context lines.
fn without_trailing_blank(lines: &[HunkLine]) -> &[HunkLine] {
    let keep = lines
        .iter()
        .rposition(|l| !matches!(l, HunkLine::Context(t) if t.is_empty()))
        .map_or(0, |i| i + 1);
    &lines[..keep]
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
    /// An inserted line (re-indented, or as the patch gave it), written
    /// with the file's line ending.
    Added(Cow<'a, str>),
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

/// The stop callback and the steps counted since it was last polled.
struct Budget<'s> {
    stop: &'s dyn Fn() -> bool,
    steps: u32,
}

impl Budget<'_> {
    /// Counts one step and polls `stop` when enough have passed.
    fn tick(&mut self) -> Result<(), PatchError> {
        self.steps += 1;
        if self.steps >= STEPS_PER_POLL {
            self.steps = 0;
            self.poll()?;
        }
        Ok(())
    }

    /// Polls `stop` now.
    fn poll(&mut self) -> Result<(), PatchError> {
        if (self.stop)() {
            return Err(PatchError::new(
                ErrorCode::Timeout,
                "planning the patch was stopped: the call's deadline passed or it was \
                 cancelled; nothing was written",
            ));
        }
        Ok(())
    }
}

/// The file's lines as interned keys, one table per pass, built on first
/// use, and the budget every search counts against.
struct Search<'a, 's> {
    lines: &'a [Line<'a>],
    passes: [Option<PassIndex<'a>>; 4],
    /// The file's indentation style, detected on first need.
    style: Option<Option<Style>>,
    budget: Budget<'s>,
}

/// One pass's view of the file.
struct PassIndex<'a> {
    /// Key → id; ids are dense from 0.
    ids: HashMap<Cow<'a, str>, u32>,
    /// The id of each file line.
    file: Vec<u32>,
    /// For each id, the file lines that have it, ascending.
    positions: Vec<Vec<usize>>,
    /// Occurrences of any block in the whole file.
    automaton: Automaton,
}

impl<'a> PassIndex<'a> {
    /// The index in `slot`, built there on first use.
    fn get<'x>(
        slot: &'x mut Option<Self>,
        lines: &'a [Line<'a>],
        pass: MatchPass,
        budget: &mut Budget<'_>,
    ) -> Result<&'x Self, PatchError> {
        if slot.is_none() {
            *slot = Some(Self::build(lines, pass, budget)?);
        }
        let Some(index) = slot.as_ref() else { unreachable!("built above") };
        Ok(index)
    }

    fn build(
        lines: &'a [Line<'a>],
        pass: MatchPass,
        budget: &mut Budget<'_>,
    ) -> Result<Self, PatchError> {
        let mut ids: HashMap<Cow<'a, str>, u32> = HashMap::new();
        let mut file = Vec::with_capacity(lines.len());
        let mut positions: Vec<Vec<usize>> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            budget.tick()?;
            let next = u32::try_from(positions.len()).unwrap_or(u32::MAX);
            let id = *ids.entry(pass.key(line.content)).or_insert(next);
            if id == next {
                positions.push(Vec::new());
            }
            file.push(id);
            positions[id as usize].push(i);
        }
        let automaton = Automaton::build(&file, &mut || budget.tick())?;
        Ok(Self { ids, file, positions, automaton })
    }

    /// Every start `s` in `from..=last` where `wanted` (ids) matches, in
    /// order. Goes through the positions of the rarest wanted line when
    /// checking those is cheaper than a Knuth–Morris–Pratt scan of the
    /// range.
    fn scan(
        &self,
        wanted: &[u32],
        from: usize,
        last: usize,
        budget: &mut Budget<'_>,
    ) -> Result<Matches, PatchError> {
        let mut found = Matches::default();
        // Where line j of the block may sit: `from + j ..= last + j`.
        let in_range = |j: usize| {
            let list = &self.positions[wanted[j] as usize];
            let lo = list.partition_point(|&p| p < from + j);
            let hi = list.partition_point(|&p| p <= last + j);
            &list[lo..hi]
        };
        let (rarest, count) = (0..wanted.len())
            .map(|j| (j, in_range(j).len()))
            .min_by_key(|&(_, count)| count)
            .unwrap_or((0, 0));
        let matches_at = |s: usize, budget: &mut Budget<'_>| -> Result<bool, PatchError> {
            for (a, b) in self.file[s..s + wanted.len()].iter().zip(wanted) {
                budget.tick()?;
                if a != b {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        if count.saturating_mul(wanted.len()) <= last - from + wanted.len() {
            for &p in in_range(rarest) {
                if matches_at(p - rarest, budget)? {
                    found.push(p - rarest);
                }
            }
            return Ok(found);
        }
        // Knuth–Morris–Pratt: `fail[j]` is the length of the longest proper
        // border of `wanted[..=j]`.
        let mut fail = vec![0usize; wanted.len()];
        let mut k = 0;
        for j in 1..wanted.len() {
            budget.tick()?;
            while k > 0 && wanted[j] != wanted[k] {
                k = fail[k - 1];
            }
            if wanted[j] == wanted[k] {
                k += 1;
            }
            fail[j] = k;
        }
        let mut k = 0;
        for (i, &id) in self.file.iter().enumerate().take(last + wanted.len()).skip(from) {
            budget.tick()?;
            while k > 0 && id != wanted[k] {
                k = fail[k - 1];
            }
            if id == wanted[k] {
                k += 1;
            }
            if k == wanted.len() {
                found.push(i + 1 - k);
                k = fail[k - 1];
            }
        }
        Ok(found)
    }
}

/// The starts of a block's matches: how many, and the first few.
#[derive(Default)]
struct Matches {
    count: usize,
    first: Vec<usize>,
}

impl Matches {
    fn push(&mut self, start: usize) {
        self.count += 1;
        if self.first.len() <= LISTED_CANDIDATES {
            self.first.push(start);
        }
    }
}

impl<'a, 's> Search<'a, 's> {
    fn new(lines: &'a [Line<'a>], stop: &'s dyn Fn() -> bool) -> Self {
        Self {
            lines,
            passes: [None, None, None, None],
            style: None,
            budget: Budget { stop, steps: 0 },
        }
    }

    /// The file's indentation style ([`indent::detect`]), once per file.
    fn style(&mut self) -> Result<Option<Style>, PatchError> {
        if let Some(style) = self.style {
            return Ok(style);
        }
        for _ in 0..self.lines.len() {
            self.budget.tick()?;
        }
        let style = indent::detect(self.lines.iter().map(|l| l.content));
        self.style = Some(style);
        Ok(style)
    }

    /// Every start `s >= from` where `pattern` matches the file under
    /// `pass` (only `s = N - M` when `at_end`).
    fn find(
        &mut self,
        from: usize,
        pattern: &[&str],
        at_end: bool,
        pass: MatchPass,
    ) -> Result<Matches, PatchError> {
        let Some(last) = self.lines.len().checked_sub(pattern.len()) else {
            return Ok(Matches::default());
        };
        let from = if at_end { last.max(from) } else { from };
        if pattern.is_empty() || from > last {
            return Ok(Matches::default());
        }
        let index =
            PassIndex::get(&mut self.passes[pass as usize], self.lines, pass, &mut self.budget)?;
        let mut wanted = Vec::with_capacity(pattern.len());
        for line in pattern {
            self.budget.tick()?;
            // A line the file does not have under this pass: no match.
            let Some(&id) = index.ids.get(&pass.key(line)) else {
                return Ok(Matches::default());
            };
            wanted.push(id);
        }
        if !at_end {
            // A block found once in the whole file needs no scan: that one
            // place is either after the cursor or not.
            let mut found = Matches::default();
            match index.automaton.occurrences(&wanted) {
                (0, _) => return Ok(found),
                (1, start) => {
                    if start >= from {
                        found.push(start);
                    }
                    return Ok(found);
                }
                _ => {}
            }
        }
        index.scan(&wanted, from, last, &mut self.budget)
    }

    /// For a block found nowhere: the hint naming the place after `from`
    /// (only the block ending the file when `at_end`) that comes closest,
    /// if any does ([`nearest`]).
    fn near_miss(
        &mut self,
        from: usize,
        pattern: &[&str],
        at_end: bool,
    ) -> Result<Option<String>, PatchError> {
        let Some(last) = self.lines.len().checked_sub(pattern.len()) else {
            return Ok(None);
        };
        let from = if at_end { last.max(from) } else { from };
        if pattern.is_empty() || from > last {
            return Ok(None);
        }
        let pass = MatchPass::Typography;
        let index =
            PassIndex::get(&mut self.passes[pass as usize], self.lines, pass, &mut self.budget)?;
        let budget = &mut self.budget;
        let present = pattern.iter().enumerate().filter_map(|(j, line)| {
            let id = *index.ids.get(&pass.key(line))?;
            Some((j, index.positions[id as usize].as_slice()))
        });
        let file: Vec<&str> = self.lines.iter().map(|l| l.content).collect();
        let region = match nearest::by_votes(present, from, last, &mut || budget.tick())? {
            Some(region) => Some(region),
            None => nearest::by_similarity(&file, pattern, from, last, &mut || budget.tick())?,
        };
        Ok(region.map(|region| nearest::describe(&file, pattern, region)))
    }
}

/// Where a hunk's body goes: the body used (possibly without its trailing
/// blank lines), the original lines it replaces and the pass that found
/// them.
struct Placed<'h> {
    body: &'h [HunkLine],
    start: usize,
    end: usize,
    pass: MatchPass,
}

/// The hunk being placed, for messages.
struct Where<'a> {
    path: &'a str,
    /// 1-based hunk number within the update.
    number: usize,
    hunk: &'a Hunk,
}

impl Where<'_> {
    /// Places a hunk body after `cursor` (see the module docs, steps 2–3).
    fn place<'h>(
        &self,
        search: &mut Search<'_, '_>,
        cursor: usize,
        body: &'h [HunkLine],
    ) -> Result<Placed<'h>, PatchError> {
        let old: Vec<&str> = old_lines(body).collect();
        if old.is_empty() {
            let hunk = self.hunk;
            let at = if hunk.contexts.is_empty() || hunk.end_of_file {
                search.lines.len()
            } else {
                cursor
            };
            return Ok(Placed { body, start: at, end: at, pass: MatchPass::Exact });
        }
        let target = if self.hunk.end_of_file { Target::BodyAtEnd } else { Target::Body };
        let (start, pass) = self.locate(search, cursor, &old, target)?;
        Ok(Placed { body, start, end: start + old.len(), pass })
    }

    /// Finds the unique start of `pattern` after `from` (only the block
    /// ending the file for [`Target::BodyAtEnd`]) under the first pass
    /// that finds any, or the error saying why not.
    fn locate(
        &self,
        search: &mut Search<'_, '_>,
        from: usize,
        pattern: &[&str],
        target: Target,
    ) -> Result<(usize, MatchPass), PatchError> {
        let at_end = target == Target::BodyAtEnd;
        for pass in MatchPass::ALL {
            let found = search.find(from, pattern, at_end, pass)?;
            match found.count {
                0 => continue,
                1 => return Ok((found.first[0], pass)),
                _ => return Err(self.ambiguous(pattern, target, &found, pass)),
            }
        }
        // A block that exists only before the cursor is a hunk out of order
        // or overlapping its predecessor; say so, it is the likely fix.
        let mut earlier = false;
        if from > 0 && !at_end {
            for pass in MatchPass::ALL {
                if search.find(0, pattern, false, pass)?.count > 0 {
                    earlier = true;
                    break;
                }
            }
        }
        let near = if earlier { None } else { search.near_miss(from, pattern, at_end)? };
        Err(self.not_found(from, pattern, target, earlier, near))
    }

    /// How the `+` lines of `body` (placed at file line `start` by a pass
    /// that ignored leading whitespace) are re-indented, if at all.
    fn indentation(
        &self,
        search: &mut Search<'_, '_>,
        body: &[HunkLine],
        start: usize,
    ) -> Result<Option<Mapping>, PatchError> {
        if !body.iter().any(|l| matches!(l, HunkLine::Add(_))) {
            return Ok(None);
        }
        let style = search.style()?;
        let lines = search.lines;
        let pairs = lines[start..].iter().map(|l| l.content).zip(old_lines(body));
        let hunk = body.iter().map(|l| match l {
            HunkLine::Context(t) | HunkLine::Remove(t) | HunkLine::Add(t) => t.as_str(),
        });
        let added = body.iter().filter_map(|l| match l {
            HunkLine::Add(t) => Some(t.as_str()),
            _ => None,
        });
        Mapping::learn(pairs, style, hunk, added).map_err(|e| self.unindentable(&e.line))
    }

    fn unindentable(&self, line: &str) -> PatchError {
        PatchError::new(
            ErrorCode::PatchIndentationAmbiguous,
            format!(
                "{}: the hunk matched only by ignoring indentation, and its indentation cannot \
                 be mapped consistently onto the file's (first line that does not fit: {}); \
                 re-read the file and write the hunk with the file's own indentation",
                self.prefix(),
                quote(line),
            ),
        )
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
        found: &Matches,
        pass: MatchPass,
    ) -> PatchError {
        let mut numbers: Vec<String> =
            found.first.iter().take(LISTED_CANDIDATES).map(|s| (s + 1).to_string()).collect();
        if found.count > LISTED_CANDIDATES {
            numbers.push("…".to_owned());
        }
        PatchError::new(
            ErrorCode::PatchContextAmbiguous,
            format!(
                "{}: {} found at {} places ({} match): lines {}; add context lines (or an '@@' \
                 line naming the enclosing block) so that it matches exactly one place",
                self.prefix(),
                Self::what(pattern, target),
                found.count,
                pass.as_str(),
                numbers.join(", ")
            ),
        )
    }

    fn not_found(
        &self,
        from: usize,
        pattern: &[&str],
        target: Target,
        earlier: bool,
        near: Option<String>,
    ) -> PatchError {
        let at_end = target == Target::BodyAtEnd;
        let place = match (at_end, from) {
            (true, _) => "at the end of the file ('*** End of File')".to_owned(),
            (false, 0) => "in the file".to_owned(),
            (false, from) => format!("after line {from}"),
        };
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
                 current content{}",
                self.prefix(),
                Self::what(pattern, target),
                near.map(|n| format!("; {n}")).unwrap_or_default(),
            ),
        )
    }
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
        assert_eq!(got.0, "a\nb\nx");
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
    fn end_of_file_state_is_kept_whatever_line_ends_up_last() {
        assert_eq!(plan("a\nb", &[hunk(&[], "-a\n+A")]).unwrap().0, "A\nb");
        assert_eq!(plan("a\nb", &[hunk(&[], " a\n b\n+c")]).unwrap().0, "a\nb\nc");
        assert_eq!(plan("a\nb", &[hunk(&[], "-b\n+B")]).unwrap().0, "a\nB");
        assert_eq!(plan("a\r\nb", &[hunk(&[], "-b\n+B\n+C")]).unwrap().0, "a\r\nB\r\nC");
        assert_eq!(plan("a\nb", &[hunk(&[], "-b")]).unwrap().0, "a");
        assert_eq!(plan("a\nb\n", &[hunk(&[], "-b\n+B")]).unwrap().0, "a\nB\n");
        assert_eq!(plan("a\nb\n", &[hunk(&[], "-b")]).unwrap().0, "a\n");
        assert_eq!(plan("", &[hunk(&[], "+x")]).unwrap().0, "x\n");
    }

    #[test]
    fn a_trailing_blank_context_line_is_dropped_when_it_is_not_found() {
        let mut h = hunk(&[], "-b\n+B");
        h.lines.push(HunkLine::Context(String::new()));
        assert_eq!(
            plan("a\nb\n", &[h.clone()]).unwrap(),
            ("a\nB\n".into(), vec![(MatchPass::Exact, 2)])
        );
        // Found with the blank line: it is kept as context.
        assert_eq!(plan("a\nb\n\nc\n", &[h.clone()]).unwrap().0, "a\nB\n\nc\n");
        // Still not found without it: the first error is reported.
        fails("a\n", &[h], PatchContextNotFound, "starting with \"b\"");
        // Only blank context left: an add-only hunk, appended.
        let mut h = hunk(&[], "+x");
        h.lines.push(HunkLine::Context(String::new()));
        assert_eq!(plan("a\n", &[h]).unwrap().0, "a\nx\n");
    }

    #[test]
    fn repeated_lines_are_found_in_linear_steps() {
        // The quadratic case of a line-by-line scan: a block of 2,000
        // identical lines, then one that differs, in a file of 100,000 of
        // them. Steps are counted through `stop`; a scan comparing the
        // block at every start would take 10^8.
        let file = "x\n".repeat(100_000);
        let body = format!("{}-y\n", "-x\n".repeat(2_000));
        let calls = std::cell::Cell::new(0u64);
        let stop = || {
            calls.set(calls.get() + 1);
            false
        };
        let e = plan_update_until(file.as_bytes(), &[hunk(&[], &body)], "f", &stop).unwrap_err();
        assert_eq!(e.code(), PatchContextNotFound, "{e}");
        assert!(calls.get() * u64::from(STEPS_PER_POLL) < 5_000_000, "{} polls", calls.get());
        let mut tail = hunk(&[], &"-x\n".repeat(2_000));
        tail.end_of_file = true;
        let planned = plan_update(file.as_bytes(), &[tail], "f").unwrap();
        assert_eq!(planned.bytes.len(), file.len() - 4_000);
        fails(&file, &[hunk(&[], &"-x\n".repeat(2_000))], PatchContextAmbiguous, "98001 places");
    }

    #[test]
    fn stop_ends_planning_with_timeout() {
        let file = "x\n".repeat(100_000);
        let e = plan_update_until(file.as_bytes(), &[hunk(&[], "-y")], "f", &|| true).unwrap_err();
        assert_eq!(e.code(), Timeout, "{e}");
        assert!(e.message().contains("nothing was written"), "{e}");
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
