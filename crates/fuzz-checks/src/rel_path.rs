//! Fuzzes the client path normaliser, `serverfs_core::RelPath::parse`.
//!
//! Properties: it never panics; an accepted path holds only normal
//! components (no empty, `.`, `..`, `/`, `\`, NUL, none over NAME_MAX), is
//! not absolute, never climbed above the root on the way, and is a fixed
//! point (`parse(as_relative())` gives it back); a refusal is
//! INVALID_ARGUMENT or PATH_OUTSIDE_WORKDIR with a one-line message.

use serverfs_core::path::MAX_NAME_BYTES;
use serverfs_core::{ErrorCode, RelPath};

/// The target: checks every property above on the input libFuzzer's
/// `fuzz_target!` would decode from `data`.
pub fn check(data: &[u8]) {
    let Some(raw) = crate::input::<&str>(data) else { return };
    match RelPath::parse(raw, "w") {
        Ok(path) => {
            let relative = path.as_relative();
            assert!(!relative.starts_with('/'), "{raw:?} -> absolute {relative:?}");
            assert!(!relative.contains(['\0', '\\']), "{raw:?} -> {relative:?}");
            for c in path.components() {
                assert!(!c.is_empty() && c != "." && c != "..", "{raw:?} -> component {c:?}");
                assert!(!c.contains('/') && c.len() <= MAX_NAME_BYTES, "{raw:?} -> {c:?}");
            }
            // A fixed point, and the same value the walk's constructor builds.
            assert_eq!(RelPath::parse(&relative, "w").as_ref(), Ok(&path), "{raw:?}");
            assert_eq!(RelPath::from_components(path.components().to_vec()).as_ref(), Some(&path));
            assert_eq!(path.is_root(), relative.is_empty());
            // Lexically, no prefix of the raw path went above the root.
            let mut depth = 0i64;
            for part in raw.split('/') {
                match part {
                    "" | "." => {}
                    ".." => depth -= 1,
                    _ => depth += 1,
                }
                assert!(depth >= 0, "{raw:?} climbed out of the root but was accepted");
            }
        }
        Err(e) => {
            assert!(
                matches!(e.code(), ErrorCode::InvalidArgument | ErrorCode::PathOutsideWorkdir),
                "{raw:?}: {e}"
            );
            assert!(!e.message().chars().any(char::is_control), "{raw:?}: {:?}", e.message());
        }
    }
}
