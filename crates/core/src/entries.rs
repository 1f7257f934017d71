//! Metadata and directory listings (list_directory, stat_file).
//!
//! Guarantees: listings are sorted by name in byte order and paged in one
//! pass over the directory, holding at most `offset + limit` names (a
//! bounded heap), where `offset ≤` [`MAX_LIST_OFFSET`]: memory per call is
//! bounded by the page, never by the directory's size. Pages further in are
//! reached with a name cursor (entries after the last name returned), which
//! costs the same as the first page. Only the returned page is `stat`ed; the
//! call's deadline is checked as the directory is read. Hidden and denied entries are left out; names that are not
//! UTF-8 are counted in `omitted`. Nothing here reveals a symlink target,
//! owner, inode or device.

use std::collections::BinaryHeap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::deadline::Deadline;
use crate::errno::errno_error;
use crate::error::FsError;
use crate::meta::{EntryKind, Meta};
use crate::root::{Location, Root};

/// Largest `offset` of a listing: the heap holds `offset + limit` names, so
/// this bounds the memory of one call. Deeper pages use the name cursor.
pub const MAX_LIST_OFFSET: u64 = 10_000;

/// Which page of a directory to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest<'a> {
    /// Only names that sort after this one (byte order), if given.
    pub after: Option<&'a str>,
    /// Visible entries to skip (after `after`), at most [`MAX_LIST_OFFSET`].
    pub offset: u64,
    /// Entries to return, ≥ 1.
    pub limit: u64,
}

/// What `stat_file` and each listing entry report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// Entry type.
    pub kind: EntryKind,
    /// Size in bytes, files only.
    pub size: Option<u64>,
    /// Modification time, RFC 3339 UTC with seconds (`…Z`); `None` if the
    /// timestamp cannot be represented.
    pub modified_at: Option<String>,
}

impl EntryInfo {
    /// From the resolver's metadata (an `lstat`-style result).
    pub fn from_meta(meta: &Meta) -> Self {
        Self {
            kind: meta.kind,
            size: (meta.kind == EntryKind::File).then_some(meta.size),
            modified_at: format_timestamp(meta.modified),
        }
    }
}

/// One listed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedEntry {
    /// The entry's name.
    pub name: String,
    /// Its path relative to the workdir root.
    pub path: String,
    /// Its metadata.
    pub info: EntryInfo,
}

/// One page of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The page, sorted by name (bytes).
    pub entries: Vec<ListedEntry>,
    /// Visible entries exist past this page.
    pub has_more: bool,
    /// Entries left out because their names are not UTF-8.
    pub omitted: u64,
}

/// Lists `loc`: the visible entries whose names sort after `page.after`,
/// skipping `page.offset` of them, at most `page.limit`, in name order.
///
/// # Errors
/// `INVALID_ARGUMENT` (offset above [`MAX_LIST_OFFSET`], a cursor that is
/// not a name), `NOT_A_DIRECTORY`, `SYMLINK_NOT_ALLOWED` and the resolver's
/// errors; `TIMEOUT`; `INTERNAL_ERROR` if reading the directory fails midway.
pub fn list_directory(
    root: &Root,
    loc: &Location<'_>,
    page: PageRequest<'_>,
    deadline: &Deadline,
) -> Result<Listing, FsError> {
    if page.offset > MAX_LIST_OFFSET {
        return Err(FsError::invalid(format!(
            "offset must be at most {MAX_LIST_OFFSET}; to page further, pass the previous page's next_cursor as cursor."
        )));
    }
    if let Some(after) = page.after
        && (after.is_empty() || after.contains(['/', '\0']))
    {
        return Err(FsError::invalid(
            "cursor is not one this server returned; pass next_cursor from the previous page.",
        ));
    }
    let dir = root.open_dir(loc)?;
    // Both are small: offset is capped above and limit by the caller.
    let keep = usize::try_from(page.offset.saturating_add(page.limit)).unwrap_or(usize::MAX);
    let base = loc.path().as_relative();
    let mut relative = String::new();
    let mut smallest: BinaryHeap<String> = BinaryHeap::with_capacity(keep.min(1024));
    let mut beyond: u64 = 0;
    let mut omitted: u64 = 0;

    let reader = rustix::fs::Dir::read_from(dir.fd()).map_err(|e| errno_error(e, loc))?;
    for (read, entry) in reader.enumerate() {
        if read % 1024 == 0 && deadline.check().is_err() {
            return Err(deadline.error(&format_args!("listing {loc}")));
        }
        let entry = entry.map_err(|e| errno_error(e, loc))?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(bytes) else {
            omitted += 1;
            continue;
        };
        if page.after.is_some_and(|after| name <= after) {
            continue;
        }
        relative.clear();
        if !base.is_empty() {
            relative.push_str(&base);
            relative.push('/');
        }
        relative.push_str(name);
        if !root.policy().entry_visible(&relative, name) {
            continue;
        }
        if smallest.len() < keep {
            smallest.push(name.to_owned());
        } else if smallest.peek().is_some_and(|max| name < max.as_str()) {
            smallest.pop();
            smallest.push(name.to_owned());
            beyond += 1;
        } else {
            beyond += 1;
        }
    }

    let names = smallest.into_sorted_vec();
    let skip = usize::try_from(page.offset).unwrap_or(usize::MAX);
    let mut entries = Vec::with_capacity(names.len().saturating_sub(skip));
    for name in names.into_iter().skip(skip) {
        match rustix::fs::statat(
            dir.fd(),
            OsStr::from_bytes(name.as_bytes()),
            AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => {
                let path = if base.is_empty() { name.clone() } else { format!("{base}/{name}") };
                let info = EntryInfo::from_meta(&Meta::from_stat(&stat));
                entries.push(ListedEntry { name, path, info });
            }
            // Removed since it was read: the listing shows the directory now.
            Err(Errno::NOENT) => {}
            Err(e) => return Err(errno_error(e, loc)),
        }
    }
    Ok(Listing { entries, has_more: beyond > 0, omitted })
}

/// RFC 3339 UTC with whole seconds, e.g. `2026-09-17T01:20:30Z`.
pub fn format_timestamp(unix_seconds: i64) -> Option<String> {
    const FORMAT: &[time::format_description::FormatItem<'static>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    let t = time::OffsetDateTime::from_unix_timestamp(unix_seconds).ok()?;
    (0..=9999).contains(&t.year()).then(|| t.format(FORMAT).ok()).flatten()
}

/// What [`guess_mime`] answers when the name says nothing.
pub const UNKNOWN_MIME: &str = "application/octet-stream";

/// Best-guess MIME type from a file name (configured overrides first).
pub fn guess_mime(name: &str) -> String {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("yml" | "yaml") => "application/yaml".to_owned(),
        Some("md" | "markdown") => "text/markdown".to_owned(),
        Some("py") => "text/x-python".to_owned(),
        _ => mime_guess::from_path(name).first_raw().unwrap_or(UNKNOWN_MIME).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(format_timestamp(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(format_timestamp(1_789_608_030).unwrap(), "2026-09-17T01:20:30Z");
        assert_eq!(format_timestamp(i64::MAX), None);
    }

    #[test]
    fn mime_overrides_and_fallback() {
        assert_eq!(guess_mime("docker-compose.yml"), "application/yaml");
        assert_eq!(guess_mime("a.YAML"), "application/yaml");
        assert_eq!(guess_mime("README.md"), "text/markdown");
        assert_eq!(guess_mime("main.py"), "text/x-python");
        assert_eq!(guess_mime("x.json"), "application/json");
        assert_eq!(guess_mime("Makefile"), "application/octet-stream");
        assert_eq!(guess_mime("x.unknownext"), "application/octet-stream");
    }
}
