//! A stdio server whose stderr reader goes away (the terminal that started
//! it closed) or stops reading keeps answering calls, and SIGTERM still
//! ends it with exit 0.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::Project;
use serde_json::{Value, json};

fn check(close_stderr: bool, calls: u64) {
    let p = Project::new();
    let mut child = p
        .command()
        .arg("--stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let mut send = |m: Value| writeln!(stdin, "{m}").unwrap();
    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    lines.next().unwrap().unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // Closed (EPIPE from now on), or kept open and never read (full pipe).
    let kept = if close_stderr {
        drop(stderr);
        None
    } else {
        Some(stderr)
    };
    for id in 1..=calls {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": "echo hi"}}}));
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(v["id"], id);
        assert_eq!(v["result"]["structuredContent"]["stdout"], "hi\n", "{v}");
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
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
