//! Shared helpers for the end-to-end tests: a fixture tree in a temp dir,
//! the real binary started over HTTP or stdio, and a real rmcp client.

#![allow(dead_code, unreachable_pub)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
// Not every test binary uses both.
#[allow(unused_imports)]
pub use serverfs_test_support::{Client, call, error_code};
use serverfs_test_support::{Listening, listen};

pub const BIN: &str = env!("CARGO_BIN_EXE_serverfs-mcp");

/// The task book's fixture tree plus the hostile cases.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("test");
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("README.md", "# Fixture\nhello\n");
        write("project/main.py", "import os\nDATABASE_URL = os.getenv(\"DATABASE_URL\")\n");
        write("project/docker-compose.yml", "services:\n  app:\n    image: x\n");
        write("secret.env", "TOKEN=do-not-leak\n");
        write(".hidden/notes.txt", "hidden\n");
        write("中文.txt", "你好，世界\n");
        symlink("/etc", root.join("etc-link")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        Self { dir }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("test")
    }

    pub fn workdir_arg(&self) -> String {
        format!("test={}", self.root().display())
    }
}

/// A running `serverfs-mcp` over HTTP on an ephemeral port.
pub struct HttpServer {
    pub child: serverfs_test_support::KillOnDrop,
    pub url: String,
    pub addr: String,
    pub log: Log,
}

/// The JSON lines a server wrote to stderr, collected by a thread that
/// keeps draining the pipe (so the server never blocks on it).
#[derive(Clone, Default)]
pub struct Log(std::sync::Arc<std::sync::Mutex<Vec<Value>>>);

impl Log {
    /// Drains `lines` into a new log, in the background.
    pub fn collect(lines: impl Iterator<Item = std::io::Result<String>> + Send + 'static) -> Self {
        let log = Self::default();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                sink.0.lock().unwrap().push(v);
            }
        });
        log
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    /// The first line for which `pred` holds, waiting up to `timeout` for it
    /// (a generous bound: the assertion is that the event happens).
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.0.lock().unwrap().iter().find(|v| pred(v)) {
                return v.clone();
            }
            assert!(Instant::now() < deadline, "no such log line within {timeout:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl HttpServer {
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(Command::new(BIN), args, env)
    }

    /// Starts the server as `uid:gid` (the caller must be root).
    pub fn start_as(uid: u32, gid: u32, args: &[&str]) -> Self {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(BIN);
        cmd.uid(uid).gid(gid);
        Self::spawn(cmd, args, &[])
    }

    fn spawn(mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> Self {
        cmd.args(args).envs(env.iter().copied());
        let Listening { child, addr, log, .. } = listen(cmd, Duration::from_secs(20));
        let log = Log::collect(log);
        Self { url: format!("http://{addr}/mcp"), addr, child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

pub fn lifecycles() -> Vec<(&'static str, ClientLifecycleMode)> {
    vec![
        ("initialize", ClientLifecycleMode::Initialize),
        (
            "2026-07-28",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    ]
}

pub async fn http_client(url: &str, lifecycle: ClientLifecycleMode) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    serve_client_with_lifecycle(ClientConfig::default(), transport, lifecycle).await.unwrap()
}

/// A client that sends `Authorization: Bearer <token>` when `token` is set;
/// `Err` when the server refuses it.
pub async fn try_http_client(
    url: &str,
    lifecycle: ClientLifecycleMode,
    token: Option<&str>,
) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    serve_client_with_lifecycle(ClientConfig::default(), transport, lifecycle)
        .await
        .map_err(|e| e.to_string())
}

pub fn assert_no_host_path(haystack: &str, root: &Path) {
    let host = root.parent().unwrap().to_string_lossy().into_owned();
    assert!(!haystack.contains(&host), "host path leaked: {haystack}");
    assert!(!haystack.contains("/workdirs/"), "slot path leaked: {haystack}");
}
