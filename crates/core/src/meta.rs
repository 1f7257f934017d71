//! [`Meta`] and [`EntryKind`]: what the resolver tells callers about an
//! entry.
//!
//! Guarantee: nothing here carries an owner, group, inode or device
//! number. The raw `stat` stays inside this crate; callers see only the
//! type, size, modification time and permission bits, which is all a tool
//! may show and all a write crate needs to keep a file's mode.

use rustix::fs::{FileType, Stat};

/// The type of a filesystem entry as clients see it: `file` (regular
/// file), `directory`, `symlink` (reported as itself, never by its target)
/// or `special` (FIFO, socket or device); the serde form is the wire name.
//
// The variants carry plain comments, not doc comments: without them the
// derived schema is `{"type": "string", "enum": [...]}` rather than a
// `oneOf` of four `const` branches, which is the same constraint but what
// clients that validate every result against the output schema (the MCP
// Python SDK does) check faster (issue 10, the SDK's validator on real
// results: a stat 0.084 → 0.043 ms, a 14-entry listing 1.18 → 0.85 ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    // Regular file.
    File,
    // Directory.
    Directory,
    // Symbolic link (reported as itself, never by its target).
    Symlink,
    // FIFO, socket or device.
    Special,
}

impl EntryKind {
    /// From a raw `st_mode`.
    pub(crate) fn from_mode(st_mode: u32) -> Self {
        match FileType::from_raw_mode(st_mode) {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            _ => Self::Special,
        }
    }
}

/// An entry's metadata, read with `fstat` on the handle the resolver opened
/// (or `fstatat` beneath it, never following a link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Meta {
    /// The entry's type.
    pub kind: EntryKind,
    /// `st_size` in bytes (for a symlink, the length of its target).
    pub size: u64,
    /// Modification time, whole seconds since the Unix epoch.
    pub modified: i64,
    /// Permission bits: `st_mode & 0o7777` (setuid, setgid, sticky, rwx).
    pub mode: u32,
}

impl Meta {
    pub(crate) fn from_stat(stat: &Stat) -> Self {
        Self {
            kind: EntryKind::from_mode(stat.st_mode),
            // A negative size never comes from the kernel; 0 is harmless.
            size: u64::try_from(stat.st_size).unwrap_or(0),
            modified: stat.st_mtime,
            mode: stat.st_mode & 0o7777,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clients match on these strings: pinned on the type that reaches the
    /// wire.
    #[test]
    fn entry_kind_wire_names() {
        for (kind, wire) in [
            (EntryKind::File, "file"),
            (EntryKind::Directory, "directory"),
            (EntryKind::Symlink, "symlink"),
            (EntryKind::Special, "special"),
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), wire);
        }
    }
}
