//! A client that leaves is done: over stdio a command it left running is
//! killed at once when stdin closes (not after rmcp's 5 s wait for an
//! answer nobody reads); over HTTP a closed connection kills the call's
//! command and is logged as INFO `client_gone`, not as an ERROR.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{Project, RawStdio, assert_none_survive, tag, wait_until_running};
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

#[test]
fn an_http_client_that_hangs_up_is_not_an_error() {
    use std::io::Write;
    let p = Project::new();
    let serverfs_test_support::Listening { mut child, addr, log, local_token, .. } =
        serverfs_test_support::listen(p.command(), Duration::from_secs(30));
    let token = local_token.expect("a local token");
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || log.map_while(Result::ok).try_for_each(|l| lines.send(l)));
    let tag = tag();
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": format!("sleep {tag}")}}})
    .to_string();
    let mut connection = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        connection,
        "POST /mcp?token={token} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_until_running(&tag);
    drop(connection);
    assert_none_survive(&tag);
    // The server says the client went when it notices (the call's end,
    // after the kill): waited for, then the server is stopped.
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains(r#""event":"client_gone""#)) {
        match seen.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => log.push(line),
            Err(_) => panic!("no client_gone line: {log:#?}"),
        }
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    log.extend(seen.iter());
    let errors: Vec<&String> = log.iter().filter(|l| l.contains(r#""level":"ERROR""#)).collect();
    assert!(errors.is_empty(), "a client hanging up was logged as an error: {errors:#?}");
}
