//! The command policy (`--allow` / `--deny` lists of program names).
//!
//! # What it does
//!
//! - Program names are matched exactly after stripping quotes (`"rm"`,
//!   `'rm'`), backslash escapes (`r\m`) and the directory (`/usr/bin/rm`).
//! - Leading `NAME=value` assignments, redirections (`>out`, `2>&1`) and
//!   shell keywords (`!`, `{`, `if`, `then`, `do`, …) are skipped to find
//!   the program.
//! - With an allow list, shell metacharacters (`;` `|` `&` `<` `>` `(` `)`
//!   `$` `` ` `` and newline/CR) are refused outright, and so are leading
//!   `NAME=value` assignments (`GIT_SSH_COMMAND=… git fetch` would run
//!   anything): the command must be one simple command whose program is on
//!   the list.
//! - The deny list is checked for every segment of a list or pipeline
//!   (`;`, `&&`, `||`, `|`, `&`, newline, subshell parentheses), inside
//!   `$(…)`, `<(…)`, `>(…)` and backticks (also within double quotes), and
//!   for `bash|sh -c STRING` and `eval`.
//! - Wrappers (`env`, `command`, `exec`, `nohup`, `setsid`, `time`, `nice`,
//!   `timeout`, `stdbuf`, `xargs`, `sudo`, `doas`, `builtin`): with an allow
//!   list the wrapped program must be allowed too; with a deny list every
//!   later word of the segment is checked against it.
//! - A program name that is computed (`$x`, `$(…)`, a glob like `r?`) is
//!   refused whenever a list is configured, and so are unbalanced quotes and
//!   (for shell input) a trailing line continuation.
//!
//! # What it cannot promise
//!
//! A policy is a guard rail for a cooperative agent, not a sandbox. A
//! permitted interpreter or tool runs anything: `python3 -c`, `perl -e`,
//! `awk 'BEGIN{system(…)}'`, `find -exec`, `git -c alias.x='!rm …'`, `make`,
//! `npm run`, a script written to disk and then run by an allowed program.
//! Deny lists are weaker still, a convenience against mistakes: `cp /bin/rm
//! ./x; ./x`, `hash -p /bin/rm x`, `. script`, `bash -ec …`, `echo 'rm v' |
//! bash`, here-documents, `trap`, `coproc`, `mapfile -C`, unlisted wrappers
//! (`ionice`, `flock`, `setpriv`), and input split across several
//! `shell_write` calls ([`Policy::check_input`] sees each write alone). The
//! Landlock sandbox (see the sandbox module) and the operating system (the
//! service account, file permissions, a container) bound what a command
//! can really do.

use serverfs_core::error::{ErrorCode, FsError};

/// Allow and deny lists of program names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// When set, only these programs may run, one simple command at a time.
    pub allow: Option<Vec<String>>,
    /// These programs may never run, in any segment.
    pub deny: Vec<String>,
}

const WRAPPERS: &[&str] = &[
    "env", "command", "builtin", "exec", "nohup", "setsid", "time", "nice", "timeout", "stdbuf",
    "xargs", "sudo", "doas",
];
const KEYWORDS: &[&str] =
    &["!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"];
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh"];
/// Refused outright under an allow list.
const METACHARS: &[char] = &[';', '|', '&', '<', '>', '(', ')', '$', '`', '\n', '\r'];

fn refuse(what: impl Into<String>) -> FsError {
    FsError::new(ErrorCode::CommandNotAllowed, what)
}

/// One word of a simple command.
#[derive(Debug, Default)]
struct Word {
    /// Quotes and escapes removed.
    text: String,
    /// As written (for `NAME=` detection and messages).
    raw: String,
    /// Holds an unquoted expansion or glob: its value is not known here.
    dynamic: bool,
    /// A quote or escape was seen before `=` (then it is no assignment).
    quoted_prefix: bool,
}

impl Word {
    fn is_assignment(&self) -> bool {
        if self.quoted_prefix {
            return false;
        }
        let Some((name, _)) = self.raw.split_once('=') else { return false };
        let name = name.strip_suffix('+').unwrap_or(name);
        let mut chars = name.chars();
        matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
    }
}

/// A simple command as the lexer saw it.
#[derive(Debug, Default)]
struct Segment {
    words: Vec<Word>,
}

/// A small bash lexer: enough to find every program position, and to refuse
/// what it cannot see through.
struct Lexer<'p> {
    policy: &'p Policy,
    depth: usize,
}

impl Policy {
    /// True when no list is configured (everything passes).
    pub fn is_open(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty()
    }

    /// Checks a `bash -c` command. The error is `COMMAND_NOT_ALLOWED:
    /// <program or metacharacter>`.
    pub fn check(&self, command: &str) -> Result<(), FsError> {
        if self.is_open() {
            return Ok(());
        }
        if self.allow.is_some()
            && let Some(c) = command.chars().find(|c| METACHARS.contains(c))
        {
            return Err(refuse(match c {
                '\n' => "\\n".to_owned(),
                '\r' => "\\r".to_owned(),
                c => c.to_string(),
            }));
        }
        Lexer { policy: self, depth: 0 }.check(command)
    }

    /// Checks input written to a shell session: every line on its own, and
    /// refuses what would make a line continue into the next one (an
    /// unbalanced quote, a trailing backslash) so no line can hide in
    /// another.
    pub fn check_input(&self, input: &str) -> Result<(), FsError> {
        if self.is_open() {
            return Ok(());
        }
        for line in input.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let trailing = line.len() - line.trim_end_matches('\\').len();
            if trailing % 2 == 1 {
                return Err(refuse("\\ (line continuation)"));
            }
            self.check(line)?;
        }
        Ok(())
    }

    fn allowed(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.iter().any(|p| p == name))
    }

    fn denied(&self, name: &str) -> bool {
        self.deny.iter().any(|p| p == name)
    }
}

/// `5`, `2.5`, `10s`, `3m`: an option argument of `nice`/`timeout`.
fn is_number(s: &str) -> bool {
    let digits = s.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(s);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// `/usr/bin/rm` → `rm`.
fn base_name(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Ends the current word: a program or argument, or a redirection target
/// (dropped).
fn end_word(segments: &mut [Segment], word: &mut Option<Word>, redirect_target: &mut bool) {
    if let Some(w) = word.take() {
        if std::mem::take(redirect_target) {
            return;
        }
        if let Some(seg) = segments.last_mut() {
            seg.words.push(w);
        }
    }
}

/// Ends the current simple command.
fn end_segment(segments: &mut Vec<Segment>, word: &mut Option<Word>, redirect_target: &mut bool) {
    end_word(segments, word, redirect_target);
    *redirect_target = false;
    segments.push(Segment::default());
}

/// Finds the `)` that closes a `(` opened just before `s`, respecting
/// quotes and nesting; returns the inside and the rest.
fn split_paren(s: &str) -> Option<(&str, &str)> {
    let mut depth = 1usize;
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' => {
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                }
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// Finds the closing backtick; returns the inside and the rest.
fn split_backtick(s: &str) -> Option<(&str, &str)> {
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '`' => return Some((&s[..i], &s[i + 1..])),
            _ => {}
        }
    }
    None
}

impl Lexer<'_> {
    fn nested(&self, inner: &str) -> Result<(), FsError> {
        if self.depth >= 16 {
            return Err(refuse("nesting too deep"));
        }
        Lexer { policy: self.policy, depth: self.depth + 1 }.check(inner)
    }

    /// Splits `s` into segments, checking nested commands on the way, then
    /// checks each segment.
    fn check(&self, s: &str) -> Result<(), FsError> {
        let mut segments = vec![Segment::default()];
        let mut word: Option<Word> = None;
        // The next word is a redirection target, not a program.
        let mut redirect_target = false;
        let mut rest = s;

        while let Some(c) = rest.chars().next() {
            rest = &rest[c.len_utf8()..];
            match c {
                ' ' | '\t' => end_word(&mut segments, &mut word, &mut redirect_target),
                '\n' | '\r' | ';' | '&' | '|' | '(' | ')' => {
                    end_segment(&mut segments, &mut word, &mut redirect_target);
                }
                '#' if word.is_none() => {
                    // A comment, to the end of the line.
                    rest = rest.find('\n').map_or("", |i| &rest[i..]);
                }
                '<' | '>' => {
                    if let Some(inner) = rest.strip_prefix('(') {
                        // Process substitution.
                        let (inside, after) =
                            split_paren(inner).ok_or_else(|| refuse("unbalanced ("))?;
                        self.nested(inside)?;
                        rest = after;
                        let w = word.get_or_insert_with(Word::default);
                        w.dynamic = true;
                        continue;
                    }
                    // `2>`: a leading fd number belongs to the operator.
                    if word.as_ref().is_some_and(|w| {
                        !w.raw.is_empty() && w.raw.bytes().all(|b| b.is_ascii_digit())
                    }) {
                        word = None;
                    }
                    end_word(&mut segments, &mut word, &mut redirect_target);
                    rest = rest.trim_start_matches(['<', '>', '&']);
                    redirect_target = true;
                }
                '\'' => {
                    let end = rest.find('\'').ok_or_else(|| refuse("unbalanced '"))?;
                    let w = word.get_or_insert_with(Word::default);
                    w.quoted_prefix |= !w.raw.contains('=');
                    w.text.push_str(&rest[..end]);
                    w.raw.push('\'');
                    w.raw.push_str(&rest[..end]);
                    w.raw.push('\'');
                    rest = &rest[end + 1..];
                }
                '"' => {
                    let w = word.get_or_insert_with(Word::default);
                    w.quoted_prefix |= !w.raw.contains('=');
                    w.raw.push('"');
                    let mut closed = false;
                    while let Some(d) = rest.chars().next() {
                        rest = &rest[d.len_utf8()..];
                        match d {
                            '"' => {
                                closed = true;
                                w.raw.push('"');
                                break;
                            }
                            '\\' => {
                                let Some(e) = rest.chars().next() else { break };
                                rest = &rest[e.len_utf8()..];
                                w.raw.push('\\');
                                w.raw.push(e);
                                if !matches!(e, '"' | '\\' | '$' | '`' | '\n') {
                                    w.text.push('\\');
                                }
                                if e != '\n' {
                                    w.text.push(e);
                                }
                            }
                            '$' if rest.starts_with('(') => {
                                let (inside, after) = split_paren(&rest[1..])
                                    .ok_or_else(|| refuse("unbalanced $("))?;
                                self.nested(inside)?;
                                rest = after;
                                w.dynamic = true;
                            }
                            '`' => {
                                let (inside, after) =
                                    split_backtick(rest).ok_or_else(|| refuse("unbalanced `"))?;
                                self.nested(inside)?;
                                rest = after;
                                w.dynamic = true;
                            }
                            '$' => {
                                w.dynamic = true;
                                w.raw.push('$');
                            }
                            d => {
                                w.raw.push(d);
                                w.text.push(d);
                            }
                        }
                    }
                    if !closed {
                        return Err(refuse("unbalanced \""));
                    }
                }
                '\\' => {
                    match rest.chars().next() {
                        // Line continuation: both characters vanish.
                        Some('\n') => rest = &rest[1..],
                        Some(e) => {
                            rest = &rest[e.len_utf8()..];
                            let w = word.get_or_insert_with(Word::default);
                            w.quoted_prefix |= !w.raw.contains('=');
                            w.raw.push('\\');
                            w.raw.push(e);
                            w.text.push(e);
                        }
                        None => {}
                    }
                }
                '$' if rest.starts_with('(') => {
                    let (inside, after) =
                        split_paren(&rest[1..]).ok_or_else(|| refuse("unbalanced $("))?;
                    self.nested(inside)?;
                    rest = after;
                    let w = word.get_or_insert_with(Word::default);
                    w.dynamic = true;
                    w.raw.push_str("$(…)");
                }
                '`' => {
                    let (inside, after) =
                        split_backtick(rest).ok_or_else(|| refuse("unbalanced `"))?;
                    self.nested(inside)?;
                    rest = after;
                    let w = word.get_or_insert_with(Word::default);
                    w.dynamic = true;
                    w.raw.push_str("`…`");
                }
                c => {
                    let w = word.get_or_insert_with(Word::default);
                    if matches!(c, '$' | '*' | '?' | '[') {
                        w.dynamic = true;
                    }
                    w.raw.push(c);
                    w.text.push(c);
                }
            }
        }
        end_word(&mut segments, &mut word, &mut redirect_target);
        for seg in &segments {
            self.check_segment(seg)?;
        }
        Ok(())
    }

    fn check_segment(&self, seg: &Segment) -> Result<(), FsError> {
        let policy = self.policy;
        let mut words = seg.words.iter().peekable();
        // Assignments and keywords before the program.
        while let Some(w) = words.peek() {
            if w.is_assignment() {
                if policy.allow.is_some() {
                    let name = w.raw.split('=').next().unwrap_or_default();
                    return Err(refuse(format!("{name}= (environment assignment)")));
                }
                words.next();
            } else if !w.dynamic && !w.quoted_prefix && KEYWORDS.contains(&w.text.as_str()) {
                words.next();
            } else {
                break;
            }
        }
        let Some(program) = words.next() else { return Ok(()) };
        let rest: Vec<&Word> = words.collect();
        self.check_program(program, &rest)
    }

    fn check_program(&self, program: &Word, args: &[&Word]) -> Result<(), FsError> {
        let policy = self.policy;
        // Computed names, and brace expansion (`{rm,-f,x}` runs rm).
        if program.dynamic || (program.text.contains('{') && !program.quoted_prefix) {
            return Err(refuse(program.raw.clone()));
        }
        let name = base_name(&program.text);
        if !policy.allowed(name) || policy.denied(name) {
            return Err(refuse(name.to_owned()));
        }
        if WRAPPERS.contains(&name) {
            if policy.allow.is_some() {
                // The wrapped program: the first word that is not an
                // option, an assignment or a number.
                if let Some(i) = args.iter().position(|w| {
                    !(w.text.starts_with('-') || w.is_assignment() || is_number(&w.text))
                }) {
                    return self.check_program(args[i], &args[i + 1..]);
                }
            }
            for w in args {
                if w.dynamic && policy.allow.is_some() {
                    return Err(refuse(w.raw.clone()));
                }
                let n = base_name(&w.text);
                if policy.denied(n) {
                    return Err(refuse(n.to_owned()));
                }
            }
            return Ok(());
        }
        if name == "alias" {
            // `shopt -s expand_aliases; alias x=rm; x …`: the value is a
            // command.
            for w in args {
                if let Some((_, value)) = w.text.split_once('=') {
                    self.nested(value)?;
                }
            }
            return Ok(());
        }
        if name == "eval" {
            let joined: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
            return self.nested(&joined.join(" "));
        }
        if SHELLS.contains(&name)
            && let Some(i) = args.iter().position(|w| w.text == "-c")
            && let Some(script) = args.get(i + 1)
        {
            return self.nested(&script.text);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(list: &[&str]) -> Policy {
        Policy { allow: None, deny: list.iter().map(|s| s.to_string()).collect() }
    }
    fn allow(list: &[&str]) -> Policy {
        Policy { allow: Some(list.iter().map(|s| s.to_string()).collect()), deny: vec![] }
    }
    fn refused(p: &Policy, cmd: &str) -> String {
        match p.check(cmd) {
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::CommandNotAllowed, "{cmd}");
                e.message().to_owned()
            }
            Ok(()) => panic!("{cmd:?} passed"),
        }
    }

    #[test]
    fn open_policy_passes_everything() {
        assert!(Policy::default().check("rm -rf / ; `x`").is_ok());
    }

    #[test]
    fn deny_matches_after_stripping_paths_quotes_escapes() {
        let p = deny(&["rm"]);
        for cmd in [
            "rm x",
            "/usr/bin/rm x",
            "\"/usr/bin/rm\" x",
            "'rm' x",
            "r\\m x",
            "\"r\"m x",
            "FOO=1 rm x",
            "A=1 B=\"2 3\" rm x",
            ">out rm x",
            "2>/dev/null rm x",
            "r\\\nm x",
        ] {
            assert_eq!(refused(&p, cmd), "rm", "{cmd}");
        }
        assert!(p.check("ls -l; echo rm; git rm x").is_ok());
        assert!(p.check("rmdir x").is_ok());
        assert!(p.check("echo 'rm; rm'").is_ok());
    }

    #[test]
    fn deny_checks_every_segment_and_substitution() {
        let p = deny(&["rm"]);
        for cmd in [
            "git;rm -rf /",
            "git status && rm x",
            "false || rm x",
            "ls | rm x",
            "ls |& rm x",
            "sleep 1 & rm x",
            "ls\nrm x",
            "echo $(rm x)",
            "echo \"$(rm x)\"",
            "echo `rm x`",
            "echo \"`rm x`\"",
            "(rm x)",
            "{ rm x; }",
            "if true; then rm x; fi",
            "! rm x",
            "cat <(rm x)",
            "echo $(echo $(rm x))",
            "env FOO=1 rm x",
            "xargs rm < list",
            "sudo -u root rm x",
            "bash -c 'rm x'",
            "sh -c \"ls; rm x\"",
            "eval 'rm x'",
            "timeout 5 rm x",
            "shopt -s expand_aliases; alias x='rm -f'; x y",
        ] {
            assert_eq!(refused(&p, cmd), "rm", "{cmd}");
        }
    }

    #[test]
    fn computed_program_names_are_refused() {
        let p = deny(&["rm"]);
        assert!(refused(&p, "$(echo rm) x").contains("$("));
        assert!(refused(&p, "/usr/bin/r? x").contains("r?"));
        assert!(refused(&p, "$CMD x").contains("$CMD"));
        assert!(refused(&p, "$'rm' x").contains("rm"));
        assert_eq!(refused(&p, "{rm,-f,x}"), "{rm,-f,x}");
        assert!(p.check("echo {a,b}").is_ok());
        // Unbalanced quotes could hide anything.
        assert!(refused(&p, "echo 'abc").contains("unbalanced"));
    }

    #[test]
    fn allow_list_refuses_metacharacters_outright() {
        let p = allow(&["git", "ls"]);
        assert!(p.check("git status --short").is_ok());
        assert!(p.check("/usr/bin/git log -n 3 -- 'a b'").is_ok());
        assert_eq!(refused(&p, "git;rm -rf /"), ";");
        assert_eq!(refused(&p, "git status | rm"), "|");
        assert_eq!(refused(&p, "git status & rm"), "&");
        assert_eq!(refused(&p, "git $(rm x)"), "$");
        assert_eq!(refused(&p, "git ${HOME}"), "$");
        assert_eq!(refused(&p, "git `rm x`"), "`");
        assert_eq!(refused(&p, "git log > out"), ">");
        assert_eq!(refused(&p, "git log < in"), "<");
        assert_eq!(refused(&p, "(git log)"), "(");
        assert_eq!(refused(&p, "git log\nrm x"), "\\n");
        assert_eq!(refused(&p, "rm x"), "rm");
        assert_eq!(refused(&p, "\"/usr/bin/rm\" x"), "rm");
        assert_eq!(refused(&p, "r\\m x"), "rm");
        assert_eq!(refused(&p, "gi? log"), "gi?");
        assert!(refused(&p, "GIT_SSH_COMMAND=x git fetch").starts_with("GIT_SSH_COMMAND="));
        assert_eq!(refused(&p, "env rm x"), "env");
    }

    #[test]
    fn allowed_wrappers_must_wrap_allowed_programs() {
        let p = allow(&["git", "env", "timeout"]);
        assert!(p.check("timeout 10s git status").is_ok());
        assert_eq!(refused(&p, "env -i rm x"), "rm");
        assert_eq!(refused(&p, "timeout 5 rm x"), "rm");
    }

    #[test]
    fn allow_and_deny_together() {
        let p = Policy { allow: Some(vec!["git".into()]), deny: vec!["git".into()] };
        assert_eq!(refused(&p, "git status"), "git");
    }

    #[test]
    fn session_input_is_checked_line_by_line() {
        let p = deny(&["rm"]);
        assert!(p.check_input("ls\necho hi\n").is_ok());
        assert_eq!(p.check_input("ls\nrm x\n").unwrap_err().message(), "rm");
        // `r\` + newline + `m x` would run rm.
        assert!(p.check_input("r\\\nm x\n").unwrap_err().message().contains("continuation"));
        assert!(p.check_input("echo '\n; rm x; '\n").is_err());
        let p = allow(&["ls"]);
        assert!(p.check_input("ls -l\nls\n").is_ok());
        assert_eq!(p.check_input("ls\nls; rm\n").unwrap_err().message(), ";");
    }
}
