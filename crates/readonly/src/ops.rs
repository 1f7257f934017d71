//! The tools' logic, synchronous and transport-free: arguments in, result or
//! [`FsError`] out. Every path goes through a [`Workdirs`] root.

use std::num::NonZeroI64;

use serverfs_core::entries::{self, PageRequest, guess_mime};
use serverfs_core::text;
use serverfs_core::{Deadline, EntryKind, FsError};

use crate::limits::Limits;

use serverfs_search::{Budget, SearchQuery};

use crate::schema::{
    DirectoryEntry, FindFilesArgs, FindFilesResult, FoundEntry, ListDirectoryArgs,
    ListDirectoryResult, ListWorkdirsResult, Matches, ReadTextFileArgs, ReadTextFileResult,
    SearchTextArgs, SearchTextResult, StatFileArgs, StatFileResult, TextMatch, WorkdirInfo,
};
use crate::workdirs::Workdirs;

/// Everything a call needs, built once at start-up.
#[derive(Debug)]
pub struct ReadOnlyFs {
    workdirs: Workdirs,
    limits: Limits,
}

impl ReadOnlyFs {
    /// Binds the workdirs to validated limits.
    pub fn new(workdirs: Workdirs, limits: Limits) -> Self {
        Self { workdirs, limits }
    }

    pub(crate) fn list_workdirs(&self) -> ListWorkdirsResult {
        ListWorkdirsResult {
            workdirs: self
                .workdirs
                .workdirs()
                .iter()
                .map(|w| WorkdirInfo {
                    alias: w.alias().to_owned(),
                    description: w.description().map(str::to_owned),
                })
                .collect(),
        }
    }

    pub(crate) fn list_directory(
        &self,
        args: &ListDirectoryArgs,
        deadline: &Deadline,
    ) -> Result<ListDirectoryResult, FsError> {
        let limit = bounded(
            "limit",
            args.limit,
            self.limits.default_list_limit,
            self.limits.max_list_entries,
        )?;
        let (root, loc) = self.workdirs.locate(&args.workdir, &args.path)?;
        let page = PageRequest { after: args.cursor.as_deref(), offset: args.offset, limit };
        let listing = entries::list_directory(root, &loc, page, deadline)?;
        let next_cursor =
            if listing.has_more { listing.entries.last().map(|e| e.name.clone()) } else { None };
        let entries: Vec<DirectoryEntry> = listing
            .entries
            .into_iter()
            .map(|e| DirectoryEntry { name: e.name, path: e.path, meta: e.info.into() })
            .collect();
        Ok(ListDirectoryResult {
            workdir: args.workdir.clone(),
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
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How long one call may run (find, search and reads alike).
    pub(crate) fn call_timeout(&self) -> std::time::Duration {
        self.limits.search_timeout
    }

    pub(crate) fn read_text_file(
        &self,
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
        let (root, loc) = self.workdirs.locate(&args.workdir, &args.path)?;
        let (file, _) = root.open_file(&loc)?;
        let page = text::read_page(
            &file,
            &loc,
            start_line,
            max_lines,
            self.limits.max_read_bytes,
            deadline,
        )?;
        Ok(ReadTextFileResult {
            workdir: args.workdir.clone(),
            path: loc.path().as_relative(),
            start_line: page.start_line,
            end_line: page.end_line,
            bytes_returned: page.content.len() as u64,
            content: page.content,
            has_more: page.has_more,
            next_start_line: page.next_start_line,
        })
    }

    pub(crate) fn stat_file(&self, args: &StatFileArgs) -> Result<StatFileResult, FsError> {
        let (root, loc) = self.workdirs.locate(&args.workdir, &args.path)?;
        let info = entries::stat_entry(root, &loc)?;
        let mime_type = match (info.kind, loc.path().file_name()) {
            (EntryKind::File, Some(name)) => Some(guess_mime(name)),
            _ => None,
        };
        Ok(StatFileResult {
            workdir: args.workdir.clone(),
            path: loc.path().as_relative(),
            meta: info.into(),
            mime_type,
        })
    }

    pub(crate) fn find_files(
        &self,
        args: &FindFilesArgs,
        deadline: &Deadline,
    ) -> Result<FindFilesResult, FsError> {
        let budget = &self.search_budget(deadline);
        let limit = self.search_limit(args.limit)?;
        let (root, loc) = self.workdirs.locate(&args.workdir, &args.path)?;
        let found = serverfs_search::find_files(
            root,
            &loc,
            &args.pattern,
            limit,
            args.cursor.as_deref(),
            budget,
        )?;
        Ok(Matches::from_outcome(found, |m| FoundEntry { path: m.path, kind: m.kind.into() }))
    }

    pub(crate) fn search_text(
        &self,
        args: &SearchTextArgs,
        deadline: &Deadline,
    ) -> Result<SearchTextResult, FsError> {
        let budget = &self.search_budget(deadline);
        let limit = self.search_limit(args.limit)?;
        let (root, loc) = self.workdirs.locate(&args.workdir, &args.path)?;
        let query = SearchQuery {
            query: &args.query,
            glob: args.glob.as_deref(),
            case_sensitive: args.case_sensitive,
            limit,
            max_file_bytes: self.limits.search_max_file_bytes,
            cursor: args.cursor.as_deref(),
        };
        let found = serverfs_search::search_text(root, &loc, &query, budget)?;
        Ok(Matches::from_outcome(found, |m| TextMatch { path: m.path, line: m.line, text: m.text }))
    }

    /// The budget of one find/search call under its deadline.
    fn search_budget(&self, deadline: &Deadline) -> Budget {
        Budget::with_deadline(self.limits.max_walk_entries, deadline.clone())
    }

    fn search_limit(&self, limit: Option<u64>) -> Result<u64, FsError> {
        bounded("limit", limit, self.limits.default_search_results, self.limits.max_search_results)
    }

    /// The whole text behind a `serverfs://{workdir}/{path}` URI for
    /// `resources/read`: the same resolver and reader as read_text_file,
    /// capped at the read limit.
    pub(crate) fn read_resource(
        &self,
        uri: &str,
        deadline: &Deadline,
    ) -> Result<ResourceText, FsError> {
        let (alias, path) = crate::uri::parse(uri)?;
        let (root, loc) = self.workdirs.locate(&alias, &path)?;
        let (file, meta) = root.open_file(&loc)?;
        let content =
            text::read_whole(&file, meta.size, &loc, self.limits.max_read_bytes, deadline)?;
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

/// The type of a resource's text when its name gives none.
const TEXT_MIME: &str = "text/plain; charset=utf-8";

/// A resource's text and MIME type.
#[derive(Debug)]
pub(crate) struct ResourceText {
    pub(crate) content: String,
    pub(crate) mime: String,
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
