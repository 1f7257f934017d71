//! Tool inputs and outputs. The JSON Schemas clients see are derived from
//! these types (never written by hand); unknown arguments are rejected.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// list_workdirs takes no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListWorkdirsArgs {}

/// One configured workdir.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkdirInfo {
    /// The name to pass as `workdir` to the other tools.
    pub alias: String,
    /// What the administrator says the workdir holds.
    pub description: Option<String>,
}

/// The configured workdirs, in configuration order.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListWorkdirsResult {
    /// The workdirs.
    pub workdirs: Vec<WorkdirInfo>,
}

/// Arguments of list_directory.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryArgs {
    /// Workdir alias (see list_workdirs).
    pub workdir: String,
    /// Directory path relative to the workdir root; "" is the root.
    #[serde(default)]
    pub path: String,
    /// Number of entries to skip (entries are sorted by name), at most
    /// 10000; to go further, use `cursor`.
    #[serde(default)]
    pub offset: u64,
    /// Continue after the previous page: its `next_cursor`. `offset` then
    /// counts from there.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Page size; defaults to the server's list limit.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// One directory entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DirectoryEntry {
    /// Entry name.
    pub name: String,
    /// Path relative to the workdir root.
    pub path: String,
    /// Type, size, modification time.
    #[serde(flatten)]
    pub meta: EntryMeta,
}

/// What listings and stat_file say of an entry (never owner, inode, device
/// or link target).
#[derive(Debug, Serialize, JsonSchema)]
pub struct EntryMeta {
    /// Entry type (a symlink is reported as such, never followed).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Last modification, RFC 3339 UTC.
    pub modified_at: Option<String>,
}

impl From<serverfs_core::entries::EntryInfo> for EntryMeta {
    fn from(info: serverfs_core::entries::EntryInfo) -> Self {
        Self { kind: info.kind.into(), size: info.size, modified_at: info.modified_at }
    }
}

/// Entry types.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    /// Regular file.
    File,
    /// Directory.
    Directory,
    /// Symbolic link (listed, never followed; its target is not revealed).
    Symlink,
    /// FIFO, socket or device.
    Special,
}

impl From<serverfs_core::EntryKind> for EntryType {
    fn from(kind: serverfs_core::EntryKind) -> Self {
        match kind {
            serverfs_core::EntryKind::File => Self::File,
            serverfs_core::EntryKind::Directory => Self::Directory,
            serverfs_core::EntryKind::Symlink => Self::Symlink,
            serverfs_core::EntryKind::Special => Self::Special,
        }
    }
}

/// One page of a directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListDirectoryResult {
    /// Workdir alias.
    pub workdir: String,
    /// Normalised directory path.
    pub path: String,
    /// Entries, sorted by name; hidden and denied entries are left out.
    pub entries: Vec<DirectoryEntry>,
    /// Offset used.
    pub offset: u64,
    /// Limit used.
    pub limit: u64,
    /// Number of entries returned.
    pub returned: u64,
    /// More entries follow; call again with `cursor` = `next_cursor` (or
    /// offset + returned).
    pub has_more: bool,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Entries left out because their names are not valid UTF-8.
    pub omitted: u64,
}

/// Arguments of find_files.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFilesArgs {
    /// Workdir alias.
    pub workdir: String,
    /// Directory to search from, relative to the workdir root.
    #[serde(default)]
    pub path: String,
    /// Glob on entry names (`*.py`, `*compose*.yml`, `{a,b}.txt`); a pattern
    /// containing `/` is matched against the path relative to `path` (`**`
    /// allowed).
    pub pattern: String,
    /// Maximum matches; defaults to the server's search limit.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Continue a cut-short answer: the previous result's `next_cursor`,
    /// with the same other arguments (`limit` may change).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One found entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FoundEntry {
    /// Path relative to the workdir root.
    pub path: String,
    /// Entry type.
    #[serde(rename = "type")]
    pub kind: EntryType,
}

/// Why a search stopped early.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TruncatedReason {
    /// More matches exist than `limit`.
    SearchLimitReached,
    /// The walk visited the configured maximum of entries.
    WalkLimitReached,
    /// The search ran out of time.
    SearchTimeout,
}

impl From<serverfs_search::TruncatedReason> for TruncatedReason {
    fn from(reason: serverfs_search::TruncatedReason) -> Self {
        match reason {
            serverfs_search::TruncatedReason::SearchLimitReached => Self::SearchLimitReached,
            serverfs_search::TruncatedReason::WalkLimitReached => Self::WalkLimitReached,
            serverfs_search::TruncatedReason::SearchTimeout => Self::SearchTimeout,
        }
    }
}

/// What find_files and search_text return.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}Matches")]
pub struct Matches<T> {
    /// Matches in walk order (depth-first, names in byte order), then line
    /// order.
    pub matches: Vec<T>,
    /// Number of matches returned.
    pub returned: u64,
    /// True when more may exist.
    pub truncated: bool,
    /// Why the search stopped, when truncated.
    pub truncated_reason: Option<TruncatedReason>,
    /// What was passed over without being searched: a search with no match
    /// but a non-zero count here did not see everything.
    pub skipped: SkippedCounts,
    /// When truncated: pass as `cursor`, with the same other arguments, to
    /// continue exactly where this answer stopped (no duplicate, no gap);
    /// null otherwise.
    pub next_cursor: Option<String>,
}

/// Files and directories a find/search passed over, by reason.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SkippedCounts {
    /// Could not be read by the server (permissions, a path too long, a line
    /// over 8 MiB).
    pub unreadable: u64,
    /// Larger than SERVERFS_SEARCH_MAX_FILE_BYTES (search_text).
    pub too_large: u64,
    /// Contain NUL bytes (search_text).
    pub binary: u64,
}

impl From<serverfs_search::Skipped> for SkippedCounts {
    fn from(s: serverfs_search::Skipped) -> Self {
        Self { unreadable: s.unreadable, too_large: s.too_large, binary: s.binary }
    }
}

impl<T> Matches<T> {
    /// From the search library's outcome, converting each match.
    pub(crate) fn from_outcome<S>(
        outcome: serverfs_search::Outcome<S>,
        convert: impl Fn(S) -> T,
    ) -> Self {
        let matches: Vec<T> = outcome.matches.into_iter().map(convert).collect();
        Self {
            returned: matches.len() as u64,
            matches,
            truncated: outcome.truncated_reason.is_some(),
            truncated_reason: outcome.truncated_reason.map(Into::into),
            skipped: outcome.skipped.into(),
            next_cursor: outcome.next_cursor,
        }
    }
}

/// find_files result.
pub type FindFilesResult = Matches<FoundEntry>;

/// Arguments of search_text.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchTextArgs {
    /// Workdir alias.
    pub workdir: String,
    /// Directory (or file) to search, relative to the workdir root.
    #[serde(default)]
    pub path: String,
    /// Literal text to find (not a regular expression), 1 to 1000 characters.
    pub query: String,
    /// Optional glob on file names, as in find_files.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case exactly (default true).
    #[serde(default = "yes")]
    pub case_sensitive: bool,
    /// Maximum matches; defaults to the server's search limit.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Continue a cut-short answer: the previous result's `next_cursor`,
    /// with the same other arguments (`limit` may change).
    #[serde(default)]
    pub cursor: Option<String>,
}

fn yes() -> bool {
    true
}

/// One matching line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TextMatch {
    /// Path relative to the workdir root.
    pub path: String,
    /// Line number, from 1.
    pub line: u64,
    /// The line without its terminator, cut to at most 500 bytes around the
    /// match.
    pub text: String,
}

/// search_text result.
pub type SearchTextResult = Matches<TextMatch>;

/// Arguments of read_text_file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadTextFileArgs {
    /// Workdir alias.
    pub workdir: String,
    /// File path relative to the workdir root.
    pub path: String,
    /// First line to return, from 1 (default 1).
    #[serde(default)]
    pub start_line: Option<u64>,
    /// Maximum lines to return (default 200, capped by the server).
    #[serde(default)]
    pub max_lines: Option<u64>,
}

/// One page of a text file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadTextFileResult {
    /// Workdir alias.
    pub workdir: String,
    /// Normalised file path.
    pub path: String,
    /// First line asked for.
    pub start_line: u64,
    /// Last line returned; null when nothing was returned.
    pub end_line: Option<u64>,
    /// The lines, with their original terminators.
    pub content: String,
    /// UTF-8 length of `content`.
    pub bytes_returned: u64,
    /// More lines follow.
    pub has_more: bool,
    /// Pass as `start_line` to continue; null at the end.
    pub next_start_line: Option<u64>,
}

/// Arguments of stat_file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatFileArgs {
    /// Workdir alias.
    pub workdir: String,
    /// Path relative to the workdir root; "" is the root.
    #[serde(default)]
    pub path: String,
}

/// Metadata of one entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatFileResult {
    /// Workdir alias.
    pub workdir: String,
    /// Normalised path.
    pub path: String,
    /// Type, size, modification time.
    #[serde(flatten)]
    pub meta: EntryMeta,
    /// Best guess from the name for files; null otherwise.
    pub mime_type: Option<String>,
}
