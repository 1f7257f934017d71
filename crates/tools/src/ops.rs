//! The read tools' logic, synchronous and transport-free: a path already
//! located in a core [`Root`] and the tool's arguments in, result or
//! [`FsError`] out. Nothing here knows how a binary names its roots (one
//! project root, or serverfs-mcp's workdirs); every access goes through the
//! root's resolver.

use std::num::NonZeroI64;

use serverfs_core::entries::{self, EntryInfo, PageRequest, guess_mime};
use serverfs_core::text;
use serverfs_core::{Deadline, Entry, EntryKind, FsError, Location, Root};

use crate::limits::Limits;
use crate::runner::Reported;

use serverfs_search::{Budget, SearchQuery};

use crate::schema::{
    DirectoryEntry, FindFilesArgs, FindFilesResult, ListDirectoryArgs, ListDirectoryResult,
    Matches, ReadTextFileArgs, ReadTextFileResult, SearchTextArgs, SearchTextResult,
    StatFileResult,
};

/// The read tools under one set of limits, built once at start-up.
#[derive(Debug)]
pub struct ReadTools {
    limits: Limits,
}

impl ReadTools {
    /// The tools, held to validated `limits`.
    pub fn new(limits: Limits) -> Self {
        Self { limits }
    }

    /// list_directory of `loc` (located from `args.path`).
    pub fn list_directory(
        &self,
        root: &Root,
        loc: &Location<'_>,
        args: &ListDirectoryArgs,
        deadline: &Deadline,
    ) -> Result<ListDirectoryResult, FsError> {
        let limit = bounded(
            "limit",
            args.limit,
            self.limits.default_list_limit,
            self.limits.max_list_entries,
        )?;
        let page = PageRequest { after: given(args.cursor.as_ref()), offset: args.offset, limit };
        let listing = entries::list_directory(root, loc, page, deadline)?;
        let next_cursor =
            if listing.has_more { listing.entries.last().map(|e| e.name.clone()) } else { None };
        let entries: Vec<DirectoryEntry> = listing
            .entries
            .into_iter()
            .map(|e| DirectoryEntry { name: e.name, path: e.path, meta: e.info.into() })
            .collect();
        Ok(ListDirectoryResult {
            path: loc.path().as_relative(),
            returned: entries.len() as u64,
            entries,
            offset: args.offset,
            limit,
            has_more: listing.has_more,
            next_cursor,
            omitted: listing.omitted,
        })
    }

    /// The limits calls are held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How long one call may run (find, search and reads alike).
    pub fn call_timeout(&self) -> std::time::Duration {
        self.limits.search_timeout
    }

    /// read_text_file of `loc` (located from `args.path`).
    pub fn read_text_file(
        &self,
        root: &Root,
        loc: &Location<'_>,
        args: &ReadTextFileArgs,
        deadline: &Deadline,
    ) -> Result<ReadTextFileResult, FsError> {
        let start_line = match args.start_line {
            None => text::FIRST_LINE,
            Some(line) => NonZeroI64::new(line).ok_or_else(|| {
                FsError::invalid(
                    "start_line must be 1 or more (from the start) or -1 or less (from the end); got 0.",
                )
            })?,
        };
        let max_lines = bounded(
            "max_lines",
            args.max_lines,
            self.limits.default_read_lines(),
            self.limits.max_read_lines,
        )?;
        let (file, _) = root.open_file(loc)?;
        let page = text::read_page(
            &file,
            loc,
            start_line,
            max_lines,
            self.limits.max_read_bytes,
            deadline,
        )?;
        Ok(ReadTextFileResult {
            path: loc.path().as_relative(),
            start_line: page.start_line,
            end_line: page.end_line,
            bytes_returned: page.content.len() as u64,
            content: page.content,
            has_more: page.has_more,
            next_start_line: page.next_start_line,
        })
    }

    /// stat_file of `loc`. A file whose name says nothing of its type is
    /// `text/plain` when its head is UTF-8 text (as resources/read says).
    pub fn stat_file(&self, root: &Root, loc: &Location<'_>) -> Result<StatFileResult, FsError> {
        let entry = root.lookup(loc)?;
        let info = EntryInfo::from_meta(entry.meta());
        let mime_type = match (info.kind, loc.path().file_name()) {
            (EntryKind::File, Some(name)) => {
                let mime = guess_mime(name);
                // The head is read through the handle just looked up.
                let text = mime == entries::UNKNOWN_MIME && starts_as_text(entry);
                Some(if text { TEXT_MIME.to_owned() } else { mime })
            }
            _ => None,
        };
        Ok(StatFileResult { path: loc.path().as_relative(), meta: info.into(), mime_type })
    }

    /// find_files below `loc` (located from `args.path`).
    pub fn find_files(
        &self,
        root: &Root,
        loc: &Location<'_>,
        args: &FindFilesArgs,
        deadline: &Deadline,
    ) -> Result<FindFilesResult, FsError> {
        let budget = &self.search_budget(deadline);
        let limit = self.search_limit(args.limit)?;
        let found = serverfs_search::find_files(
            root,
            loc,
            &args.pattern,
            limit,
            given(args.cursor.as_ref()),
            budget,
        )?;
        Ok(Matches::from_outcome(found))
    }

    /// search_text below or in `loc` (located from `args.path`).
    pub fn search_text(
        &self,
        root: &Root,
        loc: &Location<'_>,
        args: &SearchTextArgs,
        deadline: &Deadline,
    ) -> Result<SearchTextResult, FsError> {
        let budget = &self.search_budget(deadline);
        let limit = self.search_limit(args.limit)?;
        let query = SearchQuery {
            query: &args.query,
            glob: given(args.glob.as_ref()),
            case_sensitive: args.case_sensitive,
            limit,
            max_file_bytes: self.limits.search_max_file_bytes,
            cursor: given(args.cursor.as_ref()),
        };
        let found = serverfs_search::search_text(root, loc, &query, budget)?;
        Ok(Matches::from_outcome(found))
    }

    /// The budget of one find/search call under its deadline.
    fn search_budget(&self, deadline: &Deadline) -> Budget {
        Budget::with_deadline(self.limits.max_walk_entries, deadline.clone())
    }

    fn search_limit(&self, limit: Option<u64>) -> Result<u64, FsError> {
        bounded("limit", limit, self.limits.default_search_results, self.limits.max_search_results)
    }

    /// The whole text of a file, for `resources/read`: the same resolver
    /// and reader as read_text_file, capped at the read limit.
    pub fn read_whole_text(
        &self,
        root: &Root,
        loc: &Location<'_>,
        deadline: &Deadline,
    ) -> Result<ResourceText, FsError> {
        let (file, meta) = root.open_file(loc)?;
        let content =
            text::read_whole(&file, meta.size, loc, self.limits.max_read_bytes, deadline)?;
        // The content was just decoded as UTF-8 text: a name that says
        // nothing more specific makes it plain text, not octet-stream.
        let mime = loc
            .path()
            .file_name()
            .map(guess_mime)
            .filter(|m| m != entries::UNKNOWN_MIME)
            .unwrap_or_else(|| TEXT_MIME.to_owned());
        Ok(ResourceText { content, mime })
    }
}

/// Whether the file's first [`text::BINARY_SAMPLE_BYTES`] are UTF-8 text
/// without NUL (a character cut by the sample's end is fine); false when
/// it cannot be read.
fn starts_as_text(entry: Entry<'_>) -> bool {
    use std::io::Read;
    let Ok((file, meta)) = entry.open_file() else { return false };
    // At most the size just seen: a file shorter than the sample is read in
    // one call, with no second read to find its end.
    let sample = meta.size.min(text::BINARY_SAMPLE_BYTES as u64);
    let mut head = Vec::with_capacity(text::BINARY_SAMPLE_BYTES);
    if file.take(sample).read_to_end(&mut head).is_err() {
        return false;
    }
    !head.contains(&0)
        && match std::str::from_utf8(&head) {
            Ok(_) => true,
            Err(e) => e.error_len().is_none(),
        }
}

/// The type of a resource's text when its name gives none.
const TEXT_MIME: &str = "text/plain; charset=utf-8";

/// A resource's text and MIME type.
#[derive(Debug)]
pub struct ResourceText {
    /// The whole text.
    pub content: String,
    /// Its MIME type.
    pub mime: String,
}

impl Reported for ListDirectoryResult {}
impl Reported for StatFileResult {}
impl<T> Reported for Matches<T> {}
impl Reported for ResourceText {
    fn bytes_returned(&self) -> u64 {
        self.content.len() as u64
    }
}
impl Reported for ReadTextFileResult {
    fn bytes_returned(&self) -> u64 {
        self.bytes_returned
    }
}

/// An optional text argument as given: `""` means not given, as `null`
/// does (strict clients must send something for `cursor` and
/// `glob`, and send `""` as readily as `null`).
fn given(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

/// `value` (or `default`) checked to lie in `1..=max`.
pub(crate) fn bounded(
    name: &str,
    value: Option<u64>,
    default: u64,
    max: u64,
) -> Result<u64, FsError> {
    let v = value.unwrap_or(default);
    if (1..=max).contains(&v) {
        Ok(v)
    } else {
        Err(FsError::invalid(format!("{name}: expected an integer from 1 to {max}; got {v}.")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::{Policy, RootOptions};

    /// A name swapped between a text file and a FIFO while it is stat'ed:
    /// every answer is one entry's (a file with the text's type, or a
    /// special file with none), and no call blocks on the FIFO.
    #[test]
    fn the_sniff_reads_the_entry_that_was_stat_ed_while_a_fifo_is_swapped_in() {
        let dir = tempfile::tempdir().unwrap();
        let (text, fifo) = (dir.path().join("text"), dir.path().join("fifo"));
        std::fs::write(&text, "plain text\n").unwrap();
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let root = Root::open(dir.path(), RootOptions::new("t", Policy::new(false, &[]).unwrap()))
            .unwrap();
        let tools = ReadTools::new(Limits::default());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, dir) = (stop.clone(), dir.path().to_owned());
            std::thread::spawn(move || {
                let name = dir.join("NAMELESS");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Hard links keep both originals; rename swaps atomically.
                    for source in ["text", "fifo"] {
                        let tmp = dir.join(format!("{source}.tmp"));
                        let _ = std::fs::remove_file(&tmp);
                        std::fs::hard_link(dir.join(source), &tmp).unwrap();
                        std::fs::rename(&tmp, &name).unwrap();
                    }
                }
            })
        };
        let (mut files, mut specials) = (0, 0);
        // Until both kinds were seen often (events, not time: a busy
        // machine only makes it take longer).
        while files < 200 || specials < 200 {
            let Ok(loc) = root.locate("NAMELESS") else { continue };
            match tools.stat_file(&root, &loc) {
                Ok(r) if r.meta.kind == EntryKind::File => {
                    assert_eq!(
                        r.mime_type.as_deref(),
                        Some(TEXT_MIME),
                        "a file's type from another entry"
                    );
                    files += 1;
                }
                Ok(r) => {
                    assert_eq!((r.meta.kind, r.mime_type), (EntryKind::Special, None));
                    specials += 1;
                }
                Err(e) => assert_eq!(e.code(), serverfs_core::ErrorCode::PathNotFound, "{e}"),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
    }
}
