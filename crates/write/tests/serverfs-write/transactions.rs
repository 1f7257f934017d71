//! Transactions and single writes through the public API: all or nothing,
//! modes kept, the documented error codes, and per-path serialisation.

use crate::support;

use std::sync::{Arc, Barrier};

use serverfs_core::ErrorCode;
use serverfs_write::{Change, Op};
use support::{fixture, fixture_with, strays};

fn replace(path: &str, expected: &[u8], bytes: &[u8]) -> Change {
    Change::Replace { path: path.into(), expected: expected.to_vec(), bytes: bytes.to_vec() }
}

fn create(path: &str, bytes: &[u8]) -> Change {
    Change::Create { path: path.into(), bytes: bytes.to_vec(), mode: None, create_parents: true }
}

#[test]
fn write_file_creates_with_parents_then_overwrites_keeping_the_mode() {
    let f = fixture();
    let r = f.writer.write_file("new/dir/hello.txt", b"hello".to_vec(), false).unwrap();
    assert_eq!(r.path, "new/dir/hello.txt");
    assert!(r.created);
    assert_eq!(r.size, 5);
    assert_eq!(r.sha256, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert_eq!(f.read("new/dir/hello.txt"), b"hello");

    let err = f.writer.write_file("new/dir/hello.txt", b"again".to_vec(), false).unwrap_err();
    assert_eq!(err.code(), ErrorCode::AlreadyExists);
    assert_eq!(f.read("new/dir/hello.txt"), b"hello");

    f.put("run.sh", b"#!/bin/sh\n", 0o751);
    let r = f.writer.write_file("run.sh", b"#!/bin/sh\necho hi\n".to_vec(), true).unwrap();
    assert!(!r.created);
    assert_eq!(f.read("run.sh"), b"#!/bin/sh\necho hi\n");
    assert_eq!(f.mode("run.sh"), 0o751);
    let (tree, _, journals) = f.snapshot();
    assert!(strays(&tree).is_empty(), "{:?}", strays(&tree));
    assert!(journals.is_empty(), "{journals:?}");
}

#[test]
fn a_multi_file_patch_with_a_move_commits_wholly() {
    let f = fixture();
    f.put("a.txt", b"a1\n", 0o640);
    f.put("src/old.rs", b"fn old() {}\n", 0o700);
    f.put("gone.txt", b"bye\n", 0o644);
    let src_mode = f.mode("src/old.rs");
    let report = f
        .writer
        .commit(vec![
            replace("a.txt", b"a1\n", b"a2\n"),
            // Move = delete the source (expected bytes) + create the
            // destination with the source's mode.
            Change::Delete { path: "src/old.rs".into(), expected: Some(b"fn old() {}\n".to_vec()) },
            Change::Create {
                path: "src/new/new.rs".into(),
                bytes: b"fn new() {}\n".to_vec(),
                mode: Some(src_mode),
                create_parents: true,
            },
            Change::Delete { path: "gone.txt".into(), expected: None },
        ])
        .unwrap();
    let ops: Vec<Op> = report.changes.iter().map(|c| c.op).collect();
    assert_eq!(ops, [Op::Replace, Op::Delete, Op::Create, Op::Delete]);
    assert!(report.warnings.is_empty());
    assert_eq!(f.read("a.txt"), b"a2\n");
    assert_eq!(f.mode("a.txt"), 0o640);
    assert_eq!(f.read("src/new/new.rs"), b"fn new() {}\n");
    assert_eq!(f.mode("src/new/new.rs"), 0o700);
    assert!(!f.root_dir.join("src/old.rs").exists());
    assert!(!f.root_dir.join("gone.txt").exists());
    let (tree, _, journals) = f.snapshot();
    assert!(strays(&tree).is_empty() && journals.is_empty());
}

#[test]
fn an_explicit_mode_is_set_exactly() {
    let f = fixture();
    f.writer
        .commit(vec![Change::Create {
            path: "x".into(),
            bytes: vec![],
            mode: Some(0o604),
            create_parents: false,
        }])
        .unwrap();
    assert_eq!(f.mode("x"), 0o604);
}

/// The last change fails verification: nothing of the first ones happens
/// (not even their parent directories).
#[test]
fn a_failing_last_change_leaves_everything_untouched() {
    let f = fixture();
    f.put("a.txt", b"a\n", 0o644);
    f.put("b.txt", b"b\n", 0o644);
    f.put("dir/c.txt", b"c\n", 0o644);
    f.put("other/d.txt", b"d\n", 0o644);
    let failing_last: Vec<(ErrorCode, Change)> = vec![
        (ErrorCode::PatchConflict, replace("b.txt", b"not b\n", b"B\n")),
        (ErrorCode::AlreadyExists, create("b.txt", b"B\n")),
        (ErrorCode::NotAFile, Change::Delete { path: "other".into(), expected: None }),
        (ErrorCode::NotAFile, replace("other", b"", b"x")),
        (ErrorCode::PatchConflict, Change::Delete { path: "dir".into(), expected: None }),
        (ErrorCode::PathNotFound, Change::Delete { path: "nope".into(), expected: None }),
        (ErrorCode::PathNotFound, replace("nope/x", b"", b"x")),
        (ErrorCode::PatchConflict, replace("a.txt", b"a\n", b"twice\n")),
        (ErrorCode::PatchConflict, create("new/deep/file.txt/under", b"x")),
    ];
    for (code, last) in failing_last {
        let before = f.snapshot();
        let err = f
            .writer
            .commit(vec![
                replace("a.txt", b"a\n", b"A\n"),
                create("new/deep/file.txt", b"new\n"),
                Change::Delete { path: "dir/c.txt".into(), expected: Some(b"c\n".to_vec()) },
                last,
            ])
            .unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert_eq!(f.snapshot(), before);
    }
}

#[test]
fn an_empty_transaction_is_invalid() {
    let f = fixture();
    assert_eq!(f.writer.commit(vec![]).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn files_over_the_cap_are_not_replaced_or_deleted() {
    let f = fixture_with(|c| c.max_file_bytes(8));
    f.put("big.txt", b"0123456789", 0o644);
    f.put("small.txt", b"01234567", 0o644);
    let before = f.snapshot();
    for change in [
        replace("big.txt", b"0123456789", b"x"),
        Change::Delete { path: "big.txt".into(), expected: None },
    ] {
        assert_eq!(
            f.writer.commit(vec![change]).unwrap_err().code(),
            ErrorCode::WriteLimitExceeded
        );
    }
    let err = f.writer.write_file("big.txt", b"x".to_vec(), true).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WriteLimitExceeded);
    assert_eq!(f.snapshot(), before);
    f.writer.commit(vec![replace("small.txt", b"01234567", b"ok")]).unwrap();
}

#[test]
fn messages_name_paths_only_as_name_colon_relative() {
    let f = fixture();
    f.put("a.txt", b"a", 0o644);
    let err = f.writer.commit(vec![replace("a.txt", b"b", b"c")]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::PatchConflict);
    assert!(err.message().contains("w:/a.txt"), "{err}");
    assert!(!err.to_string().contains(&*f.tmp.path().to_string_lossy()), "{err}");
}

/// Two threads replace one file expecting the same bytes: one wins, the
/// other sees the winner's bytes and gets PATCH_CONFLICT.
#[test]
fn concurrent_replacements_of_one_file_one_wins() {
    let f = fixture();
    let writer = Arc::clone(&f.writer);
    for round in 0..25 {
        let old = format!("round {round}\n");
        std::fs::write(f.root_dir.join("shared.txt"), &old).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let (writer, barrier, old) =
                    (Arc::clone(&writer), Arc::clone(&barrier), old.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let new = format!("thread {t}\n");
                    let r =
                        writer.commit(vec![replace("shared.txt", old.as_bytes(), new.as_bytes())]);
                    (new, r)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let winners: Vec<&String> =
            results.iter().filter(|(_, r)| r.is_ok()).map(|(new, _)| new).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (_, r) in &results {
            if let Err(e) = r {
                assert_eq!(e.code(), ErrorCode::PatchConflict, "{e}");
            }
        }
        assert_eq!(std::fs::read_to_string(f.root_dir.join("shared.txt")).unwrap(), *winners[0]);
    }
    let (tree, journals) = (support::snapshot(&f.root_dir), support::journals(&f.state));
    assert!(strays(&tree).is_empty() && journals.is_empty());
}

/// Many writers create files in one new directory tree at once: the
/// parents are created once, nobody's directory is removed under them.
#[test]
fn concurrent_creates_share_new_parents() {
    let f = fixture();
    let writer = Arc::clone(&f.writer);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || {
                for i in 0..10 {
                    writer
                        .write_file(&format!("gen/sub/{t}-{i}.txt"), vec![b'x'; t], false)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(std::fs::read_dir(f.root_dir.join("gen/sub")).unwrap().count(), 80);
}

#[test]
fn apply_patch_plans_everything_then_commits_all_or_nothing() {
    let f = fixture();
    f.put("a.txt", b"one\ntwo\n", 0o640);
    f.put("b.txt", b"keep\n", 0o644);
    let deadline = serverfs_core::Deadline::never();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n\
                 *** Add File: c/new.txt\n+new\n*** End Patch";

    // A dry run reports the plan and writes nothing.
    let dry = f.writer.apply_patch(patch, true, &deadline).unwrap();
    assert!(dry.dry_run && !dry.applied);
    assert_eq!(dry.files.len(), 2);
    assert_eq!(dry.files[0].hunks[0].line, 1);
    assert_eq!(f.read("a.txt"), b"one\ntwo\n");

    // One hunk that does not match: nothing of the patch is written, and
    // the code is the workspace's own.
    let bad = "*** Begin Patch\n*** Add File: d.txt\n+d\n*** Update File: b.txt\n@@\n-absent\n+x\n\
               *** End Patch";
    let err = f.writer.apply_patch(bad, false, &deadline).unwrap_err();
    assert_eq!(err.code(), ErrorCode::PatchContextNotFound);
    let (tree, _, _) = f.snapshot();
    assert!(!tree.contains_key("d.txt"), "{tree:?}");
    assert_eq!(f.read("b.txt"), b"keep\n");

    let done = f.writer.apply_patch(patch, false, &deadline).unwrap();
    assert!(done.applied);
    assert_eq!(f.read("a.txt"), b"one\n2\n");
    assert_eq!(f.mode("a.txt"), 0o640);
    assert_eq!(f.read("c/new.txt"), b"new\n");
    let (tree, _, journals) = f.snapshot();
    assert!(strays(&tree).is_empty(), "{:?}", strays(&tree));
    assert!(journals.is_empty(), "{journals:?}");
}
