//! Shared helpers of serverfs-dev's end-to-end tests: a project tree in a
//! temp dir with a state dir beside it, the real binary over stdio or HTTP,
//! and the real rmcp client.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::ClientConfig;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::Value;
// Not every test binary uses both.
#[allow(unused_imports)]
pub use serverfs_test_support::{Client, call, ok};
use serverfs_test_support::{Listening, code_of, error_text, listen};

pub const BIN: &str = env!("CARGO_BIN_EXE_serverfs-dev");

/// The named tokens of [`Project::command_for_alice_and_bob`].
pub const ALICE: &str = "tok-alice-0123456789abcdef";
pub const BOB: &str = "tok-bob-0123456789abcdef";

/// An initialized MCP client of the server started by `cmd` (its
/// arguments, `--stdio` included, and stderr set by the caller).
pub async fn serve(cmd: tokio::process::Command) -> Client {
    let transport = serverfs_test_support::stdio_transport(cmd);
    serve_client_with_lifecycle(ClientConfig::default(), transport, ClientLifecycleMode::Initialize)
        .await
        .unwrap()
}

/// `<tmp>/project` (the root), `<tmp>/outside`; the state dir and
/// `XDG_STATE_HOME` (where the root's commit lock lives) in a temp dir of
/// the target dir, since a state dir below `/tmp` is refused.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub private: tempfile::TempDir,
}

/// A temp dir commands cannot reach: not below `/tmp` (the target dir's,
/// or another when the checkout itself lives below `/tmp`).
pub fn private_dir() -> tempfile::TempDir {
    serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"))
}

impl Project {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["project/src", "project/.git", "outside"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let p = Self { dir, private: private_dir() };
        p.write("src/lib.rs", "fn one() -> u32 {\n    1\n}\n");
        p.write(".gitignore", "target/\n");
        p.write(".git/config", "[core]\n");
        p.write(".env", "SECRET=1\n");
        std::fs::write(p.dir.path().join("outside/secret.txt"), "outside\n").unwrap();
        p
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    pub fn state(&self) -> PathBuf {
        self.private.path().join("state")
    }

    /// `XDG_STATE_HOME` of every server of this project.
    pub fn xdg(&self) -> PathBuf {
        self.private.path().join("xdg")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// The server's command line for this project.
    pub fn command(&self) -> Command {
        self.command_with_state(&self.state())
    }

    /// [`Project::command`] run as `nobody` (uid and gid 65534, no
    /// groups) through `setpriv`, with HOME in the test's directory, which
    /// (with the root and `src/`) is opened up to that user.
    pub fn command_as_nobody(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.as_nobody(&self.command()))
    }

    /// `server` (a server command line of this project) as `nobody`, as
    /// [`Project::command_as_nobody`] (its environment is not carried over).
    pub fn as_nobody(&self, server: &Command) -> Command {
        use std::os::unix::fs::PermissionsExt;
        for dir in [
            self.dir.path().to_path_buf(),
            self.private.path().to_path_buf(),
            self.root(),
            self.root().join("src"),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let mut wrapped = Command::new("setpriv");
        wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        wrapped
            .arg(server.get_program())
            .args(server.get_args())
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.xdg());
        wrapped
    }

    /// The server's command line with another state dir (same root, same
    /// `XDG_STATE_HOME`).
    pub fn command_with_state(&self, state: &Path) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("--root").arg(self.root()).arg("--state-dir").arg(state);
        cmd.env_remove("SERVERFS_TOKEN").env("XDG_STATE_HOME", self.xdg());
        cmd
    }

    /// A client of a fresh server over stdio.
    /// [`Project::command`] with two named tokens, alice's ([`ALICE`])
    /// and bob's ([`BOB`]), in a tokens file.
    pub fn command_for_alice_and_bob(&self) -> Command {
        use std::os::unix::fs::PermissionsExt;
        let file = self.dir.path().join("tokens");
        std::fs::write(&file, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut cmd = self.command();
        cmd.env("SERVERFS_TOKENS_FILE", &file);
        cmd
    }

    pub async fn stdio_client(&self) -> Client {
        let mut cmd = tokio::process::Command::from(self.command());
        cmd.arg("--stdio").stderr(Stdio::null());
        serve(cmd).await
    }
}

/// An initialized MCP client of the server at `url` with bearer `token`.
pub async fn http_client(url: &str, token: &str) -> Client {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    serve_client_with_lifecycle(ClientConfig::default(), transport, ClientLifecycleMode::Initialize)
        .await
        .unwrap()
}

/// A running serverfs-dev over HTTP on an ephemeral loopback port.
pub struct HttpServer {
    pub url: String,
    /// `host:port`.
    pub addr: String,
    /// The token the server drew for this start, when no credential was
    /// configured (then `url` carries it as `?token=`).
    pub local_token: Option<String>,
    child: serverfs_test_support::KillOnDrop,
}

impl HttpServer {
    pub fn start(project: &Project) -> Self {
        Self::start_with(project.command())
    }

    /// Starts `cmd` (a server command line) on an ephemeral loopback port.
    pub fn start_with(cmd: Command) -> Self {
        let Listening { child, addr, log, local_token, .. } = listen(cmd, Duration::from_secs(30));
        // Keep draining the log so the server never blocks on stderr.
        std::thread::spawn(move || log.for_each(drop));
        let url = match &local_token {
            Some(token) => format!("http://{addr}/mcp?token={token}"),
            None => format!("http://{addr}/mcp"),
        };
        Self { url, addr, local_token, child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs the server and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub async fn client(&self) -> Client {
        let transport = StreamableHttpClientTransport::from_uri(self.url.clone());
        serve_client_with_lifecycle(
            ClientConfig::default(),
            transport,
            ClientLifecycleMode::Initialize,
        )
        .await
        .unwrap()
    }
}

/// A server over stdio driven with raw JSON-RPC lines (for what rmcp's
/// client does not expose: notifications/cancelled, progress, a kill at an
/// exact moment), already initialized (2025-06-18).
pub struct RawStdio {
    pub child: Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// The last lines of the server's log, when [`RawStdio::start`] keeps
    /// it: what the server said, should it end without an answer.
    log: Option<std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>>,
}

impl RawStdio {
    pub fn start(project: &Project) -> Self {
        let mut cmd = project.command();
        cmd.stderr(Stdio::piped());
        Self::spawn_keeping_log(cmd, true)
    }

    /// `cmd` (a [`Project::command`], its stderr as the caller set it)
    /// over stdio, initialized.
    pub fn spawn(cmd: Command) -> Self {
        Self::spawn_keeping_log(cmd, false)
    }

    fn spawn_keeping_log(mut cmd: Command, keep_log: bool) -> Self {
        let mut child =
            cmd.arg("--stdio").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let log = keep_log.then(|| {
            let kept =
                std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
            let stderr = BufReader::new(child.stderr.take().unwrap());
            let writer = std::sync::Arc::clone(&kept);
            std::thread::spawn(move || {
                for line in stderr.lines().map_while(Result::ok) {
                    let mut kept = writer.lock().unwrap();
                    if kept.len() == 40 {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            });
            kept
        });
        let mut raw = Self { child, stdin, lines, log };
        raw.send(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        raw.next();
        raw.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    /// Closes the server's stdin, as a client that is done does; its
    /// process and stdout stay the caller's.
    pub fn close_stdin(self) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
        (self.child, self.lines)
    }

    pub fn send(&mut self, message: Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// The next message from the server.
    pub fn next(&mut self) -> Value {
        let Some(line) = self.lines.next() else {
            let status = self.child.wait().ok();
            // Let the log reader see the end of the server's stderr.
            std::thread::sleep(Duration::from_millis(200));
            let log = self.log.as_ref().map(|l| Vec::from(l.lock().unwrap().clone()));
            panic!("the server ended without an answer ({status:?}); its log: {log:#?}");
        };
        serde_json::from_str(&line.unwrap()).unwrap()
    }

    /// Sends a request and returns the answer with its id (other
    /// messages in between are skipped).
    pub fn call(&mut self, message: Value) -> Value {
        self.send(message.clone());
        loop {
            let v = self.next();
            if v["id"] == message["id"] {
                return v;
            }
        }
    }

    /// Closes stdin (the server then ends) and hands back the child.
    pub fn end(self) -> Child {
        let Self { child, stdin, .. } = self;
        drop(stdin);
        child
    }

    /// Closes stdin and waits: the server must exit 0.
    pub fn finish(self) {
        let Self { mut child, stdin, .. } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

/// The error code of a call that must fail (and never show a host path).
pub async fn error_code(client: &Client, tool: &str, args: Value, host: &Path) -> String {
    let text = error_text(client, tool, args).await;
    assert!(!text.contains(&*host.to_string_lossy()), "host path leaked: {text}");
    code_of(&text)
}

/// A `sleep` argument no other process has: `300.<unique digits>`.
pub fn tag() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!(
        "300.{}{:03}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos.subsec_micros()
    )
}

/// Waits (bounded, generously) until no process holds `tag`.
pub fn assert_none_survive(tag: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = serverfs_test_support::pids_with(tag);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes survived the call: {left:?} ({tag})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn wait_until_running(tag: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while serverfs_test_support::pids_with(tag).is_empty() {
        assert!(Instant::now() < deadline, "the command never started ({tag})");
        std::thread::sleep(Duration::from_millis(50));
    }
}
