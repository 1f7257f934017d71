//! apply_patch planning under the call's deadline and cancellation, over
//! stdio with the real binary. The patch is the planner's worst case: a
//! 256 KiB file of `a`/`b` lines made of one sequence twice (a
//! maximal-length LFSR sequence: every run of 17 lines in it is unique)
//! around a `MARK` line, and ~1 MiB of hunks of 17 such lines placed after
//! `MARK`: each block occurs twice in the file, so each must be searched
//! for in the rest of the file. Assertions are on events (the answer, the
//! call's log line, the file), never on durations.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::Project;
use serde_json::{Value, json};

const WINDOW: usize = 17;

/// The lines of the patched half: the start of an LFSR period
/// (x^17 + x^14 + 1), in which every window of 17 lines occurs once.
fn lines() -> Vec<&'static str> {
    let mut state: u32 = 1;
    (0..(1usize << 16) - 1)
        .map(|_| {
            let bit = state & 1;
            let feedback = (state ^ (state >> 3)) & 1;
            state = (state >> 1) | (feedback << (WINDOW - 1));
            if bit == 1 { "b" } else { "a" }
        })
        .collect()
}

/// The half without its last line, `MARK`, the half: 262,143 bytes.
fn file_text() -> String {
    let half: String = lines().iter().map(|l| format!("{l}\n")).collect();
    let text = format!("{}MARK\n{half}", &half[..half.len() - 2]);
    assert!(text.len() <= 256 * 1024, "{}", text.len());
    text
}

/// One hunk per window of the second half, in order (the first after
/// `@@ MARK`): 16 context lines, the 17th replaced.
fn the_patch() -> String {
    let lines = lines();
    let mut patch = String::from("*** Begin Patch\n*** Update File: big.txt\n");
    let pad = "x".repeat(200);
    for (k, window) in lines.chunks_exact(WINDOW).enumerate() {
        patch.push_str(if k == 0 { "@@ MARK\n" } else { "@@\n" });
        for line in &window[..WINDOW - 1] {
            patch.push_str(&format!(" {line}\n"));
        }
        patch.push_str(&format!("-{}\n+{}{pad}\n", window[WINDOW - 1], window[WINDOW - 1]));
    }
    patch.push_str("*** End Patch\n");
    assert!(patch.len() > 900 * 1024 && patch.len() <= 1024 * 1024, "{}", patch.len());
    patch
}

/// A stdio server whose log goes to `<tmp>/server.log`, initialized.
struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    log: std::path::PathBuf,
}

impl Server {
    fn start(p: &Project, call_timeout_seconds: u64) -> Self {
        let log = p.dir.path().join("server.log");
        let mut child = p
            .command()
            .arg("--stdio")
            .env("SERVERFS_SEARCH_TIMEOUT_SECONDS", call_timeout_seconds.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Self { child, stdin, lines, log };
        server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        server.answer(1);
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn answer(&mut self, id: u64) -> Value {
        loop {
            let line = self.lines.next().expect("the server answered").unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// The log line of the apply_patch call, once its work has ended
    /// (waits at most a minute: a safety net, not an assertion).
    fn patch_log_line(&self) -> Value {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = log
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["fields"]["tool"] == "apply_patch" || v["tool"] == "apply_patch")
            {
                return line;
            }
            assert!(Instant::now() < give_up, "no apply_patch log line: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field<'a>(line: &'a Value, name: &str) -> &'a Value {
    if line.get("fields").is_some() { &line["fields"][name] } else { &line[name] }
}

#[test]
fn a_huge_patch_finishes_or_is_refused_within_the_call_deadline_and_writes_nothing_then() {
    let p = Project::new();
    let text = file_text();
    p.write("big.txt", &text);
    let mut server = Server::start(&p, 1);
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "apply_patch", "arguments": {"patch": the_patch()}}}));
    let answer = server.answer(2);
    let result = &answer["result"];
    if result["isError"] == true {
        let message = result["content"][0]["text"].as_str().unwrap();
        assert!(message.starts_with("TIMEOUT: "), "{message}");
        assert!(message.contains("Nothing was written"), "{message}");
        assert_eq!(p.read("big.txt"), text, "a refused patch wrote");
    } else {
        assert_eq!(result["structuredContent"]["applied"], true, "{answer}");
        assert_ne!(p.read("big.txt"), text);
    }
    // The answer is bounded: 100 hunk reports at most.
    assert!(answer.to_string().len() < 64 * 1024, "{} bytes", answer.to_string().len());
}

#[test]
fn notifications_cancelled_stops_planning_and_nothing_is_written() {
    let p = Project::new();
    let text = file_text();
    p.write("big.txt", &text);
    let mut server = Server::start(&p, 600);
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "apply_patch", "arguments": {"patch": the_patch()}}}));
    server.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    let line = server.patch_log_line();
    assert_eq!(field(&line, "cancelled"), true, "{line}");
    assert_eq!(field(&line, "error_code"), "TIMEOUT", "{line}");
    assert_eq!(p.read("big.txt"), text, "a cancelled patch wrote");
    // The server still serves.
    server.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "big.txt", "end_line": 1}}}));
    let answer = server.answer(3);
    assert_ne!(answer["result"]["isError"], true, "{answer}");
}
