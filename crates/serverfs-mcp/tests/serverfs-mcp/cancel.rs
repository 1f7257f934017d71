//! Calls that would run for hours, and what bounds them:
//! - a client that disconnects (HTTP) or cancels (`notifications/cancelled`
//!   over stdio) stops its call: the call's log line appears with
//!   `cancelled: true` long before the call could have finished, and the
//!   server's CPU is back to idle afterwards;
//! - a flood of searches fills only the search class: one more search is
//!   refused with `SERVER_BUSY` after the bounded wait, and a stat or read
//!   meanwhile is answered at once.
//!
//! The assertions are events, not CPU share or speed, so a busy machine
//! cannot fail them.

use crate::common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Far more text than any machine scans within the test's bounds: one
/// 32 MiB file and 20,000 hard links to it (640 GB to read; 32 MiB on disk).
fn endless_fixture() -> Fixture {
    let fx = Fixture::new();
    let big = fx.root().join("big");
    std::fs::create_dir(&big).unwrap();
    let line = "no match on this line, just text to scan through\n";
    std::fs::write(big.join("f00000"), line.repeat((32 << 20) / line.len())).unwrap();
    for i in 1..20_000 {
        std::fs::hard_link(big.join("f00000"), big.join(format!("f{i:05}"))).unwrap();
    }
    fx
}

/// A deadline the calls never reach while the test runs.
const ARGS: [&str; 4] =
    ["--search-timeout-seconds", "3600", "--search-max-file-bytes", "100000000"];

/// How long the test waits for the cancelled call's log line: generous, and
/// still a tiny fraction of what the call would take to finish.
const EVENT_BOUND: Duration = Duration::from_secs(120);

fn is_cancelled_call(tool: &'static str) -> impl Fn(&Value) -> bool {
    move |v| v["event"] == "tool_call" && v["tool"] == tool && v["cancelled"] == true
}

/// Waits until `pid` has burnt some CPU since it had `from` ticks: the
/// call it was sent is running.
fn wait_until_busy(pid: u32, from: u64) {
    let started = Instant::now();
    while cpu_ticks(pid) < from + 5 {
        assert!(started.elapsed() < EVENT_BOUND, "the call never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `pid` is idle: a second in which it burns (almost) no CPU.
/// That is the event; a call that kept running after its client left
/// never gets there and fails at the bound. (Not one fixed window: a busy
/// machine only delays the event.)
fn assert_idle(pid: u32) {
    let started = Instant::now();
    loop {
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(1));
        let burnt = cpu_ticks(pid) - before;
        if burnt < 10 {
            return;
        }
        assert!(
            started.elapsed() < EVENT_BOUND,
            "the call kept running after the client left ({burnt} ticks in the last second)"
        );
    }
}

fn post(url: &str, id: u64, tool: &str, arguments: Value) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-06-18")
        .body(body.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn disconnect_stops_the_search_and_the_read() {
    let fx = endless_fixture();
    let line = "a line of text that is read and counted, never returned\n";
    std::fs::write(fx.root().join("long.log"), line.repeat((256 << 20) / line.len())).unwrap();
    let workdir = fx.workdir_arg();
    let mut args = vec!["--workdir", &workdir];
    args.extend(ARGS);
    let server = HttpServer::start(&args);
    for (tool, arguments) in [
        ("search_text", json!({"workdir": "test", "path": "big", "query": "zzz-absent"})),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "long.log", "start_line": 4_000_000_000u64}),
        ),
    ] {
        let pid = server.pid();
        let from = cpu_ticks(pid);
        let request = tokio::spawn(post(&server.url, 1, tool, arguments).send());
        // Once the call runs, the client gives up (the request future is
        // dropped: the connection closes).
        tokio::task::spawn_blocking(move || wait_until_busy(pid, from)).await.unwrap();
        if tool == "search_text" {
            assert!(!request.is_finished(), "an endless search answered");
        }
        request.abort();
        let log = server.log.clone();
        tokio::task::spawn_blocking(move || log.wait_for(EVENT_BOUND, is_cancelled_call(tool)))
            .await
            .unwrap();
        assert_idle(server.pid());
    }
}

#[test]
fn stdio_cancel_notification_stops_the_search() {
    use std::io::Write;
    let fx = endless_fixture();
    let mut child = std::process::Command::new(BIN)
        .args(["--stdio", "--workdir", &fx.workdir_arg()])
        .args(ARGS)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let log = Log::collect(BufReader::new(child.stderr.take().unwrap()).lines());
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_text",
        "arguments": {"workdir": "test", "path": "big", "query": "zzz-absent"}}}),
    );
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    log.wait_for(EVENT_BOUND, is_cancelled_call("search_text"));
    assert_idle(pid);
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_search_flood_is_bounded_and_never_blocks_small_calls() {
    let fx = endless_fixture();
    let workdir = fx.workdir_arg();
    let mut args =
        vec!["--workdir", &workdir, "--max-concurrent-searches", "2", "--busy-wait-seconds", "1"];
    args.extend(ARGS);
    let server = HttpServer::start(&args);
    let endless = json!({"workdir": "test", "path": "big", "query": "zzz-absent"});
    // Two searches take both slots and keep them.
    let running: Vec<_> = (0..2)
        .map(|id| tokio::spawn(post(&server.url, id, "search_text", endless.clone()).send()))
        .collect();
    let client = http_client(&server.url, rmcp::service::ClientLifecycleMode::Initialize).await;
    // Once both are admitted, a third waits its bounded time and is refused.
    // The probe is a search that ends at once when a slot is still free (an
    // endless probe admitted before the two would take a slot for good,
    // and the test would wait for it forever).
    let quick = json!({"workdir": "test", "path": "README.md", "query": "zzz-absent"});
    let refused = loop {
        let (is_error, v) = call(&client, "search_text", quick.clone()).await;
        if is_error {
            let text = v.as_str().unwrap().to_owned();
            assert!(text.starts_with("SERVER_BUSY: "), "{text}");
            break text;
        }
    };
    assert!(refused.contains("retry"), "{refused}");
    // Behind the 2 running, at most 8 may wait: of 16 at once, some are
    // refused without waiting.
    let burst = (0..16).map(|_| call(&client, "search_text", endless.clone()));
    let answers = futures::future::join_all(burst).await;
    let queue_full = answers
        .iter()
        .filter(|(is_error, v)| *is_error && v.as_str().unwrap().contains("queue is full"))
        .count();
    assert!(answers.iter().all(|(is_error, _)| *is_error), "an endless search answered");
    assert!(queue_full >= 1, "no call was refused for a full queue: {answers:?}");
    // Small calls are not behind the flood.
    let (is_error, v) =
        call(&client, "stat_file", json!({"workdir": "test", "path": "README.md"})).await;
    assert!(!is_error, "{v}");
    let (is_error, v) =
        call(&client, "read_text_file", json!({"workdir": "test", "path": "README.md"})).await;
    assert!(!is_error, "{v}");
    let health = reqwest::get(format!("http://{}/healthz", server.addr)).await.unwrap();
    assert!(health.status().is_success());
    // The refusal was logged as such, and the flood ends with its clients.
    server.log.wait_for(EVENT_BOUND, |v| {
        v["event"] == "tool_call" && v["tool"] == "search_text" && v["error_code"] == "SERVER_BUSY"
    });
    for task in running {
        task.abort();
    }
    client.cancel().await.unwrap();
    let log = server.log.clone();
    tokio::task::spawn_blocking(move || {
        log.wait_for(EVENT_BOUND, |v| {
            is_cancelled_call("search_text")(v) && v["error_code"].is_null()
        })
    })
    .await
    .unwrap();
    assert_idle(server.pid());
}
