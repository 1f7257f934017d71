//! What `Writer::open` does with the journal directory: other roots'
//! journals are left alone, a torn temporary of this root's is dropped,
//! and an unreadable journal of this root stops the start (the tree may
//! be mid-transaction) instead of being guessed at.

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serverfs_core::ErrorCode;
use serverfs_write::{Writer, WriterConfig};
use support::{fixture, open_root};

fn key(root_dir: &Path) -> String {
    let meta = std::fs::metadata(root_dir).unwrap();
    format!("{:x}.{:x}", meta.dev(), meta.ino())
}

fn reopen(
    root_dir: &Path,
    state: &Path,
) -> Result<(Writer, serverfs_write::RecoveryReport), String> {
    Writer::open(open_root(root_dir), WriterConfig::new(root_dir, state)).map_err(|e| e.to_string())
}

#[test]
fn other_roots_journals_are_reported_and_left_alone() {
    let f = fixture();
    f.writer.write_file("x.txt", b"x".to_vec(), false).unwrap();
    let journal = f.state.join("journal");
    let foreign = journal.join("1.2-0000000000000001-1-0.json");
    std::fs::write(&foreign, b"{\"not\": \"ours\"}").unwrap();
    let foreign_tmp = journal.join("1.2-0000000000000002-1-0.json.tmp");
    std::fs::write(&foreign_tmp, b"partial").unwrap();
    let torn = journal.join(format!("{}-0000000000000003-1-0.json.tmp", key(&f.root_dir)));
    std::fs::write(&torn, b"{\"torn").unwrap();
    let before = support::snapshot(&f.root_dir);
    drop(f.writer);
    let _writer = reopen_ok(&f.root_dir, &f.state);
    assert!(foreign.exists() && foreign_tmp.exists());
    assert!(!torn.exists(), "a torn temporary of this root is garbage");
    assert_eq!(support::snapshot(&f.root_dir), before);
}

fn reopen_ok(root_dir: &Path, state: &Path) -> Writer {
    let (writer, report) = reopen(root_dir, state).unwrap();
    assert!(report.recovered.is_empty(), "{report:?}");
    assert_eq!(report.foreign, ["1.2-0000000000000001-1-0.json"]);
    writer
}

#[test]
fn an_unreadable_journal_of_this_root_stops_the_start() {
    let f = fixture();
    drop(f.writer);
    let bad =
        f.state.join("journal").join(format!("{}-0000000000000001-1-0.json", key(&f.root_dir)));
    std::fs::write(&bad, b"{ garbage").unwrap();
    let err = reopen(&f.root_dir, &f.state).expect_err("must refuse to start");
    assert!(err.starts_with(ErrorCode::InternalError.as_str()), "{err}");
    assert!(!err.contains(&*f.tmp.path().to_string_lossy()), "{err}");
    assert!(bad.exists(), "kept for the operator");
}
