//! End to end: read_text_file with a negative `start_line` (tail reads)
//! through the real binary, over HTTP (both protocol eras) and stdio.

use crate::common;

use common::*;
use rmcp::ServiceExt;
use serde_json::{Value, json};

/// The workdir: a 1,000-line log and the edge cases of line counting.
fn tail_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(dir.path().join(name), bytes).unwrap();
    let log: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    write("app.log", log.as_bytes());
    write("no-final-newline.txt", b"a\nb\nc");
    write("crlf.txt", b"a\r\nb\r\n");
    write("single.txt", b"only\n");
    write("empty.txt", b"");
    write("bom.txt", b"\xEF\xBB\xBFfirst\nsecond\n");
    let mut tail_nul = b"text\n".repeat(2000);
    tail_nul.extend_from_slice(b"\0\n");
    write("tail-nul.bin", &tail_nul);
    dir
}

async fn read(client: &Client, path: &str, start_line: i64, max_lines: u64) -> Value {
    let args =
        json!({"workdir": "t", "path": path, "start_line": start_line, "max_lines": max_lines});
    let (is_error, v) = call(client, "read_text_file", args).await;
    assert!(!is_error, "{path} {start_line}: {v}");
    v
}

/// (content, start_line, end_line, has_more, next_start_line)
fn page(v: &Value) -> (String, Value, Value, Value, Value) {
    (
        v["content"].as_str().unwrap().to_owned(),
        v["start_line"].clone(),
        v["end_line"].clone(),
        v["has_more"].clone(),
        v["next_start_line"].clone(),
    )
}

fn lines(range: std::ops::RangeInclusive<u32>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

async fn exercise(client: &Client) {
    // The last 200 lines, the page reaching the last line.
    let v = read(client, "app.log", -200, 200).await;
    assert_eq!(page(&v), (lines(801..=1000), json!(-200), json!(-1), json!(false), Value::Null));
    assert_eq!(v["bytes_returned"], lines(801..=1000).len());

    // Paging forward from the end with next_start_line, to -1.
    let (mut start, mut joined, mut calls) = (-250, String::new(), 0);
    loop {
        let v = read(client, "app.log", start, 100).await;
        calls += 1;
        joined += v["content"].as_str().unwrap();
        if v["has_more"] == json!(false) {
            assert_eq!(
                (v["end_line"].clone(), v["next_start_line"].clone()),
                (json!(-1), Value::Null)
            );
            break;
        }
        start = v["next_start_line"].as_i64().unwrap();
        assert!(start < 0);
    }
    assert_eq!((calls, joined), (3, lines(751..=1000)));

    // A final newline starts no extra line; without one the last line is
    // still a line.
    let v = read(client, "no-final-newline.txt", -1, 10).await;
    assert_eq!(page(&v), ("c".into(), json!(-1), json!(-1), json!(false), Value::Null));
    let v = read(client, "no-final-newline.txt", -3, 2).await;
    assert_eq!(page(&v), ("a\nb\n".into(), json!(-3), json!(-2), json!(true), json!(-1)));
    let v = read(client, "crlf.txt", -1, 10).await;
    assert_eq!(v["content"], "b\r\n");
    // Before the first line: the page starts at the first line, and says so.
    let v = read(client, "single.txt", -1000, 200).await;
    assert_eq!(page(&v), ("only\n".into(), json!(-1), json!(-1), json!(false), Value::Null));
    let v = read(client, "app.log", -5000, 2).await;
    assert_eq!(page(&v), (lines(1..=2), json!(-1000), json!(-999), json!(true), json!(-998)));
    let v = read(client, "empty.txt", -200, 200).await;
    assert_eq!(page(&v), (String::new(), json!(-200), Value::Null, json!(false), Value::Null));
    let v = read(client, "bom.txt", -2, 1).await;
    assert_eq!(page(&v), ("first\n".into(), json!(-2), json!(-2), json!(true), json!(-1)));

    // Forward reads are unchanged.
    let v = read(client, "app.log", 999, 5).await;
    assert_eq!(page(&v), (lines(999..=1000), json!(999), json!(1000), json!(false), Value::Null));

    let args = json!({"workdir": "t", "path": "tail-nul.bin", "start_line": -1});
    assert_eq!(error_code(client, "read_text_file", args).await, "BINARY_FILE");
    let args = json!({"workdir": "t", "path": "app.log", "start_line": 0});
    assert_eq!(error_code(client, "read_text_file", args).await, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn tail_reads_over_http() {
    let dir = tail_tree();
    let workdir = format!("t={}", dir.path().display());
    let server = HttpServer::start(&["--workdir", &workdir]);
    for (_, lifecycle) in lifecycles() {
        let client = http_client(&server.url, lifecycle).await;
        exercise(&client).await;
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn tail_reads_over_stdio() {
    let dir = tail_tree();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--stdio", "--workdir", &format!("t={}", dir.path().display())]);
    let client: Client = rmcp::model::ClientConfig::default()
        .serve(serverfs_test_support::stdio_transport(cmd))
        .await
        .unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
}
