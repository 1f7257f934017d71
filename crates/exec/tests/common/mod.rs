//! Shared helpers of the integration tests: the supervisor binary, unique
//! tags for the processes a test starts, and a `/proc` scan for them.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serverfs_exec::{CommandSpec, Supervisor};

pub fn supervisor() -> Supervisor {
    Supervisor::new(env!("CARGO_BIN_EXE_serverfs-exec-supervisor"), Vec::<String>::new())
}

/// A number unique to this test process and call, used as the fractional
/// part of a `sleep` argument: `sleep 300.<tag>` is a valid `sleep` and a
/// `/proc/*/cmdline` needle.
pub fn tag() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}{:03}{:09}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), nanos)
}

/// Pids of live (non-zombie) processes whose command line contains `needle`.
pub fn alive_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        // A zombie has an empty command line; it holds no pipe.
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Waits (bounded) until a process of the command with `needle` runs (the
/// supervisor, whose argv holds the whole command text, does not count:
/// it exists before bash has even started).
pub async fn wait_alive(needle: &str) {
    let start = Instant::now();
    let is_supervisor = |pid: &i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("serverfs-exec-supervisor"))
    };
    while alive_with(needle).iter().all(is_supervisor) {
        assert!(start.elapsed() < Duration::from_secs(20), "{needle} never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded) until no process with `needle` is left.
pub async fn wait_gone(needle: &str) {
    let start = Instant::now();
    while !alive_with(needle).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "survivors of {needle}: {:?}",
            alive_with(needle)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn assert_none(needle: &str) {
    let left = alive_with(needle);
    assert!(left.is_empty(), "survivors with {needle}: {left:?}");
}

pub fn spec(command: &str, cwd: &std::path::Path) -> CommandSpec {
    CommandSpec::new(supervisor(), command, cwd)
}

/// The parent pid of `pid` (from `/proc/PID/stat`, after the command name).
pub fn parent_pid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_ascii_whitespace().nth(1).unwrap().parse().unwrap()
}
