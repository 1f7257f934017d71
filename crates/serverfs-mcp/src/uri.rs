//! `serverfs://{workdir}/{path}` resource URIs.
//!
//! Guarantee: the path is percent-decoded exactly once, before any
//! validation, so `%2e%2e` is `..` and `%2F` separates components like `/`;
//! the decoded text then goes through the same resolver as every tool.

use percent_encoding::percent_decode_str;
use serverfs_core::FsError;

/// The URI scheme prefix.
pub const PREFIX: &str = "serverfs://";
/// The RFC 6570 template advertised in resources/templates/list.
pub const TEMPLATE: &str = "serverfs://{workdir}/{path}";

/// Splits and decodes a resource URI into `(workdir, path)`.
///
/// # Errors
/// `INVALID_ARGUMENT` for another scheme, a query or fragment, or bytes that
/// do not decode to UTF-8.
pub fn parse(uri: &str) -> Result<(String, String), FsError> {
    let rest = uri
        .strip_prefix(PREFIX)
        .ok_or_else(|| FsError::invalid(format!("resource URIs have the form {TEMPLATE}.")))?;
    if rest.contains(['?', '#']) {
        return Err(FsError::invalid(
            "resource URIs take no query or fragment; encode '?' as %3F and '#' as %23.",
        ));
    }
    let (workdir, path) = rest.split_once('/').unwrap_or((rest, ""));
    Ok((decode(workdir)?, decode(path)?))
}

fn decode(part: &str) -> Result<String, FsError> {
    percent_decode_str(part)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| FsError::invalid("the resource URI does not decode to UTF-8."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::ErrorCode;

    #[test]
    fn splits_and_decodes_once() {
        assert_eq!(parse("serverfs://p/a/b.md").unwrap(), ("p".into(), "a/b.md".into()));
        assert_eq!(parse("serverfs://p/a%2Fb.md").unwrap(), ("p".into(), "a/b.md".into()));
        assert_eq!(
            parse("serverfs://p/%2e%2e/%2E%2E/etc").unwrap(),
            ("p".into(), "../../etc".into())
        );
        assert_eq!(parse("serverfs://p/%252e").unwrap(), ("p".into(), "%2e".into()));
        assert_eq!(parse("serverfs://p/%E4%B8%AD.txt").unwrap(), ("p".into(), "中.txt".into()));
        assert_eq!(parse("serverfs://p").unwrap(), ("p".into(), String::new()));
        assert_eq!(parse("serverfs://p/a%00b").unwrap().1, "a\0b");
    }

    #[test]
    fn rejects_other_forms() {
        for uri in [
            "file:///etc/passwd",
            "serverfs:/p/x",
            "serverfs://p/x?y",
            "serverfs://p/x#y",
            "serverfs://p/%FF",
        ] {
            assert_eq!(parse(uri).unwrap_err().code(), ErrorCode::InvalidArgument, "{uri}");
        }
    }
}
