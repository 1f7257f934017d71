//! Refusals: every write that would leave the root, follow or replace a
//! link, reach a denied path or a reserved name is refused — and writes
//! nothing anywhere (root, outside, journal).

use crate::support;

use std::os::unix::fs::symlink;

use serverfs_core::ErrorCode;
use serverfs_write::{Change, Writer, WriterConfig};
use support::{Fixture, fixture};

/// Runs `attempt`, expects `code`, and checks that nothing changed
/// anywhere.
fn refused(f: &Fixture, code: ErrorCode, attempt: impl FnOnce(&Writer) -> Result<(), String>) {
    let before = f.snapshot();
    let err = attempt(&f.writer).expect_err("must be refused");
    assert!(err.starts_with(code.as_str()), "expected {code}, got {err}");
    assert_eq!(f.snapshot(), before, "something was written");
    assert!(f.snapshot().2.is_empty());
}

fn write(w: &Writer, path: &str, overwrite: bool) -> Result<(), String> {
    w.write_file(path, b"pwned".to_vec(), overwrite).map(|_| ()).map_err(|e| e.to_string())
}

fn commit(w: &Writer, changes: Vec<Change>) -> Result<(), String> {
    w.commit(changes).map(|_| ()).map_err(|e| e.to_string())
}

fn create(path: &str, create_parents: bool) -> Change {
    Change::Create { path: path.into(), bytes: b"pwned".to_vec(), mode: None, create_parents }
}

#[test]
fn paths_leaving_the_root_are_refused() {
    let f = fixture();
    for path in ["../outside/x", "a/../../outside/x", "../../x"] {
        for overwrite in [false, true] {
            refused(&f, ErrorCode::PathOutsideWorkdir, |w| write(w, path, overwrite));
        }
        refused(&f, ErrorCode::PathOutsideWorkdir, |w| commit(w, vec![create(path, true)]));
    }
    let abs = f.outside.join("abs.txt");
    let abs = abs.to_str().unwrap();
    let before = f.snapshot();
    let err = f.writer.write_file(abs, b"x".to_vec(), true).unwrap_err();
    assert!(
        matches!(err.code(), ErrorCode::PathOutsideWorkdir | ErrorCode::InvalidArgument),
        "{err}"
    );
    assert_eq!(f.snapshot(), before);
    // The root itself has no parent to be written in.
    refused(&f, ErrorCode::InvalidArgument, |w| write(w, "", true));
    refused(&f, ErrorCode::InvalidArgument, |w| write(w, ".", true));
}

#[test]
fn a_final_symlink_is_never_written_through_or_replaced() {
    let f = fixture();
    f.put("real.txt", b"real", 0o644);
    std::fs::create_dir(f.root_dir.join("realdir")).unwrap();
    symlink("real.txt", f.root_dir.join("to-file")).unwrap();
    symlink("realdir", f.root_dir.join("to-dir")).unwrap();
    symlink(f.outside.join("new.txt"), f.root_dir.join("dangling-out")).unwrap();
    symlink("../outside/rel.txt", f.root_dir.join("dangling-rel")).unwrap();
    for link in ["to-file", "to-dir", "dangling-out", "dangling-rel"] {
        for overwrite in [false, true] {
            refused(&f, ErrorCode::SymlinkNotAllowed, |w| write(w, link, overwrite));
        }
        refused(&f, ErrorCode::SymlinkNotAllowed, |w| commit(w, vec![create(link, false)]));
        refused(&f, ErrorCode::SymlinkNotAllowed, |w| {
            commit(w, vec![Change::Delete { path: link.into(), expected: None }])
        });
        refused(&f, ErrorCode::SymlinkNotAllowed, |w| {
            commit(
                w,
                vec![Change::Replace {
                    path: link.into(),
                    expected: b"real".to_vec(),
                    bytes: b"pwned".to_vec(),
                }],
            )
        });
    }
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("rel.txt").exists());
    assert_eq!(f.read("real.txt"), b"real");
}

#[test]
fn a_symlinked_parent_is_refused_even_when_creating_parents() {
    let f = fixture();
    std::fs::create_dir(f.root_dir.join("inner")).unwrap();
    symlink(&f.outside, f.root_dir.join("out")).unwrap();
    symlink("inner", f.root_dir.join("in")).unwrap();
    for parent in ["out", "in"] {
        for path in [format!("{parent}/x.txt"), format!("{parent}/sub/deeper/x.txt")] {
            for overwrite in [false, true] {
                refused(&f, ErrorCode::SymlinkNotAllowed, |w| write(w, &path, overwrite));
            }
            refused(&f, ErrorCode::SymlinkNotAllowed, |w| commit(w, vec![create(&path, true)]));
        }
    }
    assert!(std::fs::read_dir(&f.outside).unwrap().next().is_none());
}

#[test]
fn a_file_where_a_parent_should_be_is_not_a_directory() {
    let f = fixture();
    f.put("file", b"f", 0o644);
    refused(&f, ErrorCode::NotADirectory, |w| write(w, "file/sub/x.txt", false));
    refused(&f, ErrorCode::NotADirectory, |w| write(w, "file/x.txt", false));
}

#[test]
fn denied_and_reserved_paths_are_refused() {
    let f = fixture();
    for path in [".env", "config/.env.local", "certs/server.pem", ".ssh/id_ed25519", "id_rsa"] {
        refused(&f, ErrorCode::DeniedPath, |w| write(w, path, true));
        refused(&f, ErrorCode::DeniedPath, |w| commit(w, vec![create(path, true)]));
    }
    // `.git` internals (serverfs-dev's deny rule), also as a parent to create.
    refused(&f, ErrorCode::DeniedPath, |w| write(w, ".git/hooks/pre-commit", true));
    // A denied file among harmless ones: the whole transaction is refused.
    refused(&f, ErrorCode::DeniedPath, |w| {
        commit(w, vec![create("ok.txt", false), create("secret.key", false)])
    });
    for name in [".serverfs-tmp-1-0", "d/.serverfs-bak-x"] {
        refused(&f, ErrorCode::InvalidArgument, |w| write(w, name, true));
    }
}

#[test]
fn special_files_are_refused_without_blocking() {
    let f = fixture();
    let fifo = f.root_dir.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    refused(&f, ErrorCode::UnsupportedFileType, |w| write(w, "fifo", true));
    refused(&f, ErrorCode::AlreadyExists, |w| write(w, "fifo", false));
    refused(&f, ErrorCode::UnsupportedFileType, |w| {
        commit(w, vec![Change::Delete { path: "fifo".into(), expected: None }])
    });
}

#[test]
fn the_state_dir_must_be_outside_the_root() {
    let f = fixture();
    let inside = f.root_dir.join("state");
    let err =
        Writer::open(support::open_root(&f.root_dir), WriterConfig::new(&f.root_dir, &inside))
            .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert!(!err.to_string().contains(&*f.tmp.path().to_string_lossy()), "{err}");
}

#[test]
fn a_second_writer_on_the_same_root_and_state_dir_is_allowed() {
    let f = fixture();
    let (second, report) =
        Writer::open(support::open_root(&f.root_dir), WriterConfig::new(&f.root_dir, &f.state))
            .unwrap();
    assert!(report.recovered.is_empty() && report.kept.is_empty(), "{report:?}");
    second.write_file("by-second.txt", b"2".to_vec(), false).unwrap();
    f.writer.write_file("by-first.txt", b"1".to_vec(), false).unwrap();
    assert_eq!(std::fs::read(f.root_dir.join("by-second.txt")).unwrap(), b"2");
    assert_eq!(std::fs::read(f.root_dir.join("by-first.txt")).unwrap(), b"1");
}
