//! Load check (not timed): 32 concurrent MCP clients make 5,000 calls in
//! total against the real binary; none may fail, and the server's open file
//! descriptors must return to their starting count.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const CLIENTS: usize = 32;
const CALLS: usize = 5_000;

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_no_failures_no_fd_leak() {
    let fx = Fixture::new();
    for i in 0..50 {
        std::fs::write(fx.root().join(format!("project/file{i:02}.txt")), "line\n".repeat(100))
            .unwrap();
    }
    let server = HttpServer::start(&["--workdir", &fx.workdir_arg()]);
    let pid = server.pid();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let fds_before = open_fds(pid);
    let idle_rss = status_kib(pid, "VmRSS:");

    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let url = server.url.clone();
        let calls = CALLS / CLIENTS + usize::from(c < CALLS % CLIENTS);
        tasks.push(tokio::spawn(async move {
            let client = http_client(&url, rmcp::service::ClientLifecycleMode::Initialize).await;
            let mut failed = 0usize;
            for i in 0..calls {
                let (tool, args) = match i % 3 {
                    0 => ("stat_file", json!({"workdir": "test", "path": format!("project/file{:02}.txt", i % 50)})),
                    1 => ("read_text_file", json!({"workdir": "test", "path": format!("project/file{:02}.txt", i % 50), "max_lines": 20})),
                    _ => ("list_directory", json!({"workdir": "test", "path": "project", "limit": 10})),
                };
                let (is_error, _) = call(&client, tool, args).await;
                failed += usize::from(is_error);
            }
            client.cancel().await.unwrap();
            (calls, failed)
        }));
    }
    let mut total = 0;
    for t in tasks {
        let (calls, failed) = t.await.unwrap();
        assert_eq!(failed, 0);
        total += calls;
    }
    assert_eq!(total, CALLS);
    let elapsed = started.elapsed();
    let peak_rss = status_kib(pid, "VmHWM:");

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut fds_after = open_fds(pid);
    while fds_after != fds_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        fds_after = open_fds(pid);
    }
    eprintln!(
        "load: {CALLS} calls by {CLIENTS} clients in {elapsed:?}; fds {fds_before} -> {fds_after}; RSS idle {idle_rss} KiB, peak {peak_rss} KiB"
    );
    assert_eq!(fds_after, fds_before, "file descriptors leaked");
}
