//! A failing supervisor's reason reaches the log at WARN, as the known word
//! it sent, never the text of a line it did not send.
//!
//! Its own test binary: it captures logs with a thread-scoped subscriber,
//! and tracing caches a callsite's interest process-wide from whichever
//! thread reaches it first (see crates/auth/tests/refusal_log.rs).

mod common;

use std::sync::{Arc, Mutex};

use common::spec;
use serverfs_core::ErrorCode;
use serverfs_exec::{Supervisor, run};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one command under `fake` (a shell script standing in for the
/// supervisor program) and returns the error and the log lines.
fn run_under(fake: &str) -> (ErrorCode, String) {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let code = tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let mut s = spec("echo never", dir.path());
            s.supervisor = Supervisor::new("/bin/sh", ["-c".to_owned(), fake.to_owned()]);
            run(s, &CancellationToken::new(), None).await.unwrap_err().code()
        })
    });
    drop(runtime);
    let logs = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    (code, logs)
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
