//! Does this text parse, and where are its errors: the syntax check that
//! apply_patch and write_file run on the files they write.
//!
//! [`Language::for_path`] picks a grammar by file extension (a shebang for
//! extensionless scripts); [`parse`] lists a text's syntax errors (the
//! tree-sitter `ERROR` and `MISSING` nodes, outermost only, and for Python
//! the indentation errors its grammar accepts, in file order);
//! [`check_edit`] lists those an edit introduced.
//!
//! Guarantees:
//! - Nothing here fails or panics on any input: every outcome is a value
//!   (a language the crate does not know is [`Verdict::NotChecked`], a text
//!   over the size cap or a parse over the time budget is
//!   [`Verdict::Skipped`]).
//! - Bounded: a text over [`Limits::max_bytes`] is never parsed, a parse
//!   stops at [`Limits::max_time`] (tree-sitter's progress callback), and at
//!   most [`MAX_ERRORS`] errors are collected per text.
//! - An edit is blamed only for errors it introduced. The rule: an error is
//!   identified by its message and the text of its line (trimmed), not by
//!   its line number, so lines inserted or removed above an old error do
//!   not make it new; an error of the new text is new when the old text has
//!   fewer errors with that identity. A file that did not exist before (or
//!   parsed clean) has every error of the new text blamed on the edit. The
//!   second parse (of the old text) happens only when the new text has
//!   errors, and reuses the new text's tree (tree-sitter's incremental
//!   parse), so it costs what the edited region costs. A caller that keeps
//!   the parse of what it wrote ([`check_edit_reusing`], [`KeptParse`])
//!   has the next edit of that file parsed incrementally too; a kept parse
//!   is used only when its text is the old text byte for byte.
//! - No I/O: bytes in, a verdict out.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{InputEdit, Node, ParseOptions, Parser, Point, Tree};

mod python_indent;

/// At most this many errors are collected per text: enough to compare an
/// old and a new text, bounded whatever the text.
pub const MAX_ERRORS: usize = 1000;

/// The longest offending line kept, in characters.
const MAX_LINE_CHARS: usize = 200;

/// The longest unexpected token quoted in a message, in characters.
const MAX_TOKEN_CHARS: usize = 40;

/// The languages checked: those agents edit most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Bash,
    C,
    Cpp,
    Go,
    Java,
    JavaScript,
    Json,
    Python,
    Rust,
    Toml,
    Tsx,
    TypeScript,
    Yaml,
}

impl Language {
    /// The language of the file at `path` (extension, case-insensitive),
    /// or for a file without a known extension the interpreter its
    /// shebang names (`sh`, `bash`, `python…`, `node`). `None` also for
    /// dialects the grammar would call wrong: JSON with comments and
    /// trailing commas (`tsconfig*.json`, `jsconfig*.json`, `.vscode/`,
    /// `.devcontainer/`) and templated YAML (`{{` or `{%`: Helm, Jinja).
    pub fn for_path(path: &str, text: &[u8]) -> Option<Self> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let language = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => {
                Self::for_extension(&ext.to_ascii_lowercase()).or_else(|| Self::for_shebang(text))
            }
            _ => Self::for_shebang(text),
        }?;
        let dialect = match language {
            Self::Json => {
                name.starts_with("tsconfig")
                    || name.starts_with("jsconfig")
                    || path.split('/').any(|c| c == ".vscode" || c == ".devcontainer")
            }
            Self::Yaml => text.windows(2).any(|w| w == b"{{" || w == b"{%"),
            _ => false,
        };
        (!dialect).then_some(language)
    }

    fn for_extension(ext: &str) -> Option<Self> {
        Some(match ext {
            "sh" | "bash" => Self::Bash,
            "c" => Self::C,
            // Headers are parsed as C++, a superset of most C: a C++
            // header parsed as C would be all errors.
            "h" | "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" => Self::Cpp,
            "go" => Self::Go,
            "java" => Self::Java,
            "js" | "mjs" | "cjs" | "jsx" => Self::JavaScript,
            "json" => Self::Json,
            "py" | "pyi" => Self::Python,
            "rs" => Self::Rust,
            "toml" => Self::Toml,
            "tsx" => Self::Tsx,
            "ts" | "mts" | "cts" => Self::TypeScript,
            "yaml" | "yml" => Self::Yaml,
            _ => return None,
        })
    }

    fn for_shebang(text: &[u8]) -> Option<Self> {
        let first = text.strip_prefix(b"#!")?;
        let first = &first[..first.iter().position(|&b| b == b'\n').unwrap_or(first.len())];
        let first = String::from_utf8_lossy(first);
        let mut words = first.split_whitespace();
        let mut program = words.next()?.rsplit('/').next()?;
        if program == "env" {
            // `env -S prog args`, `env prog`.
            program = words.find(|w| !w.starts_with('-'))?;
        }
        match program {
            "sh" | "bash" | "dash" => Some(Self::Bash),
            "node" => Some(Self::JavaScript),
            p if p.starts_with("python") => Some(Self::Python),
            _ => None,
        }
    }

    /// The language's name, as a model reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bash => "shell",
            Self::C => "C",
            Self::Cpp => "C++",
            Self::Go => "Go",
            Self::Java => "Java",
            Self::JavaScript => "JavaScript",
            Self::Json => "JSON",
            Self::Python => "Python",
            Self::Rust => "Rust",
            Self::Toml => "TOML",
            Self::Tsx => "TSX",
            Self::TypeScript => "TypeScript",
            Self::Yaml => "YAML",
        }
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Self::Bash => tree_sitter_bash::LANGUAGE,
            Self::C => tree_sitter_c::LANGUAGE,
            Self::Cpp => tree_sitter_cpp::LANGUAGE,
            Self::Go => tree_sitter_go::LANGUAGE,
            Self::Java => tree_sitter_java::LANGUAGE,
            Self::JavaScript => tree_sitter_javascript::LANGUAGE,
            Self::Json => tree_sitter_json::LANGUAGE,
            Self::Python => tree_sitter_python::LANGUAGE,
            Self::Rust => tree_sitter_rust::LANGUAGE,
            Self::Toml => tree_sitter_toml_ng::LANGUAGE,
            Self::Tsx => tree_sitter_typescript::LANGUAGE_TSX,
            Self::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
            Self::Yaml => tree_sitter_yaml::LANGUAGE,
        }
        .into()
    }
}

/// How much one check may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Texts larger than this are not parsed. Default 1 MiB.
    pub max_bytes: usize,
    /// A parse still running after this stops, unfinished. Default 1 s
    /// (a 10,000-line file takes milliseconds; see scripts/bench.py).
    pub max_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_bytes: 1 << 20, max_time: Duration::from_secs(1) }
    }
}

/// One syntax error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong: ``unexpected `x` `` or ``missing `)` ``.
    pub message: String,
    /// The offending line, trailing whitespace removed, at most 200
    /// characters.
    pub text: String,
}

/// Why a text was not parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Larger than [`Limits::max_bytes`].
    TooLarge,
    /// The parse ran past [`Limits::max_time`].
    TimedOut,
}

/// What [`parse`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The errors, in file order (empty: the text parses).
    Errors(Vec<SyntaxError>),
    /// Not parsed.
    Skipped(Skip),
}

/// The syntax errors of `text` in `language`, bounded by `limits`.
pub fn parse(language: Language, text: &[u8], limits: &Limits) -> Parsed {
    parse_from(language, text, limits, None).0
}

/// [`parse`], reusing `old` (a tree of another text, already edited to
/// `text`'s shape: tree-sitter then reparses only what changed), and the
/// tree it made.
fn parse_from(
    language: Language,
    text: &[u8],
    limits: &Limits,
    old: Option<&Tree>,
) -> (Parsed, Option<Tree>) {
    if text.len() > limits.max_bytes {
        return (Parsed::Skipped(Skip::TooLarge), None);
    }
    let mut parser = Parser::new();
    if parser.set_language(&language.grammar()).is_err() {
        // Unreachable with the pinned grammars (their ABI is in the core's
        // range; a unit test parses every language): no verdict rather
        // than a wrong one.
        return (Parsed::Errors(Vec::new()), None);
    }
    let started = Instant::now();
    let mut progress = |_: &tree_sitter::ParseState| {
        if started.elapsed() > limits.max_time {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let options = ParseOptions::new().progress_callback(&mut progress);
    let mut read = |offset: usize, _| text.get(offset..).unwrap_or_default();
    let Some(tree) = parser.parse_with_options(&mut read, old, Some(options)) else {
        return (Parsed::Skipped(Skip::TimedOut), None);
    };
    let mut errors = Vec::new();
    collect(tree.root_node(), text, &mut errors);
    if language == Language::Python {
        python_indent::errors(text, &mut errors);
        errors.sort_by_key(|e| (e.line, e.column));
        errors.truncate(MAX_ERRORS);
    }
    (Parsed::Errors(errors), Some(tree))
}

/// `tree` (of `from`) edited to the shape of `to`: one edit spanning what
/// lies between their common prefix and common suffix.
fn edited(mut tree: Tree, from: &[u8], to: &[u8]) -> Tree {
    let prefix = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let suffix = from[prefix..]
        .iter()
        .rev()
        .zip(to[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let point = |text: &[u8], byte: usize| {
        let before = &text[..byte];
        let row = before.iter().filter(|&&b| b == b'\n').count();
        let column = byte - before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        Point { row, column }
    };
    tree.edit(&InputEdit {
        start_byte: prefix,
        old_end_byte: from.len() - suffix,
        new_end_byte: to.len() - suffix,
        start_position: point(from, prefix),
        old_end_position: point(from, from.len() - suffix),
        new_end_position: point(to, to.len() - suffix),
    });
    tree
}

/// The outermost ERROR and MISSING nodes under `node`, in file order.
fn collect(node: Node<'_>, text: &[u8], errors: &mut Vec<SyntaxError>) {
    if errors.len() >= MAX_ERRORS || !node.has_error() {
        return;
    }
    let message = if node.is_missing() {
        Some(format!("missing `{}`", node.kind()))
    } else if node.is_error() {
        Some(unexpected(node, text))
    } else {
        None
    };
    if let Some(message) = message {
        errors.push(error_at(node, text, message));
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, text, errors);
    }
}

/// What an ERROR node says: ``unexpected `tok` `` (its first child, on
/// one line), or for a node over several lines, where recovery swallowed
/// what came before the real mistake, how far it reaches (in lines, not
/// line numbers: the message must not change when lines shift above it).
fn unexpected(node: Node<'_>, text: &[u8]) -> String {
    let lines = node.end_position().row - node.start_position().row;
    if lines > 0 {
        return format!("syntax error in the {} lines from here", lines + 1);
    }
    let first = node.child(0).unwrap_or(node);
    let token = String::from_utf8_lossy(text.get(first.byte_range()).unwrap_or_default());
    let token = token.trim();
    if token.is_empty() {
        return "syntax error".to_owned();
    }
    let mut shown: String = token.chars().take(MAX_TOKEN_CHARS).collect();
    if shown.len() < token.len() {
        shown.push('…');
    }
    format!("unexpected `{shown}`")
}

fn error_at(node: Node<'_>, text: &[u8], message: String) -> SyntaxError {
    let start = node.start_byte().min(text.len());
    let line_start = text[..start].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line_end = text[start..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| start + i);
    let column = String::from_utf8_lossy(&text[line_start..start]).chars().count() + 1;
    let text = shown_line(&String::from_utf8_lossy(&text[line_start..line_end]));
    SyntaxError { line: node.start_position().row + 1, column, message, text }
}

/// A line as an error shows it: trailing whitespace removed, at most
/// [`MAX_LINE_CHARS`] characters.
fn shown_line(line: &str) -> String {
    line.trim_end().chars().take(MAX_LINE_CHARS).collect()
}

/// What an edit did to a file's syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No grammar for this file.
    NotChecked,
    /// Not parsed (size cap or time budget).
    Skipped(Language, Skip),
    /// The edit introduced no syntax error.
    Clean(Language),
    /// The errors the edit introduced (see the module doc for the rule),
    /// in file order, never empty.
    Broken(Language, Vec<SyntaxError>),
}

/// The syntax errors that writing `after` over `before` (`None`: a new
/// file) introduced in the file at `path`.
pub fn check_edit(path: &str, before: Option<&[u8]>, after: &[u8], limits: &Limits) -> Verdict {
    check_edit_reusing(path, before, after, limits, None).0
}

/// A text parsed by [`check_edit_reusing`], kept by the caller for the
/// next check of the same file: its tree lets tree-sitter reparse only
/// what the next edit changed, and its errors need no parse at all.
#[derive(Clone)]
pub struct KeptParse {
    language: Language,
    text: Vec<u8>,
    tree: Tree,
    errors: Vec<SyntaxError>,
}

impl KeptParse {
    /// The bytes this parse is of.
    pub fn text(&self) -> &[u8] {
        &self.text
    }
}

/// [`check_edit`], reusing `kept` (an earlier parse of this file) when its
/// text is `before`; also the parse of `after`, to keep for the next edit
/// (`None` when it was not parsed).
pub fn check_edit_reusing(
    path: &str,
    before: Option<&[u8]>,
    after: &[u8],
    limits: &Limits,
    kept: Option<KeptParse>,
) -> (Verdict, Option<KeptParse>) {
    let Some(language) = Language::for_path(path, after) else {
        return (Verdict::NotChecked, None);
    };
    let kept = kept.filter(|k| k.language == language && Some(k.text.as_slice()) == before);
    let old_tree = kept.as_ref().map(|k| edited(k.tree.clone(), &k.text, after));
    let (after_errors, tree) = match parse_from(language, after, limits, old_tree.as_ref()) {
        (Parsed::Errors(errors), Some(tree)) => (errors, tree),
        (Parsed::Skipped(why), _) => return (Verdict::Skipped(language, why), None),
        // No tree: the grammar could not be loaded (see parse_from).
        (Parsed::Errors(_), None) => return (Verdict::Clean(language), None),
    };
    let keep = |errors: Vec<SyntaxError>| KeptParse {
        language,
        text: after.to_vec(),
        tree: tree.clone(),
        errors,
    };
    if after_errors.is_empty() {
        return (Verdict::Clean(language), Some(keep(after_errors)));
    }
    let before_errors = match (kept, before) {
        (Some(kept), _) => kept.errors,
        (None, None) => Vec::new(),
        // The old text is parsed from the new one's tree: only the edited
        // region is parsed again.
        (None, Some(b)) => {
            let old = edited(tree.clone(), after, b);
            match parse_from(language, b, limits, Some(&old)).0 {
                Parsed::Errors(errors) => errors,
                // An old text that could not be parsed cannot tell new
                // errors from old ones: blame nothing.
                Parsed::Skipped(_) => return (Verdict::Clean(language), Some(keep(after_errors))),
            }
        }
    };
    let new = introduced(before_errors, after_errors.clone());
    let verdict =
        if new.is_empty() { Verdict::Clean(language) } else { Verdict::Broken(language, new) };
    (verdict, Some(keep(after_errors)))
}

/// The errors of `after` not matched, one for one, by an error of `before`
/// with the same message on a line of the same (trimmed) text.
fn introduced(before: Vec<SyntaxError>, after: Vec<SyntaxError>) -> Vec<SyntaxError> {
    let mut old: std::collections::HashMap<(String, String), usize> =
        std::collections::HashMap::new();
    for e in before {
        *old.entry((e.message, e.text.trim().to_owned())).or_default() += 1;
    }
    after
        .into_iter()
        .filter(|e| match old.get_mut(&(e.message.clone(), e.text.trim().to_owned())) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests;
