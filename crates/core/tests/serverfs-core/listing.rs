//! list_directory and stat semantics on a real directory: byte-order
//! sorting, paging, `omitted` for non-UTF-8 names, types and sizes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use serverfs_core::entries::{EntryInfo, MAX_LIST_OFFSET, PageRequest, list_directory};
use serverfs_core::{Deadline, EntryKind, ErrorCode, ResolveMode, Root, SymlinkRule};

use crate::support;

fn sandbox(dir: &std::path::Path) -> Root {
    support::root(dir, ResolveMode::Openat2, SymlinkRule::Never)
}

fn page(
    sb: &Root,
    path: &str,
    after: Option<&str>,
    offset: u64,
    limit: u64,
) -> (Vec<String>, bool, u64) {
    let loc = sb.locate(path).unwrap();
    let l =
        list_directory(sb, &loc, PageRequest { after, offset, limit }, &Deadline::never()).unwrap();
    (l.entries.into_iter().map(|e| e.name).collect(), l.has_more, l.omitted)
}

fn names(sb: &Root, path: &str, offset: u64, limit: u64) -> (Vec<String>, bool, u64) {
    page(sb, path, None, offset, limit)
}

#[test]
fn empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let sb = sandbox(dir.path());
    assert_eq!(names(&sb, "empty", 0, 10), (vec![], false, 0));
    assert_eq!(names(&sb, "empty", 5, 10), (vec![], false, 0));
}

#[test]
fn byte_order_paging_and_omitted() {
    let dir = tempfile::tempdir().unwrap();
    for n in ["b", "B", "a", "_x", "Z", "é", "10", "9", ".hidden", "key.pem"] {
        std::fs::write(dir.path().join(n), n).unwrap();
    }
    std::fs::write(dir.path().join(OsStr::from_bytes(b"bad\xff")), "x").unwrap();
    let sb = sandbox(dir.path());
    let all = ["10", "9", "B", "Z", "_x", "a", "b", "é"];
    let (got, more, omitted) = names(&sb, "", 0, 100);
    assert_eq!(got, all);
    assert_eq!((more, omitted), (false, 1));
    // pages tile the listing exactly, and stay stable across calls
    let mut paged = Vec::new();
    for offset in (0..8).step_by(3) {
        let (page, more, _) = names(&sb, "", offset, 3);
        assert_eq!(more, offset + 3 < 8, "offset {offset}");
        paged.extend(page);
    }
    assert_eq!(paged, all);
    assert_eq!(names(&sb, "", 7, 1), (vec!["é".to_owned()], false, 1));
    assert_eq!(names(&sb, "", 8, 5).0, Vec::<String>::new());
    assert_eq!(names(&sb, "", MAX_LIST_OFFSET, 5).0, Vec::<String>::new());

    // the name cursor continues after the last name, with offset on top
    let mut cursor: Option<String> = None;
    let mut walked = Vec::new();
    loop {
        let (got, more, _) = page(&sb, "", cursor.as_deref(), 0, 3);
        cursor = got.last().cloned();
        walked.extend(got);
        if !more {
            break;
        }
    }
    assert_eq!(walked, all);
    assert_eq!(page(&sb, "", Some("Z"), 1, 2).0, ["a", "b"]);
    assert_eq!(page(&sb, "", Some("é"), 0, 2), (vec![], false, 1));
    // a cursor need not be an existing name
    assert_eq!(page(&sb, "", Some("A"), 0, 1).0, ["B"]);
}

#[test]
fn offset_is_capped_and_cursors_are_names() {
    let dir = tempfile::tempdir().unwrap();
    let sb = sandbox(dir.path());
    let loc = sb.locate("").unwrap();
    let never = Deadline::never();
    for (after, offset) in [
        (None, MAX_LIST_OFFSET + 1),
        (None, u64::MAX),
        (Some(""), 0),
        (Some("a/b"), 0),
        (Some("a\0"), 0),
    ] {
        let err =
            list_directory(&sb, &loc, PageRequest { after, offset, limit: 1 }, &never).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{after:?} {offset}");
    }
}

#[test]
fn a_passed_deadline_stops_a_listing() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "").unwrap();
    let sb = sandbox(dir.path());
    let loc = sb.locate("").unwrap();
    let late = Deadline::new(std::time::Duration::ZERO, Arc::new(AtomicBool::new(false)));
    let err = list_directory(&sb, &loc, PageRequest { after: None, offset: 0, limit: 1 }, &late)
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout);
}

#[test]
fn types_sizes_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("d/sub")).unwrap();
    std::fs::write(dir.path().join("d/f.txt"), "12345").unwrap();
    std::os::unix::fs::symlink("f.txt", dir.path().join("d/link")).unwrap();
    let sb = sandbox(dir.path());
    let loc = sb.locate("d").unwrap();
    let all = PageRequest { after: None, offset: 0, limit: 10 };
    let l = list_directory(&sb, &loc, all, &Deadline::never()).unwrap();
    let got: Vec<_> =
        l.entries.iter().map(|e| (e.path.as_str(), e.info.kind, e.info.size)).collect();
    assert_eq!(
        got,
        [
            ("d/f.txt", EntryKind::File, Some(5)),
            ("d/link", EntryKind::Symlink, None),
            ("d/sub", EntryKind::Directory, None)
        ]
    );
    assert!(
        l.entries.iter().all(|e| e.info.modified_at.as_deref().is_some_and(|t| t.ends_with('Z')))
    );
    let info = EntryInfo::from_meta(&sb.inspect(&sb.locate("d/f.txt").unwrap()).unwrap());
    assert_eq!((info.kind, info.size), (EntryKind::File, Some(5)));
}
