//! A stdio client that closes stdin is done: a command it left running is
//! killed at once, not after rmcp's 5 s wait for an answer nobody reads.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{Project, RawStdio, tag, wait_until_running};
use serde_json::json;

#[test]
fn closing_stdin_kills_a_running_command_without_waiting_for_its_answer() {
    let p = Project::new();
    let mut cmd = p.command();
    cmd.stderr(Stdio::piped());
    let mut raw = RawStdio::spawn(cmd);
    let watchdog = serverfs_test_support::Watchdog::arm(raw.child.id(), Duration::from_secs(300));
    let stderr = BufReader::new(raw.child.stderr.take().unwrap());
    let log = std::thread::spawn(move || stderr.lines().map_while(Result::ok).collect::<Vec<_>>());
    let tag = tag();
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": format!("sleep {tag} & sleep {tag}")}}}));
    wait_until_running(&tag);

    let (mut child, _stdout) = raw.close_stdin();
    let status = child.wait().unwrap();
    assert!(!watchdog.disarm(), "the server hung after stdin closed");
    assert!(status.success(), "{status:?}");
    // The call's tree is killed before its answer is given up on, so it is
    // gone by the time the server has exited.
    let left = serverfs_test_support::pids_with(&tag);
    assert!(left.is_empty(), "the command tree outlived the server: {left:?}");
    // The event that took 5 s before: rmcp waiting out the unanswered call.
    let log = log.join().unwrap();
    assert!(
        !log.iter().any(|line| line.contains("timed out draining")),
        "the server waited for the call's answer: {log:#?}"
    );
}
