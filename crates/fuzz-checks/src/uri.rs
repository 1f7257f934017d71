//! Fuzzes the resource URI decoder, `serverfs_mcp::uri::parse`, and
//! the path check its result goes through.
//!
//! Properties: it never panics; it refuses with INVALID_ARGUMENT only; it
//! accepts only `serverfs://` URIs without `?`/`#`; it decodes exactly once
//! (percent-encoding every byte of the parts and parsing again gives the
//! same parts back); the decoded path then gets `RelPath::parse`'s
//! guarantees, refused only as INVALID_ARGUMENT or PATH_OUTSIDE_WORKDIR.

use std::fmt::Write;

use serverfs_core::{ErrorCode, RelPath};
use serverfs_mcp::uri;

/// `%XX` for every byte: the most encoded spelling of `s`.
fn encode_all(s: &str) -> String {
    s.bytes().fold(String::new(), |mut out, b| {
        let _ = write!(out, "%{b:02X}");
        out
    })
}

/// The target: checks every property above on the input libFuzzer's
/// `fuzz_target!` would decode from `data`.
pub fn check(data: &[u8]) {
    let Some(raw) = crate::input::<&str>(data) else { return };
    match uri::parse(raw) {
        Ok((workdir, path)) => {
            assert!(raw.starts_with(uri::PREFIX) && !raw.contains(['?', '#']), "{raw:?}");
            let again = format!("{}{}/{}", uri::PREFIX, encode_all(&workdir), encode_all(&path));
            assert_eq!(
                uri::parse(&again).as_ref(),
                Ok(&(workdir.clone(), path.clone())),
                "{raw:?}: decoded more than once?"
            );
            // The alias is not checked here: the sandbox looks it up among
            // the configured ones (WORKDIR_NOT_FOUND) before it parses the
            // path, so only a configured alias ever reaches RelPath::parse.
            match RelPath::parse(&path, "w") {
                Ok(p) => {
                    assert!(p.components().iter().all(|c| c != ".." && c != "." && !c.is_empty()));
                    assert!(
                        !p.as_relative().contains(['\0', '\\'])
                            && !p.as_relative().starts_with('/')
                    );
                }
                Err(e) => assert!(
                    matches!(e.code(), ErrorCode::InvalidArgument | ErrorCode::PathOutsideWorkdir),
                    "{raw:?}: {e}"
                ),
            }
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::InvalidArgument, "{raw:?}: {e}"),
    }
}
