//! The unit-level crash test: a transaction is stopped at every crash point
//! (as a kill would: no cleanup), then a new [`Writer`] recovers; the tree
//! must be exactly the before-tree or the after-tree, with no temporary,
//! backup or journal left — also when recovery itself is stopped at each
//! of its own points first. Plus live failures in phase 2 (a target
//! changed after verification), which take the same rollback path.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serverfs_core::{ErrorCode, Policy, Root, RootOptions};

use crate::tx::{Faults, Request, Stop};
use crate::{BACKUP_PREFIX, Change, Outcome, RecoveryReport, TEMP_PREFIX, Writer, WriterConfig};

type Tree = BTreeMap<String, (Vec<u8>, u32, bool)>;

/// Path → (bytes, mode, is_dir); a link or special file fails the test.
fn snapshot(dir: &Path) -> Tree {
    fn walk(base: &Path, dir: &Path, out: &mut Tree) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                walk(base, &path, out);
                out.insert(rel, (Vec::new(), mode, true));
            } else {
                assert!(meta.is_file(), "{rel}");
                out.insert(rel, (std::fs::read(&path).unwrap(), mode, false));
            }
        }
    }
    let mut out = Tree::new();
    walk(dir, dir, &mut out);
    out
}

fn leftovers(root_dir: &Path, state: &Path) -> Vec<String> {
    let mut found: Vec<String> = snapshot(root_dir)
        .into_keys()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap();
            name.starts_with(TEMP_PREFIX) || name.starts_with(BACKUP_PREFIX)
        })
        .collect();
    for e in std::fs::read_dir(state.join("journal")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.contains(".json") {
            found.push(name);
        }
    }
    found
}

struct Setup {
    _tmp: tempfile::TempDir,
    root_dir: PathBuf,
    state: PathBuf,
}

fn put(root_dir: &Path, rel: &str, bytes: &[u8], mode: u32) {
    let path = root_dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (root_dir, state) = (tmp.path().join("root"), tmp.path().join("state"));
    std::fs::create_dir(&root_dir).unwrap();
    put(&root_dir, "a.txt", b"a1\n", 0o640);
    put(&root_dir, "b.sh", b"#!/bin/sh\n", 0o755);
    put(&root_dir, "del.txt", b"bye\n", 0o644);
    put(&root_dir, "d/c.txt", b"moved\n", 0o600);
    Setup { _tmp: tmp, root_dir, state }
}

fn open(s: &Setup, faults: &mut Faults) -> Result<(Writer, RecoveryReport), Stop> {
    open_in(s, &s.state, faults)
}

/// A writer with its journal in `state`; every writer of a setup meets in
/// the same rendezvous.
fn open_in(s: &Setup, state: &Path, faults: &mut Faults) -> Result<(Writer, RecoveryReport), Stop> {
    let policy = Policy::new(true, &[]).unwrap();
    let root = Arc::new(Root::open(&s.root_dir, RootOptions::new("w", policy)).unwrap());
    let base = s.state.parent().unwrap().join("rendezvous");
    std::fs::create_dir_all(&base).unwrap();
    Writer::open_with(root, WriterConfig::new(&s.root_dir, state).rendezvous(base), faults)
}

/// Every operation: replace, create with new parents, delete, a move
/// (delete + create with the source's mode), an overwrite of any content,
/// a create in an existing directory.
fn requests() -> Vec<Request> {
    let create = |path: &str, bytes: &[u8], mode, create_parents| {
        Request::from(Change::Create {
            path: path.into(),
            bytes: bytes.to_vec(),
            mode,
            create_parents,
        })
    };
    vec![
        Request::from(Change::Replace {
            path: "a.txt".into(),
            expected: b"a1\n".to_vec(),
            bytes: b"a2\n".to_vec(),
        }),
        create("new/deep/n.txt", b"new\n", None, true),
        Request::from(Change::Delete { path: "del.txt".into(), expected: Some(b"bye\n".to_vec()) }),
        Request::from(Change::Delete {
            path: "d/c.txt".into(),
            expected: Some(b"moved\n".to_vec()),
        }),
        create("e.txt", b"moved\n", Some(0o600), false),
        Request::put("b.sh", b"#!/bin/sh\necho 2\n".to_vec(), true),
        create("d/fresh.txt", b"fresh\n", None, false),
    ]
}

/// The before- and after-trees, and the number of crash points of a full
/// commit of `requests`.
fn full_run(requests: fn() -> Vec<Request>, copy_backups: bool) -> (Tree, Tree, usize) {
    let s = setup();
    let before = snapshot(&s.root_dir);
    let (writer, _) = open(&s, &mut Faults::none()).unwrap();
    let mut faults = Faults { copy_backups, ..Faults::default() };
    writer.commit_with(requests(), &mut faults).map_err(|_| "commit failed").unwrap();
    let after = snapshot(&s.root_dir);
    assert_ne!(before, after);
    assert!(leftovers(&s.root_dir, &s.state).is_empty());
    (before, after, faults.passed)
}

/// Sets up, runs the commit until crash point `k`, and returns the setup
/// left as a kill would leave it.
fn crashed_at(requests: fn() -> Vec<Request>, k: usize, copy_backups: bool) -> Setup {
    let s = setup();
    let (writer, _) = open(&s, &mut Faults::none()).unwrap();
    let mut faults = Faults { crash_at: Some(k), copy_backups, ..Faults::default() };
    assert!(matches!(writer.commit_with(requests(), &mut faults), Err(Stop::Crash)), "k={k}");
    s
}

fn crash_at_every_point(copy_backups: bool) {
    let (_, after, points) = full_run(requests, copy_backups);
    assert_eq!(after["a.txt"], (b"a2\n".to_vec(), 0o640, false));
    assert_eq!(after["b.sh"], (b"#!/bin/sh\necho 2\n".to_vec(), 0o755, false));
    assert_eq!(after["e.txt"], (b"moved\n".to_vec(), 0o600, false));
    assert!(!after.contains_key("d/c.txt") && !after.contains_key("del.txt"));
    assert!(points >= 20, "{points}");
    crash_at_every_point_of(requests, copy_backups);
}

/// Crashes a commit of `requests` at each of its points, and recovery at
/// each of its own: the tree is always wholly before or wholly after,
/// with nothing left over, and the report says which.
fn crash_at_every_point_of(requests: fn() -> Vec<Request>, copy_backups: bool) {
    let (before, after, points) = full_run(requests, copy_backups);
    let mut seen_after = false;
    for k in 1..=points {
        // Recovery without interruption.
        let s = crashed_at(requests, k, copy_backups);
        let (_w, report) = open(&s, &mut Faults::none()).map_err(|_| "recovery").unwrap();
        let tree = snapshot(&s.root_dir);
        let is_after = if tree == before {
            false
        } else {
            assert_eq!(tree, after, "k={k}: neither before nor after");
            true
        };
        // Once the commit point is passed, every later crash is "after".
        assert!(!seen_after || is_after, "k={k}: before after an after");
        seen_after = is_after;
        assert!(leftovers(&s.root_dir, &s.state).is_empty(), "k={k}");
        match report.recovered.as_slice() {
            [] => assert!(is_after && k == points, "k={k}: nothing recovered"),
            [one] => {
                let expected = if is_after { Outcome::Completed } else { Outcome::RolledBack };
                assert_eq!(one.outcome, expected, "k={k}");
            }
            more => panic!("k={k}: {more:?}"),
        }
        drop(_w);

        // Recovery itself killed at each of its points, then finished.
        let recovery_points = {
            let s = crashed_at(requests, k, copy_backups);
            let mut faults = Faults::none();
            let _ = open(&s, &mut faults).map_err(|_| "recovery").unwrap();
            faults.passed
        };
        for j in 1..=recovery_points {
            let s = crashed_at(requests, k, copy_backups);
            let mut faults = Faults { crash_at: Some(j), ..Faults::default() };
            assert!(matches!(open(&s, &mut faults), Err(Stop::Crash)), "k={k} j={j}");
            let _w = open(&s, &mut Faults::none()).map_err(|_| "second recovery").unwrap();
            let tree = snapshot(&s.root_dir);
            assert_eq!(&tree, if is_after { &after } else { &before }, "k={k} j={j}");
            assert!(leftovers(&s.root_dir, &s.state).is_empty(), "k={k} j={j}");
        }
    }
    assert!(seen_after);
}

#[test]
fn a_crash_at_any_point_recovers_to_before_or_after() {
    crash_at_every_point(false);
}

#[test]
fn a_crash_at_any_point_recovers_with_copied_backups() {
    crash_at_every_point(true);
}

/// A transaction of one change (no backup, no `prepared`: its switch is
/// its commit point), for each operation: every crash recovers to before
/// or after, and the report says which.
#[test]
fn a_lone_change_crashed_at_any_point_recovers_to_before_or_after() {
    let replace: fn() -> Vec<Request> = || {
        vec![Request::from(Change::Replace {
            path: "a.txt".into(),
            expected: b"a1\n".to_vec(),
            bytes: b"a2\n".to_vec(),
        })]
    };
    let create: fn() -> Vec<Request> = || {
        vec![Request::from(Change::Create {
            path: "new/deep/n.txt".into(),
            bytes: b"new\n".to_vec(),
            mode: None,
            create_parents: true,
        })]
    };
    let delete: fn() -> Vec<Request> = || {
        vec![Request::from(Change::Delete {
            path: "del.txt".into(),
            expected: Some(b"bye\n".to_vec()),
        })]
    };
    for requests in [replace, create, delete] {
        let (_, _, points) = full_run(requests, false);
        assert!(points >= 2, "{points}");
        crash_at_every_point_of(requests, false);
    }
}

/// A target changed after verification (in place, by rename with the
/// same bytes, or a create target appearing): the live transaction fails
/// after earlier targets were already switched, and the rollback restores
/// them all. Only the outside change remains.
#[test]
fn a_target_changed_during_the_commit_rolls_everything_back() {
    type Tamper = fn(&Path);
    let cases: [(ErrorCode, Tamper, &str, Option<&[u8]>); 3] = [
        (
            ErrorCode::PatchConflict,
            |r| std::fs::write(r.join("b.sh"), "edited\n").unwrap(),
            "b.sh",
            Some(b"edited\n"),
        ),
        (
            ErrorCode::PatchConflict,
            |r| {
                std::fs::write(r.join("b.sh.new"), "#!/bin/sh\n").unwrap();
                std::fs::set_permissions(
                    r.join("b.sh.new"),
                    std::fs::Permissions::from_mode(0o755),
                )
                .unwrap();
                std::fs::rename(r.join("b.sh.new"), r.join("b.sh")).unwrap();
            },
            "b.sh",
            None,
        ),
        (
            ErrorCode::AlreadyExists,
            |r| std::fs::write(r.join("d/fresh.txt"), "theirs\n").unwrap(),
            "d/fresh.txt",
            Some(b"theirs\n"),
        ),
    ];
    for (code, tamper, path, bytes) in cases {
        for copy_backups in [false, true] {
            let s = setup();
            let mut expected = snapshot(&s.root_dir);
            if let Some(bytes) = bytes {
                let mode = expected.get(path).map_or(0o644, |e| e.1);
                expected.insert(path.to_owned(), (bytes.to_vec(), mode, false));
            }
            let (writer, _) = open(&s, &mut Faults::none()).unwrap();
            let root_dir = s.root_dir.clone();
            let ran = Arc::new(Mutex::new(false));
            let ran2 = Arc::clone(&ran);
            let mut faults = Faults {
                copy_backups,
                on_prepared: Some(Box::new(move || {
                    tamper(&root_dir);
                    *ran2.lock().unwrap() = true;
                })),
                ..Faults::default()
            };
            let err = match writer.commit_with(requests(), &mut faults) {
                Err(Stop::Fail(e)) => e,
                other => panic!("{path}: {:?}", other.map(|r| r.changes)),
            };
            assert!(*ran.lock().unwrap());
            assert_eq!(err.code(), code, "{err}");
            let mut tree = snapshot(&s.root_dir);
            if bytes.is_none() {
                // Same bytes and mode, another inode: the tree looks as before.
                tree.remove(path);
                expected.remove(path);
            }
            assert_eq!(tree, expected, "{path} copy={copy_backups}");
            assert!(!s.root_dir.join("new").exists(), "created parents must go");
            assert!(leftovers(&s.root_dir, &s.state).is_empty());
        }
    }
}

/// A lone change (no backup: its rename is its commit point) whose target
/// another writer changes or takes just before the switch: it fails with
/// the conflict and the other writer's file stays, with nothing of ours
/// left behind.
#[test]
fn a_lone_change_whose_target_is_taken_before_its_switch_leaves_the_other_writer_s_file() {
    type Tamper = fn(&Path);
    let replace = Request::from(Change::Replace {
        path: "b.sh".into(),
        expected: b"#!/bin/sh\n".to_vec(),
        bytes: b"ours\n".to_vec(),
    });
    let create = Request::from(Change::Create {
        path: "new/deep/n.txt".into(),
        bytes: b"ours\n".to_vec(),
        mode: None,
        create_parents: true,
    });
    let cases: [(Request, ErrorCode, Tamper, &str); 3] = [
        (
            replace.clone(),
            ErrorCode::PatchConflict,
            |r| std::fs::write(r.join("b.sh"), "theirs\n").unwrap(),
            "b.sh",
        ),
        (
            // Same bytes, another inode: still not the file that was verified.
            replace,
            ErrorCode::PatchConflict,
            |r| {
                std::fs::write(r.join("b.sh.new"), "#!/bin/sh\n").unwrap();
                std::fs::rename(r.join("b.sh.new"), r.join("b.sh")).unwrap();
            },
            "b.sh",
        ),
        (
            create,
            ErrorCode::AlreadyExists,
            |r| std::fs::write(r.join("new/deep/n.txt"), "theirs\n").unwrap(),
            "new/deep/n.txt",
        ),
    ];
    for (request, code, tamper, path) in cases {
        let s = setup();
        let (writer, _) = open(&s, &mut Faults::none()).unwrap();
        let root_dir = s.root_dir.clone();
        let mut faults =
            Faults { on_prepared: Some(Box::new(move || tamper(&root_dir))), ..Faults::default() };
        let err = match writer.commit_with(vec![request], &mut faults) {
            Err(Stop::Fail(e)) => e,
            other => panic!("{path}: {:?}", other.map(|r| r.changes)),
        };
        assert_eq!(err.code(), code, "{err}");
        let theirs = std::fs::read(s.root_dir.join(path)).unwrap();
        assert!(theirs != b"ours\n", "{path}: ours was switched in over theirs");
        assert!(leftovers(&s.root_dir, &s.state).is_empty(), "{path}");
    }
}

/// A rollback that cannot finish (here: a switched target's backup was
/// removed behind the writer's back) keeps the journal, disowned: the
/// call fails, the next one works (reporting the kept journal as a
/// warning, retried each time), and a restart is not refused.
#[test]
fn a_failed_rollback_keeps_the_journal_and_the_next_call_works() {
    let s = setup();
    let (writer, _) = open(&s, &mut Faults::none()).unwrap();
    let root_dir = s.root_dir.clone();
    let mut faults = Faults {
        on_prepared: Some(Box::new(move || {
            for e in std::fs::read_dir(&root_dir).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                if name.starts_with(BACKUP_PREFIX) && name.ends_with("-0") {
                    std::fs::remove_file(root_dir.join(name)).unwrap();
                }
            }
            // And make the last change conflict, after a.txt was switched.
            std::fs::write(root_dir.join("b.sh"), "edited\n").unwrap();
        })),
        ..Faults::default()
    };
    let err = match writer.commit_with(requests(), &mut faults) {
        Err(Stop::Fail(e)) => e,
        other => panic!("{:?}", other.map(|r| r.changes)),
    };
    assert_eq!(err.code(), ErrorCode::PatchConflict, "{err}");
    assert!(err.detail().unwrap().contains("rollback incomplete"), "{err:?}");
    assert!(!leftovers(&s.root_dir, &s.state).is_empty(), "journal kept");
    let report = writer
        .commit(vec![Change::Create {
            path: "other.txt".into(),
            bytes: b"x".to_vec(),
            mode: None,
            create_parents: false,
        }])
        .unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("could not be settled yet")), "{report:?}");
    assert_eq!(std::fs::read(s.root_dir.join("other.txt")).unwrap(), b"x");
    drop(writer);
    let (_again, report) = open(&s, &mut Faults::none()).unwrap();
    assert_eq!(report.kept.len(), 1, "{report:?}");
}

/// Two writers on one root, with one state dir or two (as two processes:
/// each is alive until dropped): a crashed transaction of a writer that
/// still lives is never touched by the other; once it is gone, the other's
/// next transaction settles it (in whichever state dir); of two
/// replacements expecting the same bytes, one wins.
#[test]
fn a_second_writer_recovers_a_dead_writers_journal_never_a_live_ones() {
    second_writer_recovers(false);
}

#[test]
fn a_writer_with_another_state_dir_recovers_a_dead_writers_journal() {
    second_writer_recovers(true);
}

fn second_writer_recovers(two_state_dirs: bool) {
    let (_, _, points) = full_run(requests, false);
    let s = setup();
    let before = snapshot(&s.root_dir);
    let b_state = if two_state_dirs { s.state.with_file_name("state-b") } else { s.state.clone() };
    let (a, _) = open(&s, &mut Faults::none()).unwrap();
    let (b, _) = open_in(&s, &b_state, &mut Faults::none()).unwrap();
    let create = |path: &str| {
        vec![Change::Create {
            path: path.into(),
            bytes: b"b\n".to_vec(),
            mode: None,
            create_parents: false,
        }]
    };
    let mut crash = Faults { crash_at: Some(points / 2), ..Faults::default() };
    assert!(matches!(a.commit_with(requests(), &mut crash), Err(Stop::Crash)));
    let mid = snapshot(&s.root_dir);
    let report = b.commit(create("b1.txt")).unwrap();
    assert!(report.warnings.is_empty(), "{report:?}");
    let journals = leftovers(&s.root_dir, &s.state);
    assert!(journals.iter().any(|l| l.ends_with(".json")), "{journals:?}");
    let mut expected = mid.clone();
    expected.insert("b1.txt".into(), snapshot(&s.root_dir)["b1.txt"].clone());
    assert_eq!(snapshot(&s.root_dir), expected, "the live writer's transaction was touched");

    drop(a);
    let report = b.commit(create("b2.txt")).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("writer that died")), "{report:?}");
    assert!(leftovers(&s.root_dir, &s.state).is_empty());
    let mut expected = before.clone();
    for f in ["b1.txt", "b2.txt"] {
        expected.insert(f.into(), snapshot(&s.root_dir)[f].clone());
    }
    assert_eq!(snapshot(&s.root_dir), expected);

    let (c, _) = open(&s, &mut Faults::none()).unwrap();
    let replace = || {
        vec![Change::Replace {
            path: "a.txt".into(),
            expected: b"a1\n".to_vec(),
            bytes: b"a3\n".to_vec(),
        }]
    };
    b.commit(replace()).unwrap();
    assert_eq!(c.commit(replace()).unwrap_err().code(), ErrorCode::PatchConflict);
}
