//! Client path syntax and lexical normalisation.
//!
//! Guarantee: a [`RelPath`] holds only normal components — no empty, `.`,
//! `..`, NUL, `/` or `\` — so joining its components beneath a directory
//! handle can never name anything outside that directory lexically. Whether
//! a component is a symlink is the resolver's business, not this module's.

use crate::error::{ErrorCode, FsError};

/// Longest accepted client path, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted component, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// A normalised path relative to a workdir root; empty means the root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RelPath {
    components: Vec<String>,
}

impl RelPath {
    /// Checks syntax, then normalises `.` and `..` lexically.
    ///
    /// Order: NUL, backslash, drive or UNC forms →
    /// `INVALID_ARGUMENT`; absolute → `PATH_OUTSIDE_WORKDIR`; `..` above the
    /// root → `PATH_OUTSIDE_WORKDIR`. Messages name the path as
    /// `alias:/raw`.
    pub fn parse(raw: &str, alias: &str) -> Result<Self, FsError> {
        let shown = || format!("{alias}:/{}", printable(raw));
        let drive_form = || {
            FsError::invalid(format!(
                "{} looks like a Windows drive path; paths are relative to {alias}:/.",
                shown()
            ))
        };
        if raw.contains('\0') {
            return Err(FsError::invalid("paths must not contain NUL bytes."));
        }
        if raw.contains('\\') {
            return Err(FsError::invalid(format!(
                "{} uses a backslash; paths are '/'-separated and relative to {alias}:/.",
                shown()
            )));
        }
        if has_drive_prefix(raw) {
            return Err(drive_form());
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(FsError::invalid(format!("path is longer than {MAX_PATH_BYTES} bytes.")));
        }
        if raw.starts_with('/') {
            return Err(FsError::new(
                ErrorCode::PathOutsideWorkdir,
                format!("absolute paths are not accepted; give a path relative to {alias}:/."),
            ));
        }
        let mut components: Vec<String> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if components.pop().is_none() {
                        return Err(FsError::new(
                            ErrorCode::PathOutsideWorkdir,
                            format!("{} leaves {alias}:/.", shown()),
                        ));
                    }
                }
                name => {
                    if name.len() > MAX_NAME_BYTES {
                        return Err(FsError::invalid(format!(
                            "a path component is longer than {MAX_NAME_BYTES} bytes."
                        )));
                    }
                    components.push(name.to_owned());
                }
            }
        }
        // `x/../C:y` must not reach what `C:y` may not.
        if components.first().is_some_and(|c| has_drive_prefix(c)) {
            return Err(drive_form());
        }
        Ok(Self { components })
    }

    /// Builds a path from components already known to be normal (walk
    /// results). Returns `None` if any component is not.
    pub fn from_components<I, S>(parts: I) -> Option<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let components: Vec<String> = parts.into_iter().map(Into::into).collect();
        components.iter().all(|c| is_normal_component(c)).then_some(Self { components })
    }

    /// The normal components, root first.
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// True for the workdir root.
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The final component, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    /// `a/b/c`, or `""` for the root: the form returned to clients.
    pub fn as_relative(&self) -> String {
        self.components.join("/")
    }
}

fn is_normal_component(c: &str) -> bool {
    !c.is_empty()
        && c != "."
        && c != ".."
        && c.len() <= MAX_NAME_BYTES
        && !c.contains(['/', '\\', '\0'])
}

/// `C:`, `C:\…`, `C:/…`.
fn has_drive_prefix(raw: &str) -> bool {
    let b = raw.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Keeps messages one line and bounded whatever the client sent.
fn printable(raw: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = raw.chars().filter(|c| !c.is_control()).take(MAX).collect();
    if raw.chars().count() > MAX {
        out.push('…');
    }
    out.trim_start_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> String {
        RelPath::parse(raw, "w").unwrap().as_relative()
    }
    fn err(raw: &str) -> ErrorCode {
        RelPath::parse(raw, "w").unwrap_err().code()
    }

    #[test]
    fn root_forms() {
        for raw in ["", ".", "./", "a/..", "./a/../.", "//"] {
            if raw == "//" {
                assert_eq!(err(raw), ErrorCode::PathOutsideWorkdir);
            } else {
                assert_eq!(ok(raw), "", "{raw}");
            }
        }
    }

    #[test]
    fn normalises_lexically() {
        assert_eq!(ok("a/./b//c/"), "a/b/c");
        assert_eq!(ok("link/../x"), "x");
        assert_eq!(ok("a/b/../../c"), "c");
    }

    #[test]
    fn traversal_is_outside() {
        for raw in ["..", "../", "../../", "foo/../../../etc/passwd", "a/../../x", "../01-x/f"] {
            assert_eq!(err(raw), ErrorCode::PathOutsideWorkdir, "{raw}");
        }
    }

    #[test]
    fn absolute_is_outside() {
        assert_eq!(err("/etc/passwd"), ErrorCode::PathOutsideWorkdir);
        assert_eq!(err("/"), ErrorCode::PathOutsideWorkdir);
        assert_eq!(err("//server/share"), ErrorCode::PathOutsideWorkdir);
    }

    #[test]
    fn windows_forms_and_nul_are_invalid() {
        for raw in
            ["C:\\Windows", "C:/Windows", "c:", "\\\\server\\share", "a\\..\\..\\etc", "a\0b", "\0"]
        {
            assert_eq!(err(raw), ErrorCode::InvalidArgument, "{raw:?}");
        }
    }

    #[test]
    fn lengths_are_bounded() {
        assert_eq!(err(&"a".repeat(256)), ErrorCode::InvalidArgument);
        assert_eq!(err(&"a/".repeat(2049)), ErrorCode::InvalidArgument);
        assert_eq!(ok(&"a".repeat(255)).len(), 255);
    }

    #[test]
    fn messages_never_echo_control_characters() {
        let e = RelPath::parse("\n\\x", "w").unwrap_err();
        assert!(!e.message().contains('\n'));
    }

    /// A fuzz-style property check on stable Rust: 200,000 paths built from
    /// hostile pieces. Every accepted path is normal and a fixed point of
    /// `parse`; nothing is accepted whose `..`s outnumber the names before
    /// them.
    #[test]
    fn normalisation_properties() {
        const PIECES: [&str; 12] =
            ["a", "b", "..", ".", "/", "//", "\\", "\0", "C:", "é", ".env", "x y"];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200_000 {
            let len = (next() % 10) as usize;
            let raw: String =
                (0..len).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
            match RelPath::parse(&raw, "w") {
                Ok(p) => {
                    assert!(
                        p.components().iter().all(|c| is_normal_component(c)),
                        "{raw:?} -> {p:?}"
                    );
                    assert_eq!(RelPath::parse(&p.as_relative(), "w").unwrap(), p, "{raw:?}");
                    // a lexical depth walk never goes below the root
                    let mut depth = 0i64;
                    for part in raw.split('/') {
                        match part {
                            "" | "." => {}
                            ".." => depth -= 1,
                            _ => depth += 1,
                        }
                        assert!(depth >= 0, "{raw:?} escaped but was accepted");
                    }
                }
                Err(e) => assert!(
                    matches!(e.code(), ErrorCode::InvalidArgument | ErrorCode::PathOutsideWorkdir),
                    "{raw:?}: {e}"
                ),
            }
        }
    }

    #[test]
    fn from_components_rejects_abnormal() {
        assert!(RelPath::from_components(["a", "b"]).is_some());
        assert!(RelPath::from_components(["a", ".."]).is_none());
        assert!(RelPath::from_components(["a/b"]).is_none());
        assert!(RelPath::from_components([""]).is_none());
    }
}
