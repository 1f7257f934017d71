//! A client that disconnects mid-search stops the search: the server's CPU
//! goes back to idle instead of scanning on for nobody.

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

#[tokio::test]
async fn disconnect_stops_the_search() {
    let fx = Fixture::new();
    // 8 GiB of searchable text from one 32 MiB file and hard links to it
    let big = fx.root().join("big");
    std::fs::create_dir(&big).unwrap();
    let line = "no match on this line, just text to scan through\n";
    std::fs::write(big.join("f000"), line.repeat((32 << 20) / line.len())).unwrap();
    for i in 1..256 {
        std::fs::hard_link(big.join("f000"), big.join(format!("f{i:03}"))).unwrap();
    }
    let server = HttpServer::start(&[
        "--workdir",
        &fx.workdir_arg(),
        "--search-timeout-seconds",
        "300",
        "--search-max-file-bytes",
        "100000000",
    ]);
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

    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = cpu_ticks(pid) - settled;
    assert!(idle < 10, "search kept running after the client left ({idle} ticks in 1 s)");
}
