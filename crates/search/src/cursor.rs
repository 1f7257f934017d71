//! Cursors of find_files and search_text: where a cut-short walk stopped,
//! so that the next call continues there.
//!
//! Guarantees:
//! - Pages concatenate to the unlimited answer, with no duplicate and no
//!   gap, as long as the tree does not change between calls: a cursor is a
//!   [`Position`] in the walk order, not an offset, and the walk is
//!   deterministic.
//! - One order for both tools and for resuming: [`walk_order`], that of a
//!   depth-first, pre-order walk with siblings sorted by name bytes. It
//!   compares component by component, which is *not* the byte order of
//!   whole paths: the walk visits `a`, `a/b`, `a-b`, `a.b`, while plain
//!   byte order puts `a-b` and `a.b` before `a/b` (`-` is 0x2D and `.` is
//!   0x2E, below `/` at 0x2F).
//! - Bound to its query: the cursor carries a hash of the call's
//!   identifying arguments (tool, workdir, start path, pattern or
//!   query/glob/case); a cursor from another query, a malformed one or one
//!   naming a path outside the start is `INVALID_ARGUMENT: cursor: …`.
//!   `limit` is not bound: pages may differ in size.
//! - Only a sort key: the path inside a cursor is compared with the names
//!   the walk produces and never opened, looked up or reported, so a forged
//!   cursor can skip entries but cannot reach a hidden, denied or foreign
//!   one. The hash is therefore a guard against mistakes, not a secret.
//! - Opaque and URL-safe (base64url of a versioned text form), so clients
//!   pass it back unchanged and the form can change with the version tag.

use std::cmp::Ordering;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serverfs_core::{FsError, Location, RelPath};

/// Version tag of the encoded form.
const VERSION: &str = "c1";
/// Longest cursor accepted, in characters: a path of 4096 bytes plus the
/// header, base64-encoded, with room to spare.
const MAX_CURSOR_CHARS: usize = 8192;

/// `a` against `b` in walk order: depth-first, pre-order, siblings in byte
/// order of their names. Paths are `/`-joined, relative to the same root;
/// `""` (the root itself) comes first, a directory before everything below
/// it.
///
/// Compared component by component: with `/` taken as the lowest byte
/// (names hold neither `/` nor NUL), the first byte where the paths differ
/// decides, and a path that is a prefix of the other comes first. The
/// walk's read-ahead queue compares paths this way at every insertion.
pub(crate) fn walk_order(a: &str, b: &str) -> Ordering {
    let key = |byte: u8| if byte == b'/' { 0 } else { byte };
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => key(a[i]).cmp(&key(b[i])),
        None => a.len().cmp(&b.len()),
    }
}

/// Whether `a` is `b` or a directory above it (component-wise).
pub(crate) fn is_self_or_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.strip_prefix(a).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A point in the walk: everything up to it has been reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    /// Path relative to the workdir root of the last entry dealt with;
    /// the start path itself when nothing was.
    pub(crate) path: String,
    /// `None`: the entry at `path` is done, the walk resumes after it
    /// (below it, for a directory). `Some(n)`: the file at `path` was
    /// reported through line `n` (0: not at all), and is searched again
    /// from line `n + 1`.
    pub(crate) line: Option<u64>,
}

/// The identifying arguments of one call, hashed into its cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueryKey(u64);

impl QueryKey {
    /// The key of a call of `tool` from `start` with `args` (in a fixed
    /// order per tool). FNV-1a over length-prefixed fields: stable across
    /// builds and restarts, unlike `std`'s hasher, so a cursor outlives a
    /// server upgrade that keeps the version tag.
    pub(crate) fn new(tool: &str, start: &Location<'_>, args: &[Option<&str>]) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        let alias = start.root().name();
        let path = start.path().as_relative();
        for field in [Some(tool), Some(alias), Some(path.as_str())].iter().chain(args) {
            match field {
                // The length prefix keeps ("ab", "c") apart from ("a", "bc").
                Some(s) => {
                    eat(&[1]);
                    eat(&(s.len() as u64).to_le_bytes());
                    eat(s.as_bytes());
                }
                None => eat(&[0]),
            }
        }
        Self(h)
    }
}

impl Position {
    /// The opaque cursor for this position under `key`.
    pub(crate) fn encode(&self, key: QueryKey) -> String {
        let line = self.line.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let text = format!("{VERSION}:{:016x}:{line}:{}", key.0, self.path);
        URL_SAFE_NO_PAD.encode(text)
    }

    /// Decodes `cursor`, checking that it came from a call with `key`
    /// started at `start`.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT: cursor: …` when it is malformed, from another
    /// query, or names a path that is not `start` or below it.
    pub(crate) fn decode(
        cursor: &str,
        key: QueryKey,
        start: &Location<'_>,
    ) -> Result<Self, FsError> {
        let malformed = || {
            FsError::invalid(
                "cursor: not a cursor returned by this server; pass next_cursor unchanged.",
            )
        };
        if cursor.len() > MAX_CURSOR_CHARS {
            return Err(malformed());
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| malformed())?;
        let text = String::from_utf8(bytes).map_err(|_| malformed())?;
        let mut parts = text.splitn(4, ':');
        let (Some(VERSION), Some(hash), Some(line), Some(path)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        let hash = u64::from_str_radix(hash, 16).map_err(|_| malformed())?;
        let line = match line {
            "-" => None,
            n => Some(n.parse::<u64>().map_err(|_| malformed())?),
        };
        if hash != key.0 {
            return Err(FsError::invalid(
                "cursor: it belongs to a different query; pass it only with the same workdir, path and pattern/query arguments as the call that returned it.",
            ));
        }
        // A normal path (or the root), and the start or below it.
        let start_path = start.path().as_relative();
        let normal = path.is_empty() || RelPath::from_components(path.split('/')).is_some();
        if !normal || !is_self_or_ancestor(&start_path, path) {
            return Err(FsError::invalid(
                "cursor: it names a position outside the searched path; pass next_cursor unchanged.",
            ));
        }
        Ok(Self { path: path.to_owned(), line })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serverfs_core::{ErrorCode, Policy, Root, RootOptions};

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        let options = RootOptions::new("w", Policy::new(false, &[]).unwrap());
        let root = Root::open(dir.path(), options).unwrap();
        (dir, root)
    }

    #[test]
    fn walk_order_is_component_wise() {
        // The walk visits a, a/b, a/b/c, a-b, a.b, ab: '/' ends a name, so
        // a directory's subtree comes before its longer-named siblings even
        // though '-' (0x2D) and '.' (0x2E) sort below '/' (0x2F) as bytes.
        let walk = ["", "a", "a/b", "a/b/c", "a/b.c", "a/bc", "a-b", "a.b", "a.b/a", "ab", "b"];
        for (i, x) in walk.iter().enumerate() {
            for (j, y) in walk.iter().enumerate() {
                assert_eq!(walk_order(x, y), i.cmp(&j), "{x:?} vs {y:?}");
            }
        }
        // The same as comparing the components, on every pair of a set
        // of paths built from bytes around '/'.
        let names = ["", "a", "b", "a-", "a.", "a0", "ab", "a\u{7f}", "\u{e9}"];
        let paths: Vec<String> = names
            .iter()
            .flat_map(|x| names.iter().map(move |y| format!("{x}/{y}")))
            .chain(names.iter().map(|x| (*x).to_owned()))
            .filter(|p| !p.starts_with('/'))
            .collect();
        for x in &paths {
            for y in &paths {
                assert_eq!(walk_order(x, y), x.split('/').cmp(y.split('/')), "{x:?} vs {y:?}");
            }
        }
        // Plain byte order would disagree.
        assert_eq!("a/b".cmp("a.b"), Ordering::Greater);
        assert_eq!(walk_order("a/b", "a.b"), Ordering::Less);
        // Names are compared as bytes, not as characters or case-folded.
        assert_eq!(walk_order("B", "a"), Ordering::Less);
        assert_eq!(walk_order("z", "é"), Ordering::Less);
    }

    #[test]
    fn ancestors() {
        assert!(is_self_or_ancestor("", "a/b"));
        assert!(is_self_or_ancestor("a", "a/b"));
        assert!(is_self_or_ancestor("a/b", "a/b"));
        assert!(!is_self_or_ancestor("a", "ab"));
        assert!(!is_self_or_ancestor("a/b", "a"));
        assert!(!is_self_or_ancestor("a.b", "a/b"));
    }

    #[test]
    fn round_trip() {
        let (_d, sb) = root();
        let start = sb.locate("src").unwrap();
        let key = QueryKey::new("search_text", &start, &[Some("needle"), None, Some("true")]);
        for pos in [
            Position { path: "src".into(), line: None },
            Position { path: "src/a/b.rs".into(), line: Some(0) },
            Position { path: "src/a:b/c d/é.txt".into(), line: Some(u64::MAX) },
        ] {
            let cursor = pos.encode(key);
            assert!(
                cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{cursor}"
            );
            assert_eq!(Position::decode(&cursor, key, &start).unwrap(), pos);
        }
    }

    #[test]
    fn keys_bind_every_identifying_argument() {
        let (_d, sb) = root();
        let root = sb.locate("").unwrap();
        let src = sb.locate("src").unwrap();
        let keys = [
            QueryKey::new("find_files", &root, &[Some("*.rs")]),
            QueryKey::new("search_text", &root, &[Some("*.rs")]),
            QueryKey::new("find_files", &src, &[Some("*.rs")]),
            QueryKey::new("find_files", &root, &[Some("*.py")]),
            QueryKey::new("search_text", &root, &[Some("x"), None, Some("true")]),
            QueryKey::new("search_text", &root, &[Some("x"), Some("*"), Some("true")]),
            QueryKey::new("search_text", &root, &[Some("x"), None, Some("false")]),
            // Field boundaries count.
            QueryKey::new("search_text", &root, &[Some("ab"), Some("c"), Some("true")]),
            QueryKey::new("search_text", &root, &[Some("a"), Some("bc"), Some("true")]),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // Stable: the same arguments give the same key.
        assert_eq!(keys[0], QueryKey::new("find_files", &root, &[Some("*.rs")]));
    }

    #[test]
    fn foreign_and_malformed_cursors_are_invalid_arguments() {
        let (_d, sb) = root();
        let src = sb.locate("src").unwrap();
        let key = QueryKey::new("find_files", &src, &[Some("*.rs")]);
        let other = QueryKey::new("find_files", &src, &[Some("*.py")]);
        let good = Position { path: "src/a".into(), line: None };
        let raw = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let hash = format!("{:016x}", key.0);
        let bad = [
            String::new(),
            "not base64!".to_owned(),
            "x".repeat(MAX_CURSOR_CHARS + 1),
            raw("garbage"),
            raw(&format!("c0:{hash}:-:src/a")),
            raw(&format!("c1:{hash}:x:src/a")),
            raw(&format!("c1:{hash}:-1:src/a")),
            raw("c1:zz:-:src/a"),
            URL_SAFE_NO_PAD.encode([b'c', b'1', b':', 0xff]),
            good.encode(other),
            // Outside the start, or not a normal path.
            raw(&format!("c1:{hash}:-:srcx")),
            raw(&format!("c1:{hash}:-:")),
            raw(&format!("c1:{hash}:-:other/a")),
            raw(&format!("c1:{hash}:-:src/../etc")),
            raw(&format!("c1:{hash}:-:src//a")),
            raw(&format!("c1:{hash}:-:/src/a")),
        ];
        for cursor in bad {
            let err = Position::decode(&cursor, key, &src).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArgument, "{cursor}");
            assert!(err.message().starts_with("cursor: "), "{}", err.message());
        }
        assert_eq!(Position::decode(&good.encode(key), key, &src).unwrap(), good);
        let at_start = Position { path: "src".into(), line: None };
        assert_eq!(Position::decode(&at_start.encode(key), key, &src).unwrap(), at_start);
    }
}
