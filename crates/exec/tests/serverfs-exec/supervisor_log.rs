//! A failing supervisor's reason reaches the log at WARN, as the known word
//! it sent, never the text of a line it did not send.
//!
//! Its own test binary: it captures logs with a thread-scoped subscriber,
//! and tracing caches a callsite's interest process-wide from whichever
//! thread reaches it first (see serverfs_test_support::json_logs).

use crate::common;

use common::spec;
use serverfs_core::ErrorCode;
use serverfs_exec::{Supervisor, run};
use tokio_util::sync::CancellationToken;

/// Runs one command under `fake` (a shell script standing in for the
/// supervisor program, after it has taken its order's header) and returns
/// the error and the log lines.
fn run_under(fake: &str) -> (ErrorCode, String) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    serverfs_test_support::json_logs(|| {
        runtime.block_on(async {
            let mut s = spec("echo never", dir.path());
            let fake = format!("head -c 4 >/dev/null; {fake}");
            s.supervisor = Supervisor::new("/bin/sh", ["-c".to_owned(), fake]);
            run(s, &CancellationToken::new(), None).await.unwrap_err().code()
        })
    })
}

#[test]
fn a_failing_supervisor_is_logged_with_its_reason() {
    // It answers as a supervisor that could not start bash does.
    let (code, logs) = run_under("printf 'error spawn\\n' >&0; exit 1");
    assert_eq!(code, ErrorCode::InternalError);
    let line = logs.lines().find(|l| l.contains("supervisor_failed")).unwrap_or_else(|| {
        panic!("no supervisor_failed line: {logs}");
    });
    assert!(line.contains("\"level\":\"WARN\""), "{line}");
    assert!(line.contains("\"reason\":\"spawn\""), "{line}");

    // A line that is not one of the known words is not logged as sent.
    let (_, logs) = run_under("printf 'error \\033[2Jforged-text\\n' >&0; exit 1");
    assert!(logs.contains("\"reason\":\"exit 1 without a status line\""), "{logs}");
    assert!(!logs.contains("forged-text"), "{logs}");
}
