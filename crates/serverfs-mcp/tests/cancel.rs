//! A client that disconnects (HTTP) or cancels (`notifications/cancelled`
//! over stdio) mid-search stops the search: the server's CPU goes back to
//! idle instead of scanning on for nobody.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// 8 GiB of searchable text under `big/`: one 32 MiB file and hard links to
/// it, so a search for an absent string runs for many seconds.
fn big_fixture() -> Fixture {
    let fx = Fixture::new();
    let big = fx.root().join("big");
    std::fs::create_dir(&big).unwrap();
    let line = "no match on this line, just text to scan through\n";
    std::fs::write(big.join("f000"), line.repeat((32 << 20) / line.len())).unwrap();
    for i in 1..256 {
        std::fs::hard_link(big.join("f000"), big.join(format!("f{i:03}"))).unwrap();
    }
    fx
}

const SEARCH_ARGS: [&str; 4] =
    ["--search-timeout-seconds", "300", "--search-max-file-bytes", "100000000"];

/// Asserts that `pid` burns (almost) no CPU over the next second. (Async:
/// the runtime must keep running so a dropped HTTP request really closes
/// its connection.)
async fn assert_idle(pid: u32) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = cpu_ticks(pid) - settled;
    assert!(idle < 10, "search kept running after the client left ({idle} ticks in 1 s)");
}

#[tokio::test]
async fn disconnect_stops_the_search() {
    let fx = big_fixture();
    let workdir = fx.workdir_arg();
    let mut args = vec!["--workdir", &workdir];
    args.extend(SEARCH_ARGS);
    let server = HttpServer::start(&args);
    let pid = server.pid();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "search_text", "arguments": {"workdir": "test", "path": "big", "query": "zzz-absent"}}});
    let request = reqwest::Client::new()
        .post(&server.url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-06-18")
        .body(body.to_string())
        .send();
    let before = cpu_ticks(pid);
    // The search is still running when the client gives up.
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), request).await.is_err(),
        "search finished too soon"
    );
    let busy = cpu_ticks(pid) - before;
    assert!(busy > 50, "the search was not running ({busy} ticks in 1.5 s)");

    assert_idle(pid).await;
}

#[tokio::test]
async fn stdio_cancel_notification_stops_the_search() {
    use std::io::Write;
    let fx = big_fixture();
    let mut child = std::process::Command::new(BIN)
        .args(["--stdio", "--workdir", &fx.workdir_arg()])
        .args(SEARCH_ARGS)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |v: serde_json::Value| writeln!(stdin, "{v}").unwrap();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_text",
        "arguments": {"workdir": "test", "path": "big", "query": "zzz-absent"}}}),
    );
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let busy = cpu_ticks(pid) - before;
    assert!(busy > 50, "the search was not running ({busy} ticks in 1.5 s)");
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    assert_idle(pid).await;
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
