//! The four line-matching passes, from strict to lenient.
//!
//! A pass reads a line as a key ([`MatchPass::key`]); a file line and a
//! patch line are equal under the pass when their keys are. Each pass
//! accepts every pair the pass before it accepts, so "the first pass with
//! a match" is well defined. The planner (`plan.rs`) interns the keys once
//! per file and decides uniqueness; this file only defines the keys.

use std::borrow::Cow;

/// The pass that matched a hunk, from strict to lenient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchPass {
    /// Byte-for-byte equal lines (line endings aside).
    Exact,
    /// Equal once trailing whitespace is ignored.
    TrailingWhitespace,
    /// Equal once leading and trailing whitespace is ignored.
    Whitespace,
    /// Equal once surrounding whitespace is ignored and typographic
    /// characters are read as ASCII: curly quotes as `'` and `"`, Unicode
    /// dashes as `-`, non-breaking and other Unicode spaces as a space.
    Typography,
}

impl MatchPass {
    /// Every pass, in the order they are tried.
    pub const ALL: [MatchPass; 4] =
        [Self::Exact, Self::TrailingWhitespace, Self::Whitespace, Self::Typography];

    /// A short name for messages and reports, e.g. `trailing-whitespace`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::TrailingWhitespace => "trailing-whitespace",
            Self::Whitespace => "whitespace",
            Self::Typography => "typography",
        }
    }

    /// The line as this pass sees it: two lines are the same under the
    /// pass exactly when their keys are equal. Borrowed unless a
    /// typographic character had to be rewritten.
    pub(crate) fn key(self, line: &str) -> Cow<'_, str> {
        match self {
            Self::Exact => Cow::Borrowed(line),
            Self::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
            Self::Whitespace => Cow::Borrowed(line.trim()),
            Self::Typography => {
                let line = line.trim();
                if line.chars().all(|c| to_ascii(c) == c) {
                    Cow::Borrowed(line)
                } else {
                    Cow::Owned(line.chars().map(to_ascii).collect())
                }
            }
        }
    }

    /// Whether `file` and `patch` are the same line under this pass.
    #[cfg(test)]
    fn lines_equal(self, file: &str, patch: &str) -> bool {
        self.key(file) == self.key(patch)
    }
}

/// The ASCII reading of a typographic character (identity otherwise).
fn to_ascii(c: char) -> char {
    match c {
        // Single quotes: ‘ ’ ‚ ‛ and the prime-like ′.
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        // Double quotes: “ ” „ ‟ and the double prime ″.
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
        // Hyphen, non-breaking hyphen, figure dash, en, em, horizontal bar,
        // and the minus sign.
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        // No-break space, the en/em/thin/hair spaces, narrow no-break,
        // medium mathematical and ideographic space.
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::MatchPass::*;
    use super::*;

    #[test]
    fn each_pass_is_more_lenient_than_the_last() {
        let cases = [
            ("a b", "a b", Exact),
            ("a b  \t", "a b", TrailingWhitespace),
            ("  a b", "a b ", Whitespace),
            ("\u{a0}x = \u{201C}it\u{2019}s\u{201D} \u{2014} y", "x = \"it's\" - y", Typography),
            ("a\u{2003}b", "a b", Typography),
        ];
        for (file, patch, first) in cases {
            for pass in MatchPass::ALL {
                assert_eq!(pass.lines_equal(file, patch), pass >= first, "{file:?} {pass:?}");
            }
        }
    }

    #[test]
    fn different_text_never_matches() {
        for pass in MatchPass::ALL {
            assert!(!pass.lines_equal("a b", "a  b"), "{pass:?}");
            assert!(!pass.lines_equal("x", "y"), "{pass:?}");
            assert!(!pass.lines_equal("'", "`"), "{pass:?}");
        }
    }
}
