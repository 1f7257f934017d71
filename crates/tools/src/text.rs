//! What a model reads: the one text content of every successful tool call,
//! built in one place ([`TextOutput::answer`]) from the result every tool
//! also returns as `structuredContent`.
//!
//! Guarantees:
//! - `structuredContent` is the result serialised, whatever the text says:
//!   clients that parse it see the pinned shape.
//! - [`TextOutput::Compact`] (the default): the text is written for a model
//!   ([`ToText`]): a listing one entry per line, find one path per line,
//!   search `path:line:text`, a read the lines themselves under a one-line
//!   header; no field a model needs to go on is left out: whenever an answer
//!   is cut short (truncation, `has_more`, `next_start_line`,
//!   `next_cursor`), the text says so and how to continue.
//! - [`TextOutput::Json`]: the text is the JSON of `structuredContent`, for
//!   clients that parse text.
//! - Errors never pass through here: they stay `CODE: message`.

use std::fmt::Write as _;

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde::Serialize;
use serverfs_core::EntryKind;
pub use serverfs_core::ToText;
use serverfs_core::render::{marked, shown_path};
use serverfs_search::TruncatedReason;

use crate::schema::{
    ListDirectoryResult, Matches, ReadTextFileResult, SkippedCounts, StatFileResult,
};

/// How the text content of a successful call is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TextOutput {
    /// Written for a model to read ([`ToText`]).
    #[default]
    Compact,
    /// The JSON of `structuredContent`.
    Json,
}

impl std::str::FromStr for TextOutput {
    /// The message clap shows under the setting's name.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(Self::Compact),
            "json" => Ok(Self::Json),
            other => Err(format!("expected compact or json, got {other:?}")),
        }
    }
}

/// The result of one successful tool call: `structuredContent` and its
/// text, plus any further content blocks (an image).
#[derive(Debug)]
pub struct Answer(CallToolResult);

/// What a tool of either server hands rmcp: its [`Answer`], or the
/// failure as the text rmcp sends in a result with `isError: true`
/// (`CODE: message`, made once from the typed `FsError`). A `String` on
/// purpose: it is that wire text, which rmcp turns into an error result as
/// it is; nothing branches on it after.
pub type ToolResult = Result<Answer, String>;

impl IntoCallToolResult for Answer {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        Ok(self.0.into())
    }
}

impl TextOutput {
    /// The answer for `value`: serialised as `structuredContent`, with its
    /// text in this style.
    ///
    /// # Errors
    /// `INTERNAL_ERROR: …` should `value` not serialise (none of the result
    /// types can fail to).
    pub fn answer<T: Serialize + ToText>(self, value: &T) -> ToolResult {
        let structured = serde_json::to_value(value).map_err(|e| {
            tracing::error!(event = "call_failed", error = %e);
            "INTERNAL_ERROR: the result could not be encoded.".to_owned()
        })?;
        let text = match self {
            Self::Json => structured.to_string(),
            Self::Compact => {
                let mut out = String::new();
                value.to_text(None, &mut out);
                out
            }
        };
        let mut result = CallToolResult::structured(structured);
        result.content = vec![ContentBlock::text(text)];
        if let Some((data, mime_type)) = value.image() {
            result.content.push(ContentBlock::image(data, mime_type));
        }
        Ok(Answer(result))
    }
}

impl ToText for ListDirectoryResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let _ = write!(out, "{}: ", shown_path(workdir, &self.path));
        match (self.returned, self.offset) {
            (0, 0) => out.push_str("empty directory"),
            (0, _) => out.push_str("no entries at this offset"),
            (n, o) => {
                let _ = write!(out, "{n} {}", if n == 1 { "entry" } else { "entries" });
                if o > 0 {
                    let _ = write!(out, " after offset {o}");
                }
            }
        }
        out.push_str(" (name, size in bytes for files)\n");
        for e in &self.entries {
            marked(out, &e.name, e.meta.kind);
            if let Some(size) = e.meta.size {
                let _ = write!(out, "\t{size}");
            }
            out.push('\n');
        }
        if self.omitted > 0 {
            let _ = writeln!(out, "[{} entries with non-UTF-8 names left out]", self.omitted);
        }
        if self.has_more {
            match &self.next_cursor {
                Some(c) => {
                    let _ = writeln!(out, "[more entries: call again with cursor={c:?}]");
                }
                None => {
                    let next = self.offset + self.returned;
                    let _ = writeln!(out, "[more entries: call again with offset={next}]");
                }
            }
        }
    }
}

impl<T: ToText> ToText for Matches<T> {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        if self.matches.is_empty() {
            out.push_str("no matches\n");
        }
        for m in &self.matches {
            m.to_text(workdir, out);
        }
        skipped(&self.skipped, out);
        if let Some(reason) = self.truncated_reason {
            let why = match reason {
                TruncatedReason::SearchLimitReached => "more matches exist (SEARCH_LIMIT_REACHED)",
                TruncatedReason::WalkLimitReached => {
                    "stopped at the walk limit (WALK_LIMIT_REACHED); more may exist"
                }
                TruncatedReason::SearchTimeout => {
                    "stopped at the time limit (SEARCH_TIMEOUT); more may exist"
                }
            };
            let _ = write!(out, "[truncated after {} matches: {why}", self.returned);
            match &self.next_cursor {
                Some(c) => {
                    let _ = writeln!(out, "; continue with cursor={c:?}]");
                }
                None => out.push_str("]\n"),
            }
        }
    }
}

/// The skipped counts, when any is not zero.
fn skipped(s: &SkippedCounts, out: &mut String) {
    let counts = [(s.binary, "binary"), (s.too_large, "too large"), (s.unreadable, "unreadable")];
    let said: Vec<String> =
        counts.iter().filter(|(n, _)| *n > 0).map(|(n, why)| format!("{n} {why}")).collect();
    if !said.is_empty() {
        let _ = writeln!(out, "[not searched: {}]", said.join(", "));
    }
}

impl ToText for ReadTextFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let path = shown_path(workdir, &self.path);
        match self.end_line {
            None => {
                let _ = writeln!(out, "{path}: no lines (empty file, or start past the end)");
            }
            Some(end) => {
                let _ = write!(out, "{path}: lines {} to {end}", self.start_line);
                match self.next_start_line {
                    Some(next) => {
                        let _ = writeln!(out, " of ?; continue with start_line={next}");
                    }
                    // Positions from the end: the last line is -1.
                    None if end < 0 => out.push_str(" (counted from the end)\n"),
                    None => {
                        let _ = writeln!(out, " of {end}");
                    }
                }
            }
        }
        out.push_str(&self.content);
    }
}

impl ToText for StatFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let _ = writeln!(out, "path: {}", shown_path(workdir, &self.path));
        let kind = match self.meta.kind {
            EntryKind::File => "file",
            EntryKind::Directory => "directory",
            EntryKind::Symlink => "symlink",
            EntryKind::Special => "special",
        };
        let _ = writeln!(out, "type: {kind}");
        if let Some(size) = self.meta.size {
            let _ = writeln!(out, "size: {size}");
        }
        if let Some(m) = &self.meta.modified_at {
            let _ = writeln!(out, "modified_at: {m}");
        }
        if let Some(m) = &self.mime_type {
            let _ = writeln!(out, "mime_type: {m}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{DirectoryEntry, EntryMeta};
    use serverfs_search::{FoundEntry, TextMatch};

    fn entry(name: &str, kind: EntryKind, size: Option<u64>) -> DirectoryEntry {
        let meta = EntryMeta { kind, size, modified_at: Some("2026-01-01T00:00:00Z".into()) };
        DirectoryEntry { name: name.into(), path: format!("d/{name}"), meta }
    }

    #[test]
    fn a_listing_is_one_entry_per_line_and_says_how_to_go_on() {
        let listing = ListDirectoryResult {
            path: "d".into(),
            entries: vec![
                entry("a.c", EntryKind::File, Some(12)),
                entry("sub", EntryKind::Directory, None),
                entry("l", EntryKind::Symlink, None),
            ],
            offset: 0,
            limit: 3,
            returned: 3,
            has_more: true,
            next_cursor: Some("l".into()),
            omitted: 1,
        };
        assert_eq!(
            listing.rendered(Some("w")),
            "w:/d: 3 entries (name, size in bytes for files)\na.c\t12\nsub/\nl (symlink)\n\
             [1 entries with non-UTF-8 names left out]\n\
             [more entries: call again with cursor=\"l\"]\n"
        );
        let empty = ListDirectoryResult {
            path: String::new(),
            entries: vec![],
            offset: 0,
            limit: 3,
            returned: 0,
            has_more: false,
            next_cursor: None,
            omitted: 0,
        };
        assert_eq!(empty.rendered(None), ".: empty directory (name, size in bytes for files)\n");
    }

    #[test]
    fn matches_are_one_per_line_and_a_cut_is_visible() {
        let found = Matches {
            matches: vec![
                FoundEntry { path: "a/b.rs".into(), kind: EntryKind::File },
                FoundEntry { path: "a/c".into(), kind: EntryKind::Directory },
            ],
            returned: 2,
            truncated: true,
            truncated_reason: Some(TruncatedReason::SearchLimitReached),
            skipped: SkippedCounts { unreadable: 0, too_large: 2, binary: 1 },
            next_cursor: Some("k".into()),
        };
        assert_eq!(
            found.rendered(None),
            "a/b.rs\na/c/\n[not searched: 1 binary, 2 too large]\n\
             [truncated after 2 matches: more matches exist (SEARCH_LIMIT_REACHED); continue with cursor=\"k\"]\n"
        );
        let hits = Matches {
            matches: vec![TextMatch { path: "x.c".into(), line: 7, text: "int x;".into() }],
            returned: 1,
            truncated: false,
            truncated_reason: None,
            skipped: SkippedCounts { unreadable: 0, too_large: 0, binary: 0 },
            next_cursor: None,
        };
        assert_eq!(hits.rendered(None), "x.c:7:int x;\n");
    }

    fn page(start: i64, end: Option<i64>, next: Option<i64>, content: &str) -> ReadTextFileResult {
        ReadTextFileResult {
            path: "f.c".into(),
            start_line: start,
            end_line: end,
            content: content.into(),
            bytes_returned: content.len() as u64,
            has_more: next.is_some(),
            next_start_line: next,
        }
    }

    #[test]
    fn a_read_is_the_lines_under_one_header() {
        let more = page(1, Some(2), Some(3), "a\nb\n");
        assert_eq!(
            more.rendered(None),
            "f.c: lines 1 to 2 of ?; continue with start_line=3\na\nb\n"
        );
        assert_eq!(
            page(3, Some(4), None, "c\nd").rendered(Some("w")),
            "w:/f.c: lines 3 to 4 of 4\nc\nd"
        );
        assert_eq!(
            page(-2, Some(-1), None, "c\nd\n").rendered(None),
            "f.c: lines -2 to -1 (counted from the end)\nc\nd\n"
        );
        assert_eq!(
            page(9, None, None, "").rendered(None),
            "f.c: no lines (empty file, or start past the end)\n"
        );
    }

    #[test]
    fn stat_is_a_few_key_value_lines() {
        let stat = StatFileResult {
            path: "f.c".into(),
            meta: EntryMeta {
                kind: EntryKind::File,
                size: Some(5),
                modified_at: Some("2026-01-01T00:00:00Z".into()),
            },
            mime_type: Some("text/x-c".into()),
        };
        assert_eq!(
            stat.rendered(None),
            "path: f.c\ntype: file\nsize: 5\nmodified_at: 2026-01-01T00:00:00Z\nmime_type: text/x-c\n"
        );
    }

    #[test]
    fn json_output_is_the_structured_content() {
        let stat = StatFileResult {
            path: "f".into(),
            meta: EntryMeta { kind: EntryKind::Directory, size: None, modified_at: None },
            mime_type: None,
        };
        for mode in [TextOutput::Json, TextOutput::Compact] {
            let Answer(result) = mode.answer(&stat).unwrap();
            let structured = result.structured_content.clone().unwrap();
            assert_eq!(structured["type"], "directory");
            let text = result.content[0].as_text().unwrap().text.clone();
            let mirror = serde_json::from_str::<serde_json::Value>(&text).ok();
            assert_eq!(mirror == Some(structured), mode == TextOutput::Json, "{text}");
        }
    }
}
