//! Python's indentation rules, which tree-sitter-python does not enforce:
//! it parses a line indented a level too deep as one more statement of the
//! block, and a block opener followed by no indented line as an empty
//! block, where Python refuses both. This pass finds what CPython's
//! tokenizer calls `unexpected indent`, `unindent does not match any outer
//! indentation level` and `expected an indented block`.
//!
//! It follows the tokenizer's logical lines: a line inside brackets, a
//! string or after a backslash continues the previous one and is not an
//! indentation; blank and comment-only lines are skipped. A tab advances
//! the column to the next multiple of 8, as in CPython. After an error it
//! goes on as if the line's indentation were legal, so one mistake gives
//! one error. Known gap: quotes nested inside an f-string's braces
//! (Python 3.12) are read as the string's end.

use crate::SyntaxError;

pub(crate) fn errors(text: &[u8], out: &mut Vec<SyntaxError>) {
    let text = String::from_utf8_lossy(text);
    let mut levels = vec![0usize];
    let mut scan = Scan::default();
    // The line of a block opener (`…:`) whose block has not started.
    let mut opener: Option<usize> = None;
    for (row, line) in text.lines().enumerate() {
        if scan.continues() {
            scan.line(line);
            opener = opener.or(scan.opens_block().then_some(row));
            continue;
        }
        let body = line.trim_start_matches([' ', '\t', '\x0c']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let width = width(&line[..line.len() - body.len()]);
        let top = *levels.last().unwrap_or(&0);
        let message = if opener.take().is_some() {
            if width > top {
                levels.push(width);
                None
            } else {
                Some("expected an indented block")
            }
        } else if width > top {
            levels.push(width);
            Some("unexpected indent")
        } else {
            while width < *levels.last().unwrap_or(&0) {
                levels.pop();
            }
            if width == *levels.last().unwrap_or(&0) {
                None
            } else {
                levels.push(width);
                Some("unindent does not match any outer indentation level")
            }
        };
        if let Some(message) = message {
            let column = line.chars().count() - body.chars().count() + 1;
            out.push(SyntaxError {
                line: row + 1,
                column,
                message: message.to_owned(),
                text: crate::shown_line(line),
            });
        }
        scan.line(line);
        opener = scan.opens_block().then_some(row);
    }
}

/// The indentation width of `indent` (spaces, tabs to the next multiple
/// of 8, form feeds reset).
fn width(indent: &str) -> usize {
    indent.chars().fold(0, |w, c| match c {
        '\t' => (w / 8 + 1) * 8,
        '\x0c' => 0,
        _ => w + 1,
    })
}

/// Tokenizer state carried from one physical line to the next.
#[derive(Default)]
struct Scan {
    /// Open brackets.
    depth: usize,
    /// Inside a string: its quote and whether it is triple-quoted.
    string: Option<(char, bool)>,
    /// The line ended with a backslash outside a string.
    backslash: bool,
    /// The last significant character of the logical line so far.
    last: Option<char>,
}

impl Scan {
    fn continues(&self) -> bool {
        self.depth > 0 || self.backslash || matches!(self.string, Some((_, true)))
    }

    /// The logical line is complete and ends with `:`: a block follows.
    fn opens_block(&self) -> bool {
        !self.continues() && self.last == Some(':')
    }

    fn line(&mut self, line: &str) {
        if !self.continues() {
            self.last = None;
        }
        self.backslash = false;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some((quote, triple)) = self.string {
                if c == '\\' {
                    if i + 1 == chars.len() {
                        // A backslash-newline continues even a short string.
                        self.backslash = true;
                        return;
                    }
                    i += 2;
                    continue;
                }
                if c == quote && (!triple || chars.get(i + 1..i + 3) == Some(&[quote, quote])) {
                    self.string = None;
                    self.last = Some(c);
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                i += 1;
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => {
                    let triple = chars.get(i + 1..i + 3) == Some(&[c, c]);
                    self.string = Some((c, triple));
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                '\\' if i + 1 == chars.len() => {
                    self.backslash = true;
                    return;
                }
                _ => {}
            }
            if !c.is_whitespace() {
                self.last = Some(c);
            }
            i += 1;
        }
        // A short string ends at the end of its line (unterminated: the
        // parser reports it).
        if matches!(self.string, Some((_, false))) {
            self.string = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(src: &str) -> Vec<(usize, usize, String)> {
        let mut out = Vec::new();
        errors(src.as_bytes(), &mut out);
        out.into_iter().map(|e| (e.line, e.column, e.message)).collect()
    }

    #[test]
    fn valid_python_has_no_indentation_error() {
        let src = r#"
import os

class A(Base):  # comment
    """Doc
  with a line less indented."""

    def f(self, x: int) -> dict:
        d = {
  'a': 1,
            'b': [x,
      2],
        }
        s = 'a:' \
            'b'
        if x: return d
        elif (x >
   1):
            pass
        else:
            # comment at any indentation
    # here too
            return {k: v for k, v in d.items() if k[1:]}
	
    @property
    def g(self): ...

match x:
    case 1:
        pass
"#;
        assert_eq!(found(src), vec![]);
    }

    #[test]
    fn each_rule_is_found_once_at_its_line() {
        assert_eq!(
            found("def f():\n    x = 1\n        y = 2\n    return x\n"),
            vec![(3, 9, "unexpected indent".to_owned())]
        );
        assert_eq!(
            found("if x:\n    a = 1\n  b = 2\n"),
            vec![(3, 3, "unindent does not match any outer indentation level".to_owned())]
        );
        assert_eq!(
            found("def f():\nreturn 1\n"),
            vec![(2, 1, "expected an indented block".to_owned())]
        );
        // A tab is 8 columns: the same level as 8 spaces.
        assert_eq!(found("if x:\n\ta = 1\n        b = 2\n"), vec![]);
    }
}
