//! The syntax warning of a written file: after apply_patch and write_file,
//! a file in a language `serverfs-syntax` knows is parsed, and the syntax
//! errors the write introduced (errors the file already had are never
//! blamed on it) are listed in the answer, in its text as one short block
//! per file and in its structured content. The write stays applied: a model
//! may finish a change in two patches.
//!
//! Bounded per call: each file at most `serverfs-syntax`'s size cap and
//! parse budget, and all files of one call together at most
//! [`CALL_BUDGET`] of parsing; files past it are not checked. A file not
//! checked (unknown language, too large, out of time) gets no warning.
//! The writer keeps the parses of the last [`KEPT_PARSES`] files written,
//! so the next edit of one of them is parsed incrementally.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_syntax::{KeptParse, Limits, Verdict, check_edit_reusing};

/// Errors listed per file; the rest are counted.
const LISTED_ERRORS: usize = 5;

/// Parsing time of one call, all its files together.
const CALL_BUDGET: Duration = Duration::from_secs(2);

/// Parses kept for the next edit of the same files (each at most the
/// parse cap, 1 MiB of text, and its tree).
const KEPT_PARSES: usize = 4;

/// Syntax errors a write introduced in one file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SyntaxWarning {
    /// The language the file was parsed as (by its extension or shebang).
    pub language: String,
    /// The first new errors, in file order.
    pub errors: Vec<SyntaxErrorAt>,
    /// New errors past those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub errors_not_listed: u64,
}

/// One syntax error.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SyntaxErrorAt {
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub column: u64,
    /// What is wrong (`unexpected indent`, ``missing `;` ``, ``unexpected `x` ``).
    pub error: String,
    /// The offending line (at most 200 characters).
    pub text: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The parses of the files written last, so that the next edit of one of
/// them is parsed incrementally (a model often patches a file several
/// times in a row). Looked up by path and used only when its text is the
/// file's current content, byte for byte: a stale entry is never used.
#[derive(Default)]
pub(crate) struct KeptParses(Mutex<VecDeque<(String, KeptParse)>>);

impl std::fmt::Debug for KeptParses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_list().entries(kept.iter().map(|(path, _)| path)).finish()
    }
}

impl KeptParses {
    fn take(&self, path: &str) -> Option<KeptParse> {
        let mut kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = kept.iter().position(|(p, _)| p == path)?;
        kept.remove(at).map(|(_, parse)| parse)
    }

    fn put(&self, path: &str, parse: KeptParse) {
        let mut kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|(p, _)| p != path);
        kept.push_front((path.to_owned(), parse));
        kept.truncate(KEPT_PARSES);
    }
}

/// Checks the files of one call within [`CALL_BUDGET`].
pub(crate) struct SyntaxCheck<'a> {
    started: Instant,
    kept: &'a KeptParses,
    /// Whether the new texts are kept (not for a dry run: they are not
    /// written).
    keep: bool,
}

impl<'a> SyntaxCheck<'a> {
    pub(crate) fn new(kept: &'a KeptParses, keep: bool) -> Self {
        Self { started: Instant::now(), kept, keep }
    }

    /// The warning for writing `after` over `before` (`None`: a new file)
    /// at `path`, if the write introduced syntax errors.
    pub(crate) fn file(
        &self,
        path: &str,
        before: Option<&[u8]>,
        after: &[u8],
    ) -> Option<SyntaxWarning> {
        let left = CALL_BUDGET.checked_sub(self.started.elapsed())?;
        let defaults = Limits::default();
        let limits = Limits { max_time: left.min(defaults.max_time), ..defaults };
        let (verdict, parsed) =
            check_edit_reusing(path, before, after, &limits, self.kept.take(path));
        if let (true, Some(parsed)) = (self.keep, parsed) {
            self.kept.put(path, parsed);
        }
        let Verdict::Broken(language, errors) = verdict else {
            return None;
        };
        Some(SyntaxWarning {
            language: language.name().to_owned(),
            errors_not_listed: errors.len().saturating_sub(LISTED_ERRORS) as u64,
            errors: errors
                .into_iter()
                .take(LISTED_ERRORS)
                .map(|e| SyntaxErrorAt {
                    line: e.line as u64,
                    column: e.column as u64,
                    error: e.message,
                    text: e.text,
                })
                .collect(),
        })
    }
}

impl SyntaxWarning {
    /// The block a model reads: where the first new error is, what it is,
    /// the line itself, and how many more there are.
    /// `applied`: the write happened (not a dry run).
    pub(crate) fn write_text(&self, shown_path: &str, applied: bool, out: &mut String) {
        let Some(first) = self.errors.first() else { return };
        let more = self.errors.len() as u64 - 1 + self.errors_not_listed;
        let state = if applied { ", which is applied" } else { "" };
        let _ = writeln!(
            out,
            "syntax error: {shown_path}:{}:{}: {} ({}; new with this edit{state})",
            first.line, first.column, first.error, self.language
        );
        let _ = writeln!(out, "  {} | {}", first.line, first.text);
        if more > 0 {
            let _ = writeln!(out, "  and {more} more new syntax errors in this file");
        }
    }
}
