//! `parse`: patch text → [`Patch`], checking grammar, limits and paths.
//!
//! The grammar (Codex's `apply_patch`, with its lenient edges):
//!
//! ```text
//! [blank lines] [heredoc opener: <<'EOF', apply_patch <<'EOF' or cd <dir> && apply_patch <<'EOF']
//! *** Begin Patch
//! ( *** Add File: <path>       then lines starting with '+'
//! | *** Delete File: <path>
//! | *** Update File: <path>    then [*** Move to: <path>] and hunks )*
//! *** End Patch
//! [blank lines] [the heredoc delimiter, when opened] [blank lines]
//! ```
//!
//! A hunk is one or more `@@` / `@@ <context>` lines, then body lines
//! starting with ` `, `-` or `+`, then optionally `*** End of File`. An
//! empty body line counts as an empty context line, as in Codex. The first
//! hunk of an update may leave out `@@`. Blank lines between operations
//! are ignored. `*** Begin Patch`, `*** End Patch` and the three operation
//! headers are recognised with surrounding whitespace trimmed. `*** Move
//! to:` and `*** End of File` are recognised only at the start of a line,
//! with trailing whitespace ignored, because an indented one is a context
//! line. Paths are trimmed.
//!
//! The heredoc opener is the shell form models copy from their shell tool
//! (as Codex reads it): an optional `cd <dir> &&` (one plain, `'…'` or
//! `"…"` word), then `apply_patch` or `applypatch`, then `<<` or `<<-` and
//! a delimiter, and nothing else on the line; or the bare `<<DELIM`. With
//! `cd <dir>`, every relative path of the patch is read as `<dir>/<path>`
//! (the caller's resolver still confines it to the root). Any other line
//! with `<<` before `*** Begin Patch` (`cd dir;`, `||`, `echo … &&`,
//! `apply_patch file <<`, a pipe) is refused with `PATCH_SYNTAX`: it would
//! mean something else to a shell.
//!
//! `*** End Patch` may carry surrounding whitespace even where an indented
//! line would otherwise be a hunk line: the last non-blank line of the
//! text (before the heredoc delimiter) ends the patch when it reads
//! `*** End Patch` once trimmed.
//!
//! Line numbers in messages are 1-based and count the physical lines of
//! the text as received. `*** Begin Patch` is line 1 when it opens the
//! text. When a heredoc opener or blank lines come before it, they are
//! counted too, so the numbers always match what the caller sent.
//! CRLF line endings in the patch are accepted, and the CR is never part
//! of a line's content.

use std::collections::HashMap;

use serverfs_core::ErrorCode;

use crate::error::{PatchError, quote};
use crate::{Hunk, HunkLine, Operation, Patch, PatchLimits};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

const EXPECTED_HUNK_LINE: &str = "expected a hunk line starting with ' ', '-', '+' or '@@'";

/// Parses a patch and checks it against `limits`.
///
/// Errors: `PATCH_TOO_LARGE` when the text is over `max_patch_bytes` or
/// has more than `max_operations` operations; `PATCH_SYNTAX` naming the
/// 1-based line and what was expected there (see the module docs for the
/// numbering); `PATCH_CONFLICT` when a path appears twice, whether as a
/// source or as a move target.
pub fn parse(text: &str, limits: &PatchLimits) -> Result<Patch, PatchError> {
    if text.len() > limits.max_patch_bytes {
        return Err(PatchError::new(
            ErrorCode::PatchTooLarge,
            format!(
                "the patch is {} bytes, over the limit of {} bytes; split it into several patches",
                text.len(),
                limits.max_patch_bytes
            ),
        ));
    }
    // An editor's BOM is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines: Vec<&str> =
        text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    // The piece after a final newline is not a line (nor is an empty text).
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    Parser { lines, pos: 0, end: None, limits, seen: HashMap::new() }.patch()
}

struct Parser<'a> {
    lines: Vec<&'a str>,
    /// Index of the next line; its 1-based number is `pos + 1`.
    pos: usize,
    /// Index of the closing `*** End Patch` line when it is the last
    /// non-blank line, indented or not; hunk bodies stop there.
    end: Option<usize>,
    limits: &'a PatchLimits,
    /// Every path met so far (sources and move targets) → its line.
    seen: HashMap<String, usize>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.pos).copied()
    }

    fn line_no(&self) -> usize {
        self.pos + 1
    }

    /// What stands at the current line, for "found …" in messages.
    fn found(&self) -> String {
        self.peek().map_or_else(|| "the end of the patch text".to_owned(), quote)
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|l| l.trim().is_empty()) {
            self.pos += 1;
        }
    }

    fn patch(mut self) -> Result<Patch, PatchError> {
        self.skip_blank();
        let opener = match self.peek().and_then(heredoc_opener) {
            Some(Ok(opener)) => Some(opener),
            Some(Err(())) => {
                return Err(self.expected(
                    "a heredoc opener must be `apply_patch <<'EOF'`, `cd <dir> && apply_patch \
                     <<'EOF'` or `<<'EOF'` alone on its line; send the patch text alone \
                     otherwise",
                ));
            }
            None => None,
        };
        let heredoc = opener.as_ref().map(|o| o.delimiter);
        if opener.is_some() {
            self.pos += 1;
            self.skip_blank();
        }
        self.end = self.closing_line(heredoc);
        if self.peek().map(str::trim) != Some(BEGIN) {
            return Err(self.expected(&format!("expected '{BEGIN}'")));
        }
        self.pos += 1;

        let mut operations = Vec::new();
        loop {
            let Some(line) = self.peek() else {
                return Err(self.expected(&format!(
                    "expected an '*** Add File:', '*** Delete File:' or '*** Update File:' \
                     header or '{END}'"
                )));
            };
            let trimmed = line.trim();
            if trimmed == END {
                self.pos += 1;
                break;
            }
            if trimmed.is_empty() {
                self.pos += 1;
                continue;
            }
            if operations.len() >= self.limits.max_operations {
                return Err(PatchError::new(
                    ErrorCode::PatchTooLarge,
                    format!(
                        "line {}: the patch has more than {} file operations, the limit; \
                         split it into several patches",
                        self.line_no(),
                        self.limits.max_operations
                    ),
                ));
            }
            let op = if let Some(rest) = trimmed.strip_prefix(ADD) {
                self.add(rest)?
            } else if let Some(rest) = trimmed.strip_prefix(DELETE) {
                let line = self.line_no();
                let path = self.path(rest, DELETE)?;
                self.pos += 1;
                Operation::Delete { path, line }
            } else if let Some(rest) = trimmed.strip_prefix(UPDATE) {
                self.update(rest)?
            } else {
                return Err(self.expected(
                    "expected an '*** Add File:', '*** Delete File:' or '*** Update File:' \
                     header or '*** End Patch'",
                ));
            };
            operations.push(op);
        }

        self.skip_blank();
        if let Some(delimiter) = heredoc {
            if self.peek().map(str::trim) != Some(delimiter) {
                return Err(self.expected(&format!(
                    "expected the heredoc delimiter {} after '{END}'",
                    quote(delimiter)
                )));
            }
            self.pos += 1;
            self.skip_blank();
        }
        if self.peek().is_some() {
            return Err(self.expected(&format!("expected nothing after '{END}'")));
        }
        if let Some(dir) = opener.and_then(|o| o.workdir) {
            for op in &mut operations {
                in_workdir(op, dir);
            }
        }
        Ok(Patch { operations })
    }

    /// The index of the last non-blank line (before the heredoc delimiter,
    /// when there is one) if it is `*** End Patch` once trimmed.
    fn closing_line(&self, heredoc: Option<&str>) -> Option<usize> {
        let mut last = self.lines.len();
        let skip_blank = |mut last: usize| {
            while last > self.pos && self.lines[last - 1].trim().is_empty() {
                last -= 1;
            }
            last
        };
        last = skip_blank(last);
        if let Some(delimiter) = heredoc
            && last > self.pos
            && self.lines[last - 1].trim() == delimiter
        {
            last = skip_blank(last - 1);
        }
        (last > self.pos && self.lines[last - 1].trim() == END).then(|| last - 1)
    }

    /// Whether the current line is the closing `*** End Patch`.
    fn at_end(&self) -> bool {
        self.end == Some(self.pos)
    }

    /// `expected …, found <current line>` at the current line.
    fn expected(&self, what: &str) -> PatchError {
        PatchError::syntax(self.line_no(), format_args!("{what}, found {}", self.found()))
    }

    /// Checks a header's path (not empty, not seen before) and records it.
    fn path(&mut self, rest: &str, header: &str) -> Result<String, PatchError> {
        let path = rest.trim();
        let line = self.line_no();
        if path.is_empty() {
            return Err(PatchError::syntax(line, format_args!("expected a path after '{header}'")));
        }
        if let Some(first) = self.seen.get(path) {
            return Err(PatchError::new(
                ErrorCode::PatchConflict,
                format!(
                    "line {line}: the path {} appears twice in the patch (first at line {first}); \
                     a file may be named once, as a source or as a move target",
                    quote(path)
                ),
            ));
        }
        self.seen.insert(path.to_owned(), line);
        Ok(path.to_owned())
    }

    fn add(&mut self, rest: &str) -> Result<Operation, PatchError> {
        let line = self.line_no();
        let path = self.path(rest, ADD)?;
        self.pos += 1;
        let mut lines = Vec::new();
        while let Some(added) =
            self.peek().filter(|_| !self.at_end()).and_then(|l| l.strip_prefix('+'))
        {
            lines.push(added.to_owned());
            self.pos += 1;
        }
        Ok(Operation::Add { path, lines, line })
    }

    fn update(&mut self, rest: &str) -> Result<Operation, PatchError> {
        let line = self.line_no();
        let path = self.path(rest, UPDATE)?;
        self.pos += 1;
        let mut move_to = None;
        // Not trimmed at the start: ` *** Move to: x` is a context line.
        if let Some(target) = self.peek().and_then(|l| l.trim_end().strip_prefix(MOVE)) {
            move_to = Some(self.path(target, MOVE)?);
            self.pos += 1;
        }
        let mut hunks = Vec::new();
        while let Some(next) = self.peek().filter(|_| !self.at_end()) {
            // Codex lets the first hunk start without `@@`.
            if next.starts_with("@@") || (hunks.is_empty() && body_line(next).is_some()) {
                hunks.push(self.hunk()?);
            } else {
                break;
            }
        }
        // Whatever ends the hunks must be a header, the end, or a blank
        // line before one; anything else is a malformed hunk line.
        let ends_cleanly = self.peek().is_none_or(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with("***")
        });
        if !ends_cleanly {
            return Err(self.expected(EXPECTED_HUNK_LINE));
        }
        if hunks.is_empty() && move_to.is_none() {
            return Err(self.expected(&format!(
                "{EXPECTED_HUNK_LINE} after '{UPDATE} {path}' (an update with no hunk and no \
                 '{MOVE}' changes nothing)"
            )));
        }
        Ok(Operation::Update { path, move_to, hunks, line })
    }

    fn hunk(&mut self) -> Result<Hunk, PatchError> {
        let patch_line = self.line_no();
        let mut contexts = Vec::new();
        while let Some(rest) = self.peek().and_then(|l| l.strip_prefix("@@")) {
            let context = match rest.strip_prefix(' ') {
                Some(context) => context,
                None if rest.trim().is_empty() => "",
                None => {
                    return Err(self.expected("expected '@@' alone or '@@ ' and a context line"));
                }
            };
            if !context.trim().is_empty() {
                contexts.push(context.to_owned());
            }
            self.pos += 1;
        }
        let mut lines = Vec::new();
        let mut end_of_file = false;
        while let Some(line) = self.peek().filter(|_| !self.at_end()) {
            // Not trimmed at the start: ` *** End of File` is a context line.
            if line.trim_end() == END_OF_FILE {
                self.pos += 1;
                end_of_file = true;
                break;
            }
            let Some(body) = body_line(line) else { break };
            lines.push(body);
            self.pos += 1;
        }
        if lines.is_empty() && !end_of_file {
            return Err(self.expected(EXPECTED_HUNK_LINE));
        }
        if !lines.iter().any(|l| !matches!(l, HunkLine::Context(_))) {
            return Err(PatchError::syntax(
                patch_line,
                "the hunk has no '-' or '+' line, so it changes nothing; remove it (to only \
                 rename a file, give '*** Move to:' and no hunk)",
            ));
        }
        Ok(Hunk { contexts, lines, end_of_file, patch_line })
    }
}

/// A hunk body line, or `None` when the line is not one. An empty line is
/// an empty context line.
fn body_line(line: &str) -> Option<HunkLine> {
    if line.is_empty() {
        return Some(HunkLine::Context(String::new()));
    }
    let (marker, text) = line.split_at_checked(1)?;
    match marker {
        " " => Some(HunkLine::Context(text.to_owned())),
        "-" => Some(HunkLine::Remove(text.to_owned())),
        "+" => Some(HunkLine::Add(text.to_owned())),
        _ => None,
    }
}

/// `path` read inside the `cd` directory of the heredoc opener. An
/// absolute path stays absolute (as a shell would join it), so the
/// caller's resolver refuses it as it refuses any absolute path.
fn in_workdir(op: &mut Operation, dir: &str) {
    let join = |path: &mut String| {
        if !path.starts_with('/') {
            *path = format!("{}/{path}", dir.trim_end_matches('/'));
        }
    };
    match op {
        Operation::Add { path, .. } | Operation::Delete { path, .. } => join(path),
        Operation::Update { path, move_to, .. } => {
            join(path);
            if let Some(target) = move_to {
                join(target);
            }
        }
    }
}

/// A heredoc opener line: its delimiter and the `cd` directory, if any.
#[derive(Debug, PartialEq, Eq)]
struct Opener<'a> {
    delimiter: &'a str,
    workdir: Option<&'a str>,
}

/// `None` for a line that is no opener (no `<<`, or a `***` marker);
/// `Some(Err(()))` for a line with `<<` in a form that is refused.
fn heredoc_opener(line: &str) -> Option<Result<Opener<'_>, ()>> {
    let line = line.trim();
    if line.starts_with("***") || !line.contains("<<") {
        return None;
    }
    Some(parse_opener(line).ok_or(()))
}

/// `[cd <word> &&] [apply_patch|applypatch] <<[-]DELIM`, nothing after
/// (the command is required after a `cd`).
fn parse_opener(line: &str) -> Option<Opener<'_>> {
    let (workdir, rest) = match line.strip_prefix("cd").filter(|r| r.starts_with([' ', '\t'])) {
        Some(after) => {
            let (dir, after) = shell_word(after.trim_start())?;
            let after = after.trim_start().strip_prefix("&&")?.trim_start();
            (Some(dir), apply_command(after)?)
        }
        None => (None, apply_command(line).unwrap_or(line)),
    };
    let rest = rest.strip_prefix("<<")?;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    let (delimiter, tail) = match rest.chars().next()? {
        quote @ ('\'' | '"') => {
            let inner = &rest[1..];
            let close = inner.find(quote)?;
            (&inner[..close], &inner[close + 1..])
        }
        _ => {
            let end =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            rest.split_at(end)
        }
    };
    (!delimiter.is_empty() && tail.trim().is_empty()).then_some(Opener { delimiter, workdir })
}

/// The text after `apply_patch` / `applypatch` and its spaces, when the
/// line starts with the command followed by a space or `<<`.
fn apply_command(text: &str) -> Option<&str> {
    ["apply_patch", "applypatch"].iter().find_map(|name| {
        let after = text.strip_prefix(name)?;
        (after.starts_with(char::is_whitespace) || after.starts_with("<<"))
            .then(|| after.trim_start())
    })
}

/// One shell word that means itself: `'…'`, `"…"` without `$`, `` ` ``
/// or `\`, or plain characters that no shell expands. Returns the word
/// and the rest of the text.
fn shell_word(text: &str) -> Option<(&str, &str)> {
    let (word, rest) = match text.chars().next()? {
        '\'' => {
            let close = text[1..].find('\'')? + 1;
            (&text[1..close], &text[close + 1..])
        }
        '"' => {
            let close = text[1..].find('"')? + 1;
            let word = &text[1..close];
            if word.contains(['$', '`', '\\']) {
                return None;
            }
            (word, &text[close + 1..])
        }
        _ => {
            let plain = |c: char| c.is_alphanumeric() || "-_./+,:@%=".contains(c);
            let end = text.find(|c: char| !plain(c)).unwrap_or(text.len());
            text.split_at(end)
        }
    };
    (!word.is_empty()).then_some((word, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::ErrorCode::*;

    fn ok(text: &str) -> Vec<Operation> {
        match parse(text, &PatchLimits::default()) {
            Ok(p) => p.operations,
            Err(e) => panic!("{text:?}: {e}"),
        }
    }

    /// The error's code and message for a patch that must fail.
    fn err(text: &str) -> (ErrorCode, String) {
        match parse(text, &PatchLimits::default()) {
            Ok(p) => panic!("{text:?} parsed: {p:?}"),
            Err(e) => (e.code(), e.message().to_owned()),
        }
    }

    fn syntax(text: &str, line: usize, needle: &str) {
        let (code, message) = err(text);
        assert_eq!(code, PatchSyntax, "{message}");
        assert!(message.starts_with(&format!("line {line}: ")), "{message}");
        assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    }

    fn ctx(s: &str) -> HunkLine {
        HunkLine::Context(s.into())
    }
    fn rm(s: &str) -> HunkLine {
        HunkLine::Remove(s.into())
    }
    fn add(s: &str) -> HunkLine {
        HunkLine::Add(s.into())
    }

    #[test]
    fn add_file_lines_without_plus() {
        let ops = ok("*** Begin Patch\n*** Add File: a/b.txt\n+one\n+\n+ two\n*** End Patch\n");
        assert_eq!(
            ops,
            [Operation::Add {
                path: "a/b.txt".into(),
                lines: vec!["one".into(), String::new(), " two".into()],
                line: 2
            }]
        );
    }

    #[test]
    fn add_file_may_be_empty() {
        let ops = ok("*** Begin Patch\n*** Add File: e\n*** End Patch");
        assert_eq!(ops, [Operation::Add { path: "e".into(), lines: vec![], line: 2 }]);
    }

    #[test]
    fn delete_file() {
        let ops = ok("*** Begin Patch\n*** Delete File:  x y \n*** End Patch\n");
        assert_eq!(ops, [Operation::Delete { path: "x y".into(), line: 2 }]);
    }

    #[test]
    fn update_with_move_and_hunks() {
        let text = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ class A\n@@ def f\n x\n-y\n+z\n\
                    @@\n-q\n*** End of File\n*** End Patch\n";
        let ops = ok(text);
        let Operation::Update { path, move_to, hunks, line } = &ops[0] else { panic!() };
        assert_eq!((path.as_str(), move_to.as_deref(), *line), ("a", Some("b"), 2));
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].contexts, ["class A", "def f"]);
        assert_eq!(hunks[0].lines, [ctx("x"), rm("y"), add("z")]);
        assert_eq!((hunks[0].patch_line, hunks[0].end_of_file), (4, false));
        assert_eq!(hunks[1].contexts, Vec::<String>::new());
        assert_eq!(hunks[1].lines, [rm("q")]);
        assert_eq!((hunks[1].patch_line, hunks[1].end_of_file), (9, true));
    }

    #[test]
    fn pure_move_needs_no_hunk() {
        let ops = ok("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch\n");
        assert!(matches!(&ops[0], Operation::Update { hunks, .. } if hunks.is_empty()));
    }

    #[test]
    fn first_hunk_may_omit_the_at_at_line() {
        let ops = ok("*** Begin Patch\n*** Update File: a\n x\n-y\n*** End Patch\n");
        let Operation::Update { hunks, .. } = &ops[0] else { panic!() };
        assert_eq!(hunks[0].lines, [ctx("x"), rm("y")]);
        assert_eq!(hunks[0].patch_line, 3);
    }

    #[test]
    fn empty_body_line_is_empty_context() {
        let ops = ok("*** Begin Patch\n*** Update File: a\n@@\n a\n\n-b\n*** End Patch\n");
        let Operation::Update { hunks, .. } = &ops[0] else { panic!() };
        assert_eq!(hunks[0].lines, [ctx("a"), ctx(""), rm("b")]);
    }

    #[test]
    fn crlf_and_trailing_blank_lines_are_accepted() {
        let text = "*** Begin Patch\r\n*** Update File: a\r\n@@ f\r\n-b\r\n+c\r\n*** End Patch\r\n\r\n  \n";
        let ops = ok(text);
        let Operation::Update { hunks, .. } = &ops[0] else { panic!() };
        assert_eq!(hunks[0].contexts, ["f"]);
        assert_eq!(hunks[0].lines, [rm("b"), add("c")]);
    }

    #[test]
    fn heredoc_wrappers_are_accepted() {
        for opener in ["<<'EOF'", "<<EOF", "<<\"EOF\"", "apply_patch <<-EOF", " applypatch<<'EOF' "]
        {
            let text =
                format!("{opener}\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF\n");
            assert_eq!(ok(&text), [Operation::Delete { path: "a".into(), line: 3 }], "{opener}");
        }
    }

    #[test]
    fn heredoc_cd_reads_paths_inside_the_directory() {
        let text = "cd sub/dir && apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: foo\n+x\n\
                    *** Update File: a\n*** Move to: b\n*** Delete File: /abs\n*** End Patch\nPATCH\n";
        let ops = ok(text);
        assert_eq!(ops[0].path(), "sub/dir/foo");
        assert!(
            matches!(&ops[1], Operation::Update { path, move_to: Some(t), .. } if path == "sub/dir/a" && t == "sub/dir/b")
        );
        // Absolute stays absolute: the resolver refuses it, as any other.
        assert_eq!(ops[2].path(), "/abs");
        for (opener, dir) in [
            ("cd 'a b' && apply_patch <<EOF", "a b"),
            ("cd \"x\" &&apply_patch <<'EOF'", "x"),
            ("cd ../up && applypatch <<EOF", "../up"),
        ] {
            let text =
                format!("{opener}\n*** Begin Patch\n*** Delete File: f\n*** End Patch\nEOF\n");
            assert_eq!(ok(&text)[0].path(), format!("{dir}/f"), "{opener}");
        }
    }

    #[test]
    fn other_shell_forms_are_refused() {
        for opener in [
            "cd sub; apply_patch <<'EOF'",
            "cd sub || apply_patch <<'EOF'",
            "echo hi && apply_patch <<'EOF'",
            "apply_patch foo <<'EOF'",
            "cat <<'EOF' | apply_patch",
            "cd sub && <<'EOF'",
            "cd a b && apply_patch <<EOF",
            "cd \"$HOME\" && apply_patch <<EOF",
            "cd ~ && apply_patch <<EOF",
            "apply_patch <<'EOF' && echo done",
            "cd sub && apply_patch <<'EOF' > out",
        ] {
            let text =
                format!("{opener}\n*** Begin Patch\n*** Delete File: f\n*** End Patch\nEOF\n");
            syntax(&text, 1, "heredoc opener must be");
        }
    }

    #[test]
    fn heredoc_counts_lines_from_the_real_first_line() {
        syntax("<<'EOF'\n*** Begin Patch\nfoo\n*** End Patch\nEOF\n", 3, "found \"foo\"");
        syntax("<<'EOF'\n*** Begin Patch\n*** End Patch\n", 4, "heredoc delimiter \"EOF\"");
        syntax("<<'END'\n*** Begin Patch\n*** End Patch\nEOF\n", 4, "found \"EOF\"");
    }

    #[test]
    fn bom_and_leading_blank_lines_before_begin() {
        assert_eq!(ok("\u{feff}*** Begin Patch\n*** Delete File: a\n*** End Patch").len(), 1);
        assert_eq!(ok("\n\n*** Begin Patch\n*** Delete File: a\n*** End Patch").len(), 1);
        syntax("\n\nfoo\n", 3, "expected '*** Begin Patch', found \"foo\"");
    }

    #[test]
    fn blank_lines_between_operations_are_ignored() {
        assert_eq!(
            ok("*** Begin Patch\n*** Delete File: a\n\n*** Add File: b\n+x\n\n*** End Patch").len(),
            2
        );
    }

    #[test]
    fn missing_begin() {
        syntax("", 1, "expected '*** Begin Patch', found the end of the patch text");
        syntax("*** Update File: a\n", 1, "expected '*** Begin Patch'");
    }

    #[test]
    fn missing_end() {
        syntax("*** Begin Patch\n*** Delete File: a\n", 3, "'*** End Patch', found the end");
        syntax("*** Begin Patch\n*** Add File: a\n+x\n", 4, "found the end of the patch text");
    }

    #[test]
    fn text_after_end() {
        syntax(
            "*** Begin Patch\n*** End Patch\n\nx\n",
            4,
            "expected nothing after '*** End Patch'",
        );
    }

    #[test]
    fn unknown_header() {
        syntax(
            "*** Begin Patch\n*** Rename File: a\n*** End Patch",
            2,
            "found \"*** Rename File: a\"",
        );
        // An Add File body line without '+' is not a header either.
        syntax("*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch", 4, "found \"y\"");
    }

    #[test]
    fn bad_hunk_line_names_the_line() {
        let text = "*** Begin Patch\n*** Update File: a\n@@\n a\n-b\n+c\nfoo\n*** End Patch\n";
        let (code, message) = err(text);
        assert_eq!(code, PatchSyntax);
        assert_eq!(
            message,
            "line 7: expected a hunk line starting with ' ', '-', '+' or '@@', found \"foo\""
        );
        syntax(
            "*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch\n",
            4,
            EXPECTED_HUNK_LINE,
        );
    }

    #[test]
    fn at_at_without_body() {
        syntax(
            "*** Begin Patch\n*** Update File: a\n@@ x\n*** End Patch\n",
            4,
            "found \"*** End Patch\"",
        );
        syntax("*** Begin Patch\n*** Update File: a\n@@ x\n", 4, "found the end of the patch text");
        syntax(
            "*** Begin Patch\n*** Update File: a\n@@x\n-a\n*** End Patch\n",
            3,
            "'@@ ' and a context",
        );
    }

    #[test]
    fn hunk_without_change_is_syntax_error_at_its_start() {
        syntax(
            "*** Begin Patch\n*** Update File: a\n@@ c\n x\n y\n*** End Patch\n",
            3,
            "no '-' or '+'",
        );
        syntax(
            "*** Begin Patch\n*** Update File: a\n@@\n-x\n@@\n*** End of File\n*** End Patch\n",
            5,
            "no '-' or '+'",
        );
    }

    #[test]
    fn update_without_hunk_or_move() {
        syntax("*** Begin Patch\n*** Update File: a\n*** End Patch\n", 3, "changes nothing");
        syntax(
            "*** Begin Patch\n*** Update File: a\n*** Move to: b\nzz\n*** End Patch\n",
            4,
            "found \"zz\"",
        );
    }

    #[test]
    fn markers_indented_by_one_space_are_context_lines() {
        let text = "*** Begin Patch\n*** Update File: a\n *** Move to: b\n *** End of File\n+x\n*** End Patch\n";
        let ops = ok(text);
        let Operation::Update { move_to, hunks, .. } = &ops[0] else { panic!() };
        assert_eq!(move_to, &None);
        assert_eq!(hunks[0].lines, [ctx("*** Move to: b"), ctx("*** End of File"), add("x")]);
        assert!(!hunks[0].end_of_file);
    }

    #[test]
    fn end_of_file_outside_a_hunk() {
        syntax(
            "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch\n",
            3,
            "changes nothing",
        );
    }

    #[test]
    fn empty_paths() {
        syntax(
            "*** Begin Patch\n*** Add File:\n*** End Patch\n",
            2,
            "expected a path after '*** Add File:'",
        );
        syntax("*** Begin Patch\n*** Delete File:   \n*** End Patch\n", 2, "'*** Delete File:'");
        syntax("*** Begin Patch\n*** Update File: \n-a\n*** End Patch\n", 2, "'*** Update File:'");
        syntax(
            "*** Begin Patch\n*** Update File: a\n*** Move to:\n*** End Patch\n",
            3,
            "'*** Move to:'",
        );
    }

    #[test]
    fn same_path_twice_is_a_conflict() {
        for (text, first) in [
            ("*** Begin Patch\n*** Delete File: a\n*** Add File: a\n*** End Patch\n", 2),
            (
                "*** Begin Patch\n*** Update File: b\n*** Move to: a\n*** Delete File: a\n*** End Patch\n",
                3,
            ),
            (
                "*** Begin Patch\n*** Delete File: a\n*** Update File: c\n*** Move to: a\n*** End Patch\n",
                2,
            ),
            ("*** Begin Patch\n*** Update File: a\n*** Move to: a\n*** End Patch\n", 2),
        ] {
            let (code, message) = err(text);
            assert_eq!(code, PatchConflict, "{message}");
            assert!(message.contains("\"a\" appears twice"), "{message}");
            assert!(message.contains(&format!("first at line {first})")), "{message}");
        }
    }

    #[test]
    fn too_many_operations() {
        let limits = PatchLimits::default();
        let mut text = String::from("*** Begin Patch\n");
        for i in 0..limits.max_operations {
            text.push_str(&format!("*** Delete File: f{i}\n"));
        }
        assert_eq!(ok(&format!("{text}*** End Patch\n")).len(), 64);
        text.push_str("*** Delete File: one-more\n*** End Patch\n");
        let (code, message) = err(&text);
        assert_eq!(code, PatchTooLarge);
        assert!(message.starts_with("line 66: the patch has more than 64"), "{message}");
    }

    #[test]
    fn too_many_bytes() {
        let limits = PatchLimits::default();
        let body = "+x\n".repeat(limits.max_patch_bytes / 3);
        let text = format!("*** Begin Patch\n*** Add File: a\n{body}*** End Patch\n");
        assert!(text.len() > limits.max_patch_bytes);
        let (code, message) = err(&text);
        assert_eq!(code, PatchTooLarge);
        assert!(message.contains("over the limit of 1048576 bytes"), "{message}");
        // The limit is on the bytes received, checked before any parsing.
        let small = PatchLimits { max_patch_bytes: 10, ..limits };
        assert_eq!(parse("0123456789", &small).unwrap_err().code(), PatchSyntax);
        assert_eq!(parse("0123456789a", &small).unwrap_err().code(), PatchTooLarge);
    }

    #[test]
    fn long_found_lines_are_truncated() {
        let text = format!("*** Begin Patch\n{}\n", "z".repeat(10_000));
        let (_, message) = err(&text);
        assert!(message.len() < 300, "{message}");
    }

    #[test]
    fn heredoc_openers() {
        let opener = |delimiter, workdir| Some(Ok(Opener { delimiter, workdir }));
        assert_eq!(heredoc_opener("<<'EOF'"), opener("EOF", None));
        assert_eq!(heredoc_opener("apply_patch << \"PATCH\""), opener("PATCH", None));
        assert_eq!(heredoc_opener("<<EOF_1"), opener("EOF_1", None));
        assert_eq!(heredoc_opener("cd d && apply_patch <<E"), opener("E", Some("d")));
        assert_eq!(heredoc_opener("<<EOF_1 rest"), Some(Err(())));
        assert_eq!(heredoc_opener("<<''"), Some(Err(())));
        assert_eq!(heredoc_opener("<<'EOF"), Some(Err(())));
        assert_eq!(heredoc_opener("<<"), Some(Err(())));
        assert_eq!(heredoc_opener("*** <<EOF"), None);
        assert_eq!(heredoc_opener("plain"), None);
    }

    #[test]
    fn indented_closing_end_patch_ends_the_hunk() {
        for text in [
            "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n *** End Patch\n",
            "*** Begin Patch\n*** Update File: a\n-x\n+y\n\t*** End Patch  \n\n",
            "<<'EOF'\n*** Begin Patch\n*** Update File: a\n-x\n+y\n  *** End Patch\nEOF\n",
        ] {
            let ops = ok(text);
            let Operation::Update { hunks, .. } = &ops[0] else { panic!() };
            assert_eq!(hunks[0].lines, [rm("x"), add("y")], "{text:?}");
        }
        let ops = ok("*** Begin Patch\n*** Add File: a\n+x\n *** End Patch");
        assert_eq!(ops, [Operation::Add { path: "a".into(), lines: vec!["x".into()], line: 2 }]);
        // Inside the patch, an indented marker is still a context line.
        let ops = ok("*** Begin Patch\n*** Update File: a\n *** End Patch\n-x\n*** End Patch\n");
        let Operation::Update { hunks, .. } = &ops[0] else { panic!() };
        assert_eq!(hunks[0].lines, [ctx("*** End Patch"), rm("x")]);
    }
}
