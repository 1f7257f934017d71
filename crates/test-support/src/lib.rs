//! Helpers shared by the end-to-end tests of both binaries (a
//! dev-dependency only, never in a shipped graph): start the real binary
//! over HTTP on an ephemeral loopback port, and call its tools through the
//! real rmcp client.
//!
//! Each binary's `tests/common` keeps only what is its own (its fixture
//! tree, its command line); the pieces here are the ones both had copies
//! of.

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

/// A connected rmcp client.
pub type Client = RunningService<RoleClient, ClientConfig>;

/// A child process that is SIGKILLed and reaped when this is dropped, also
/// when the test fails before its end: no test leaves a server running.
/// What a killed serverfs-dev leaves in the temporary directory (its
/// directory of command `TMPDIR`s, `serverfs-cmd-<pid>-<random>`, which the next
/// start of a server of its user would sweep) is removed too: no test
/// leaves a directory behind.
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if let Some(left) = tmpdir_parent_of(self.0.id()) {
            let _ = std::fs::remove_dir_all(left);
        }
    }
}

/// The directory of private `TMPDIR`s the server of `pid` made in the
/// temporary directory (`serverfs-cmd-<pid>-<random>`), if there is one.
pub fn tmpdir_parent_of(pid: u32) -> Option<std::path::PathBuf> {
    let prefix = format!("serverfs-cmd-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
        .map(|e| e.path())
}

/// A server started by [`listen`]: the child, its `host:port`, and the
/// rest of its stderr (JSON log lines) for the caller to drain.
pub struct Listening {
    /// The server process, killed when dropped.
    pub child: KillOnDrop,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its stderr after the `listening` line; keep draining it, or the
    /// server blocks on a full pipe.
    pub log: Lines<BufReader<ChildStderr>>,
    /// The local token serverfs-dev drew for this start (its `local_token`
    /// line's file, read), when it did.
    pub local_token: Option<String>,
    /// Its stderr up to the `listening` line.
    pub start_up: Vec<String>,
}

/// Starts `cmd` with `--listen 127.0.0.1:0` and waits (up to `startup`, a
/// safety net) for its `listening` log line.
///
/// # Panics
/// When the server exits or does not listen in time.
pub fn listen(mut cmd: Command, startup: Duration) -> Listening {
    let mut child = cmd
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut log = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let deadline = Instant::now() + startup;
    let mut said = Vec::new();
    let mut local_token = None;
    let addr = loop {
        assert!(Instant::now() < deadline, "server did not start: {said:#?}");
        let Some(line) = log.next() else {
            panic!("server exited before listening: {said:#?}");
        };
        let line = line.expect("a log line");
        said.push(line.clone());
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["event"] == "local_token" {
            let file = v["file"].as_str().expect("the token's file");
            local_token =
                Some(std::fs::read_to_string(file).expect("the token's file is readable"));
        }
        if v["event"] == "listening" {
            break v["address"].as_str().expect("an address").to_owned();
        }
    };
    Listening { child: KillOnDrop(child), addr, log, local_token, start_up: said }
}

/// An rmcp stdio transport to the server `cmd` starts (on the test's tokio
/// runtime). The server's log goes to the test's own captured output, line
/// by line: shown when the test fails, hidden when it passes. (rmcp's
/// `TokioChildProcess::new` sets stderr to inherit whatever `cmd` says, so
/// every server's log would reach the terminal.)
///
/// # Panics
/// When the server cannot be started.
pub fn stdio_transport(cmd: tokio::process::Command) -> TokioChildProcess {
    use tokio::io::AsyncBufReadExt;
    let (transport, stderr) =
        TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().expect("the server starts");
    if let Some(stderr) = stderr {
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
            }
        });
    }
    transport
}

/// Calls a tool; returns (is_error, structured content or the error text).
///
/// # Panics
/// When `args` is not an object or the request itself fails.
pub async fn call(client: &Client, tool: &str, args: Value) -> (bool, Value) {
    let arguments = args.as_object().expect("arguments are an object").clone();
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("the request is answered");
    if result.is_error.unwrap_or(false) {
        let text = serde_json::to_value(&result.content).expect("content")[0]["text"].clone();
        (true, text)
    } else {
        (false, result.structured_content.clone().expect("structuredContent"))
    }
}

/// The structured result of a call that must succeed.
///
/// # Panics
/// When the call fails.
pub async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let (is_error, v) = call(client, tool, args.clone()).await;
    assert!(!is_error, "{tool} {args} failed: {v}");
    v
}

/// The `CODE: message` text of a call that must fail.
///
/// # Panics
/// When the call succeeds.
pub async fn error_text(client: &Client, tool: &str, args: Value) -> String {
    let (is_error, v) = call(client, tool, args.clone()).await;
    assert!(is_error, "{tool} {args} unexpectedly succeeded: {v}");
    v.as_str().expect("error text").to_owned()
}

/// The error code of a call that must fail.
///
/// # Panics
/// When the call succeeds.
pub async fn error_code(client: &Client, tool: &str, args: Value) -> String {
    code_of(&error_text(client, tool, args).await)
}

/// The code of a `CODE: message` text.
pub fn code_of(text: &str) -> String {
    text.split(':').next().unwrap_or_default().to_owned()
}

/// Pids of the live processes (this test's own excepted) whose command
/// line contains `needle`: how the survivor tests find what a command
/// left behind. A zombie has an empty command line, so it never matches.
pub fn pids_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
        })
        .collect()
}

/// Copies the program `from` to `to` (mode kept) with `cp` in a child
/// process, so that this test process never holds `to` open for writing:
/// a child another test thread forks meanwhile would inherit that
/// descriptor, and starting `to` would then fail with "Text file busy".
///
/// # Panics
/// When the copy fails.
pub fn copy_program(from: &str, to: &std::path::Path) {
    let status = Command::new("cp").arg("-p").arg(from).arg(to).status().expect("cp runs");
    assert!(status.success(), "cp {from} {}", to.display());
}

/// A fresh directory outside `/tmp`, `/dev/shm` and `$TMPDIR` (where
/// sandboxed commands may write, so serverfs-dev keeps its state and its
/// program out of them): the first of `preferred` (a test's
/// `CARGO_TARGET_TMPDIR`), `/var/tmp` and `$HOME` that lies below none of
/// them, every symbolic link resolved — a checkout may itself live there.
///
/// # Panics
/// When none of them can hold a temporary directory.
pub fn dir_outside_tmp(preferred: &str) -> tempfile::TempDir {
    let reached: Vec<std::path::PathBuf> =
        [std::path::PathBuf::from("/tmp"), "/dev/shm".into(), std::env::temp_dir()]
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
    let candidates = [
        Some(std::path::PathBuf::from(preferred)),
        Some("/var/tmp".into()),
        std::env::var_os("HOME").map(std::path::PathBuf::from),
    ];
    candidates
        .into_iter()
        .flatten()
        .filter(|dir| {
            dir.canonicalize().is_ok_and(|real| !reached.iter().any(|r| real.starts_with(r)))
        })
        .find_map(|dir| tempfile::tempdir_in(dir).ok())
        .expect("a directory outside /tmp, /dev/shm and $TMPDIR to write test files in")
}

/// Kills a process that outlives `limit` (SIGKILL, by pid): a server that
/// hangs makes its test fail (its pipes close) instead of stalling the
/// whole run. A safety net only; the test's assertions are on events.
/// Dropped without [`Watchdog::disarm`] (the test panicked), it kills at
/// once, so a failed test leaves no server behind either.
pub struct Watchdog {
    disarm: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    /// Watches `pid` from now on.
    pub fn arm(pid: u32, limit: Duration) -> Self {
        let (disarm, disarmed) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let fired = disarmed.recv_timeout(limit).is_err();
            if fired {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            fired
        });
        Self { disarm, thread }
    }

    /// Stops watching; whether it had already killed the process.
    pub fn disarm(self) -> bool {
        let _ = self.disarm.send(());
        self.thread.join().unwrap_or(true)
    }
}

/// Runs `f` with a JSON subscriber at INFO scoped to this thread, and
/// returns its result and the log lines it wrote.
///
/// Use it in a test binary of its own (one test): tracing caches each
/// callsite's interest process-wide, and while a scoped subscriber is the
/// only one registered, a callsite another thread reaches first (with no
/// subscriber) is cached as never enabled, so its events would be missed.
pub fn json_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let bytes = sink.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    (result, String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads the command line of a command's parent (its supervisor) from
/// outside while the command runs: inside the sandbox's view `/proc` shows
/// the command only its own processes. [`ParentArgv::prefix`] goes before
/// the command: it writes `$PPID` to a file in `dir` (which the command
/// may write) and waits for a go; [`ParentArgv::read`], awaited beside the
/// call, reads that pid's command line (NULs as spaces) and gives the go.
pub struct ParentArgv {
    pid_file: std::path::PathBuf,
    go: std::path::PathBuf,
}

impl ParentArgv {
    pub fn new(dir: &std::path::Path) -> Self {
        Self { pid_file: dir.join("parent-pid"), go: dir.join("parent-go") }
    }

    /// The shell text to put before the command.
    pub fn prefix(&self) -> String {
        let (pid, go) = (self.pid_file.display(), self.go.display());
        format!(
            "echo $PPID > '{pid}.new' && mv '{pid}.new' '{pid}'; \
             while [ ! -e '{go}' ]; do sleep 0.01; done; rm -f '{pid}' '{go}'; "
        )
    }

    /// The parent's command line; bounded by 60 s of waiting for the pid.
    pub async fn read(&self) -> String {
        let start = std::time::Instant::now();
        let pid = loop {
            if let Ok(text) = std::fs::read_to_string(&self.pid_file) {
                break text.trim().to_owned();
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the command never wrote $PPID");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        std::fs::write(&self.go, "").unwrap();
        String::from_utf8_lossy(&argv).replace('\0', " ")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_watchdog_kills_only_what_outlives_it() {
        let mut hung = Command::new("sleep").arg("300").spawn().unwrap();
        let watchdog = Watchdog::arm(hung.id(), Duration::from_millis(100));
        let status = hung.wait().unwrap();
        assert!(watchdog.disarm());
        assert_eq!(status.signal(), Some(9));

        let mut quick = Command::new("true").spawn().unwrap();
        let watchdog = Watchdog::arm(quick.id(), Duration::from_secs(300));
        assert!(quick.wait().unwrap().success());
        assert!(!watchdog.disarm());
    }
}
