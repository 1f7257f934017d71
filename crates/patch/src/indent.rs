//! Re-indenting a hunk's `+` lines to the file's indentation, for a hunk
//! that matched only once leading whitespace was ignored.
//!
//! Guarantees:
//! - A hunk whose old lines carry the same leading whitespace as the file
//!   lines they matched is written exactly as given (nothing to learn).
//! - Otherwise each side's indentation style (tabs, or spaces of a
//!   width) is detected — the file's from the whole file, the patch's from
//!   the hunk — and each indentation read as *levels* of that style plus
//!   alignment spaces. The old lines must all sit the same number of
//!   levels deeper (or shallower) in the file than in the patch, with the
//!   same alignment; the `+` lines are then written at their patch level
//!   plus that offset, in the file's style.
//! - When no such consistent mapping exists (offsets differ between
//!   lines, an indentation mixes spaces before tabs, alignment differs),
//!   the `+` lines are written as given if each of them already fits the
//!   file's style (no tab in a spaces file, no space in a tabs file) —
//!   a model that wrote its `-` lines flat and its `+` lines right —
//!   and the hunk is refused with `PATCH_INDENTATION_AMBIGUOUS` otherwise
//!   (as when a `+` line would land left of column 0): never mixed
//!   indentation written.
//!
//! Cost: the file's style is detected once per file (one pass over its
//! lines); a hunk costs one pass over its own lines.

use std::borrow::Cow;

/// An indentation style: what one level is (a re-indented hunk reports
/// the file's, [`crate::HunkReport::reindented`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Tabs,
    /// Spaces, this many per level.
    Spaces(usize),
}

impl Style {
    /// How answers name it: `tabs`, `4 spaces`.
    pub fn describe(self) -> String {
        match self {
            Self::Tabs => "tabs".to_owned(),
            Self::Spaces(1) => "1 space".to_owned(),
            Self::Spaces(n) => format!("{n} spaces"),
        }
    }

    /// Reads `lead` (a line's leading tabs and spaces) as levels and
    /// alignment spaces; `None` when it does not fit the style (spaces
    /// before a tab, or tabs in a spaces style).
    fn levels(self, lead: &str) -> Option<(usize, usize)> {
        let tabs = lead.bytes().take_while(|&b| b == b'\t').count();
        let spaces = lead.len() - tabs;
        if lead[tabs..].bytes().any(|b| b != b' ') {
            return None;
        }
        match self {
            Self::Tabs => Some((tabs, spaces)),
            Self::Spaces(_) if tabs > 0 => None,
            Self::Spaces(width) => Some((spaces / width, spaces % width)),
        }
    }

    /// Whether `lead` is written in this style with nothing to guess: no
    /// space in a tabs file, no tab in a spaces file.
    fn fits(self, lead: &str) -> bool {
        match self {
            Self::Tabs => !lead.contains(' '),
            Self::Spaces(_) => !lead.contains('\t'),
        }
    }

    fn render(self, levels: usize, align: usize, out: &mut String) {
        match self {
            Self::Tabs => out.extend(std::iter::repeat_n('\t', levels)),
            Self::Spaces(width) => out.extend(std::iter::repeat_n(' ', levels * width)),
        }
        out.extend(std::iter::repeat_n(' ', align));
    }
}

/// A line's leading tabs and spaces, and the rest; `None` for a blank line.
fn split(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start_matches([' ', '\t']);
    (!rest.is_empty()).then(|| (&line[..line.len() - rest.len()], rest))
}

/// The indentation style of `lines`: tabs when more indented lines start
/// with a tab than with a space, else spaces of the most frequent step
/// between consecutive lines' indentation (the smaller one on a tie).
/// `None` when no line is indented.
pub(crate) fn detect<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Style> {
    const MAX_STEP: usize = 16;
    let (mut tabbed, mut spaced) = (0usize, 0usize);
    let mut steps = [0usize; MAX_STEP + 1];
    let mut previous = 0usize;
    for line in lines {
        let Some((lead, _)) = split(line) else { continue };
        match lead.as_bytes().first() {
            Some(b'\t') => tabbed += 1,
            Some(_) if !lead.contains('\t') => {
                spaced += 1;
                let step = lead.len().abs_diff(previous);
                if (1..=MAX_STEP).contains(&step) {
                    steps[step] += 1;
                }
                previous = lead.len();
            }
            Some(_) => spaced += 1,
            None => previous = 0,
        }
    }
    if tabbed == 0 && spaced == 0 {
        return None;
    }
    if tabbed >= spaced {
        return Some(Style::Tabs);
    }
    let width = (1..=MAX_STEP).rev().max_by_key(|&w| steps[w]).filter(|&w| steps[w] > 0);
    Some(Style::Spaces(width.unwrap_or(4)))
}

/// Why a hunk cannot be re-indented: the first line that does not fit.
#[derive(Debug)]
pub(crate) struct NoMapping {
    /// The patch line (old or `+`) that breaks the mapping.
    pub(crate) line: String,
}

/// How one hunk's `+` lines are re-indented.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mapping {
    patch: Style,
    file: Style,
    /// File levels minus patch levels, the same for every old line.
    offset: isize,
}

impl Mapping {
    /// Learns the mapping from `pairs` (each old line of the hunk beside
    /// the file line it matched). `Ok(None)`: the `+` lines are written as
    /// given (see the module docs).
    ///
    /// `file_style` is the whole file's ([`detect`]); `hunk` is every line
    /// of the hunk (old and new), from which the patch's style is learned;
    /// `added` its `+` lines.
    pub(crate) fn learn<'a>(
        pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone,
        file_style: Option<Style>,
        hunk: impl IntoIterator<Item = &'a str>,
        mut added: impl Iterator<Item = &'a str>,
    ) -> Result<Option<Self>, NoMapping> {
        let differs = pairs.clone().any(|(file, patch)| match (split(file), split(patch)) {
            (Some((f, _)), Some((p, _))) => f != p,
            _ => false,
        });
        if !differs {
            return Ok(None);
        }
        let patch_style = detect(hunk).unwrap_or(Style::Spaces(4));
        let file_style = file_style.unwrap_or(patch_style);
        let offset = match Self::offset(pairs, file_style, patch_style) {
            Ok(offset) => offset,
            Err(no) => {
                let fits = added.all(|l| split(l).is_none_or(|(lead, _)| file_style.fits(lead)));
                return if fits { Ok(None) } else { Err(no) };
            }
        };
        if offset == 0 && file_style == patch_style {
            return Ok(None);
        }
        Ok(Some(Self { patch: patch_style, file: file_style, offset }))
    }

    /// File levels minus patch levels, when it is the same for every pair
    /// (and the alignment spaces agree).
    fn offset<'a>(
        pairs: impl Iterator<Item = (&'a str, &'a str)>,
        file_style: Style,
        patch_style: Style,
    ) -> Result<isize, NoMapping> {
        let mut offset = None;
        for (file, patch) in pairs {
            let (Some((f, _)), Some((p, _))) = (split(file), split(patch)) else { continue };
            let no = || NoMapping { line: patch.to_owned() };
            let (fl, fa) = file_style.levels(f).ok_or_else(no)?;
            let (pl, pa) = patch_style.levels(p).ok_or_else(no)?;
            let this = fl as isize - pl as isize;
            if fa != pa || offset.is_some_and(|o| o != this) {
                return Err(no());
            }
            offset = Some(this);
        }
        Ok(offset.unwrap_or(0))
    }

    /// The file's style, as answers name it.
    pub(crate) fn target(&self) -> Style {
        self.file
    }

    /// `line` (a `+` line) at its patch level plus the offset, in the
    /// file's style. Blank lines are kept as given.
    pub(crate) fn apply<'a>(&self, line: &'a str) -> Result<Cow<'a, str>, NoMapping> {
        let Some((lead, rest)) = split(line) else { return Ok(Cow::Borrowed(line)) };
        let no = || NoMapping { line: line.to_owned() };
        let (levels, align) = self.patch.levels(lead).ok_or_else(no)?;
        let levels = usize::try_from(levels as isize + self.offset).map_err(|_| no())?;
        let mut out = String::with_capacity(line.len() + levels);
        self.file.render(levels, align, &mut out);
        out.push_str(rest);
        Ok(Cow::Owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_detected_from_steps_not_from_absolute_depth() {
        assert_eq!(detect(["a", "\tb", "\t\tc"]), Some(Style::Tabs));
        assert_eq!(detect(["a", "    b", "        c", "    d"]), Some(Style::Spaces(4)));
        assert_eq!(detect(["a:", "  b:", "    c: 1"]), Some(Style::Spaces(2)));
        // One deep line alone: its depth is the step.
        assert_eq!(detect(["x", "        y"]), Some(Style::Spaces(8)));
        assert_eq!(detect(["a", "", "b"]), None);
    }

    fn learn(pairs: &[(&'static str, &'static str)], file: &[&'static str]) -> Mapping {
        let hunk: Vec<&str> = pairs.iter().map(|p| p.1).collect();
        Mapping::learn(
            pairs.iter().copied(),
            detect(file.iter().copied()),
            hunk,
            std::iter::empty(),
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn spaces_in_the_patch_become_the_files_tabs() {
        let m = learn(&[("def f():", "def f():"), ("\tx = 1", "    x = 1")], &["\tx", "\t\ty"]);
        assert_eq!(m.apply("    y = 2").unwrap(), "\ty = 2");
        assert_eq!(m.apply("        z").unwrap(), "\t\tz");
        assert_eq!(m.apply("").unwrap(), "");
        assert_eq!(m.target().describe(), "tabs");
    }

    #[test]
    fn a_dedented_snippet_is_shifted_to_where_it_matched() {
        let file = ["class A:", "    def f(self):", "        return 1"];
        let m = learn(
            &[("    def f(self):", "def f(self):"), ("        return 1", "    return 1")],
            &file,
        );
        assert_eq!(m.apply("    return 2").unwrap(), "        return 2");
        assert_eq!(m.apply("def g(self):").unwrap(), "    def g(self):");
    }

    #[test]
    fn the_same_indentation_on_both_sides_needs_nothing() {
        let pairs = [("\tx  ", "\tx"), ("\ty", "\ty ")];
        let learnt =
            Mapping::learn(pairs.iter().copied(), Some(Style::Tabs), ["\tx"], ["  z"].into_iter());
        assert!(learnt.unwrap().is_none());
    }

    #[test]
    fn inconsistent_offsets_keep_fitting_lines_and_refuse_the_rest() {
        // The first line one level deeper in the file, the second not.
        let pairs = [("\ta", "a"), ("\tb", "\tb"), ("\t\tc", "    c")];
        let hunk = || pairs.iter().map(|p| p.1);
        let tabs = Some(Style::Tabs);
        let err = Mapping::learn(pairs.iter().copied(), tabs, hunk(), ["    d"].into_iter());
        assert_eq!(err.unwrap_err().line, "\tb");
        // `+` lines already in the file's style are written as given.
        let kept = Mapping::learn(pairs.iter().copied(), tabs, hunk(), ["\t\td", ""].into_iter());
        assert!(kept.unwrap().is_none());
        // A + line left of column 0.
        let m = learn(&[("a", "    a")], &["a", "  b"]);
        assert!(m.apply("b").is_err());
    }
}
