//! A stdio server whose stderr reader goes away (the terminal that started
//! it closed) or stops reading keeps answering calls, and SIGTERM still
//! ends it with exit 0. A watchdog turns a hang (the old failure: calls
//! that never answer, SIGTERM ignored) into a failed test.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{Project, RawStdio};
use serde_json::json;

fn check(close_stderr: bool, calls: u64) {
    let p = Project::new();
    let mut cmd = p.command();
    cmd.stderr(Stdio::piped());
    let mut raw = RawStdio::spawn(cmd);
    let watchdog = serverfs_test_support::Watchdog::arm(raw.child.id(), Duration::from_secs(300));
    let stderr = raw.child.stderr.take().unwrap();
    // Closed (EPIPE from now on), or kept open and never read (full pipe).
    let kept = if close_stderr {
        drop(stderr);
        None
    } else {
        Some(stderr)
    };
    for id in 1..=calls {
        let v = raw.call(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": "echo hi"}}}));
        assert_eq!(v["result"]["structuredContent"]["stdout"], "hi\n", "{v}");
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &raw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = raw.child.wait().unwrap();
    assert!(!watchdog.disarm(), "the server hung and was killed by the watchdog");
    assert!(status.success(), "{status:?}");
    drop(kept);
}

#[test]
fn stderr_closed_mid_run_calls_answer_and_sigterm_exits_0() {
    check(true, 20);
}

#[test]
fn stderr_never_read_calls_answer_and_sigterm_exits_0() {
    // Enough log lines to fill a 64 KiB pipe several times.
    check(false, 400);
}
