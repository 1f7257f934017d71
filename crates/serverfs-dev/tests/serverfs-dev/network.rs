//! Commands on the network by allowlist (issue 35), end to end: the real
//! binary over stdio, as root and as `nobody`, against the local servers
//! of `tests/net/fixtures.py` (HTTP and HTTPS with a test CA, a git
//! repository, a PEP 503 index, a cargo sparse registry, UDP echo, DNS; no
//! internet). With `--command-network-allow` naming the fixtures' literal
//! addresses, curl, Python's urllib, pip, git and cargo reach them through
//! the proxy at 127.0.0.1:3128; an unlisted port and `localhost` (a name
//! that resolves to loopback) get 403 and a `network: refused` line; direct
//! TCP, UDP, DNS, IPv6 and MPTCP fail. Every outcome is also checked on the
//! host side: each fixture counts what reached it. The negative controls
//! run the same commands with `--command-network on`, where each direct
//! probe reaches its fixture and each tool works without a proxy.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Client, Project, ok};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/net/fixtures.py");

/// The proxy commands are given (fixed by the design).
const PROXY: &str = "http://127.0.0.1:3128";

/// A direct connection from the command, not through the proxy: `python3
/// probe.py KIND HOST PORT TOKEN` prints `KIND: reached` when the fixture
/// answered, else `KIND: failed: <why>`. TCP, MPTCP and TCP over IPv6 ask
/// for `/TOKEN` over HTTP; UDP sends TOKEN to the echo server; DNS asks
/// for `TOKEN.test`. The 10 s timeouts only bound a failure that hangs;
/// no outcome depends on them (refusals are immediate, and a run where
/// the network leaks is caught by the fixture's count as well).
const PROBE: &str = r#"import socket, sys
kind, host, port, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    if kind in ("tcp", "tcp6", "mptcp"):
        family = socket.AF_INET6 if kind == "tcp6" else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM, 262 if kind == "mptcp" else 0)
        s.settimeout(10)
        s.connect((host, port))
        s.sendall(("GET /%s HTTP/1.0\r\n\r\n" % token).encode())
        ok = s.recv(100).startswith(b"HTTP/")
    elif kind == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(10)
        s.connect((host, port))
        s.send(token.encode())
        ok = s.recv(100) == token.encode()
    elif kind == "dns":
        name = b"".join(bytes([len(l)]) + l.encode() for l in (token + ".test").split("."))
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(10)
        s.connect((host, port))
        s.send(b"\x51\x35\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name + b"\x00\x00\x01\x00\x01")
        ok = s.recv(512)[:2] == b"\x51\x35"
    else:
        sys.exit("unknown probe " + kind)
    print(kind + (": reached" if ok else ": failed: unexpected answer"))
except OSError as e:
    print(kind + ": failed: " + repr(e))
"#;

/// `tests/net/fixtures.py`, running until dropped; its JSON line.
struct Fixtures {
    info: Value,
    _child: serverfs_test_support::KillOnDrop,
}

impl Fixtures {
    /// Starts the fixtures in `dir` (made by the script, world-readable).
    /// Their stdin is a pipe this process holds: they also end with it.
    fn start(dir: &Path) -> Self {
        let mut child = Command::new("python3")
            .arg(FIXTURES)
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs tests/net/fixtures.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let child = serverfs_test_support::KillOnDrop(child);
        assert!(!line.is_empty(), "tests/net/fixtures.py printed nothing (its stderr is above)");
        Self { info: serde_json::from_str(&line).unwrap(), _child: child }
    }

    fn port(&self, server: &str) -> u16 {
        u16::try_from(self.info[server].as_u64().unwrap_or_else(|| panic!("no {server}"))).unwrap()
    }

    fn s(&self, key: &str) -> String {
        self.info[key].as_str().unwrap_or_else(|| panic!("no {key}: {}", self.info)).to_owned()
    }

    fn ca(&self) -> String {
        self.s("ca")
    }

    /// `scheme://127.0.0.1:PORT` of a fixture server.
    fn url(&self, server: &str) -> String {
        let scheme = if server.starts_with("https") { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port(server))
    }

    /// What reached each fixture server (asked directly, from the host).
    fn hits(&self) -> Value {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port("http"))).unwrap();
        s.write_all(b"GET /_hits HTTP/1.0\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let (_, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        serde_json::from_str(body).unwrap()
    }

    /// Whether any request, datagram or query holding `token` reached any
    /// fixture server.
    fn reached(&self, token: &str) -> bool {
        self.hits()
            .as_object()
            .unwrap()
            .values()
            .flat_map(|v| v.as_array().unwrap())
            .any(|h| h.as_str().unwrap().contains(token))
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n")
}

fn tag() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("t{}x{}", std::process::id(), nanos.subsec_nanos())
}

/// The project with the probe and a cargo project depending on the
/// fixture crate, and the fixtures in `<tmp>/net`.
fn setup() -> (Project, Fixtures) {
    let p = Project::new();
    p.write("probe.py", PROBE);
    let f = Fixtures::start(&p.dir.path().join("net"));
    p.write(
        "cargo-fixture/Cargo.toml",
        &format!(
            "[package]\nname = \"fixture-user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{} = {{ version = \"{}\", registry = \"fixture\" }}\n",
            f.s("crate_name"),
            f.s("crate_version")
        ),
    );
    p.write("cargo-fixture/src/main.rs", "fn main() {}\n");
    (p, f)
}

/// A stdio client of the server with `args`, as `nobody` when `nobody`.
async fn start(p: &Project, nobody: bool, args: &[String]) -> Client {
    let mut cmd =
        if nobody { p.command_as_nobody() } else { tokio::process::Command::from(p.command()) };
    cmd.arg("--stdio").args(args).stderr(Stdio::null());
    common::serve(cmd).await
}

/// The allowlist of these tests: the fixtures' listed ports by literal
/// address, and `localhost` by name (it resolves to loopback: refused).
fn allow_args(f: &Fixtures) -> Vec<String> {
    let list = format!(
        "127.0.0.1:{},127.0.0.1:{},localhost:{}",
        f.port("http"),
        f.port("https"),
        f.port("https")
    );
    vec!["--command-network-allow".into(), list]
}

/// A bash call: its structured answer and the whole result as JSON text
/// (content and structured content: where the `network:` line is).
async fn bash(client: &Client, command: &str) -> (Value, String) {
    let args = json!({"command": command, "timeout_seconds": 300});
    let result = client
        .call_tool(
            CallToolRequestParams::new("bash").with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .expect("the request is answered");
    let all = serde_json::to_string(&result).unwrap();
    assert!(!result.is_error.unwrap_or(false), "bash {command} failed: {all}");
    (result.structured_content.expect("structuredContent"), all)
}

fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

/// The tools' commands against the fixture server `https` (an HTTPS port)
/// and `http`, each request marked with `token` where the tool lets us:
/// (name, command); [`expected`] says what a working one prints.
fn tool_commands(f: &Fixtures, http: &str, https: &str, token: &str) -> Vec<(String, String)> {
    let (ca, plain, tls) = (f.ca(), f.url(http), f.url(https));
    let urllib = "import ssl, sys, urllib.request as u; \
                  c = ssl.create_default_context(cafile=sys.argv[2]); \
                  sys.stdout.write(u.urlopen(sys.argv[1], context=c, timeout=60).read().decode())";
    vec![
        ("curl http".into(), format!("curl -sS -f '{plain}/hello.txt?curl-http-{token}'")),
        (
            "curl https".into(),
            format!("curl -sS -f --cacert {ca} '{tls}/hello.txt?curl-https-{token}'"),
        ),
        (
            "urllib http".into(),
            format!("python3 -c '{urllib}' '{plain}/hello.txt?urllib-http-{token}' {ca}"),
        ),
        (
            "urllib https".into(),
            format!("python3 -c '{urllib}' '{tls}/hello.txt?urllib-https-{token}' {ca}"),
        ),
        (
            "pip".into(),
            format!(
                "PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --no-cache-dir \
                 --disable-pip-version-check --retries 0 --cert {ca} -d \"$TMPDIR/dl\" \
                 --index-url {tls}/simple/ {name} && ls \"$TMPDIR/dl\"",
                name = f.s("pip_name")
            ),
        ),
        (
            "git".into(),
            format!(
                "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_SSL_CAINFO={ca} \
                 git clone -q {tls}/repo.git \"$TMPDIR/clone\" && cat \"$TMPDIR/clone/README\""
            ),
        ),
        (
            "cargo".into(),
            format!(
                "if ! cargo --version >/dev/null 2>&1; then echo 'SKIP: cargo cannot run as this \
                 user'; exit 0; fi; cp -r cargo-fixture \"$TMPDIR/c\" && \
                 CARGO_HOME=\"$TMPDIR/c/home\" CARGO_HTTP_CAINFO={ca} CARGO_NET_RETRY=0 \
                 CARGO_REGISTRIES_FIXTURE_INDEX=sparse+{tls}/index/ \
                 cargo fetch --manifest-path \"$TMPDIR/c/Cargo.toml\" && \
                 ls \"$TMPDIR\"/c/home/registry/cache/*/"
            ),
        ),
    ]
}

/// What a working tool's stdout holds.
fn expected(f: &Fixtures, name: &str) -> String {
    match name.split(' ').next().unwrap() {
        "curl" | "urllib" => f.s("hello_text"),
        "pip" => {
            format!("{}-{}-py3-none-any.whl", f.s("pip_name").replace('-', "_"), f.s("pip_version"))
        }
        "git" => f.s("git_readme"),
        "cargo" => format!("{}-{}.crate", f.s("crate_name"), f.s("crate_version")),
        _ => unreachable!(),
    }
}

/// Runs each tool against the listed ports and checks it worked (and, for
/// the requests marked with the token, that they reached the fixture).
async fn tools_work(client: &Client, f: &Fixtures) {
    let t = tag();
    for (name, command) in tool_commands(f, "http", "https", &t) {
        let (v, all) = bash(client, &command).await;
        if name == "cargo" && stdout(&v).starts_with("SKIP:") {
            eprintln!("{name}: {}", stdout(&v).trim());
            continue;
        }
        assert_eq!(v["exit_code"], 0, "{name}: {all}");
        assert!(stdout(&v).contains(&expected(f, &name)), "{name}: {all}");
        assert!(!all.contains("network: refused"), "{name}: {all}");
        if name.starts_with("curl") || name.starts_with("urllib") {
            let marker = format!("{}-{t}", name.replace(' ', "-"));
            assert!(f.reached(&marker), "{name}: the fixture never saw {marker}: {}", f.hits());
        }
    }
}

/// The direct probes: (kind, host, fixture port); tcp6 only where the
/// host has an IPv6 loopback.
fn probes(f: &Fixtures) -> Vec<(&'static str, &'static str, u16)> {
    let mut probes = vec![
        ("tcp", "127.0.0.1", f.port("http")),
        ("mptcp", "127.0.0.1", f.port("http")),
        ("udp", "127.0.0.1", f.port("udp_echo")),
        ("dns", "127.0.0.1", f.port("dns")),
    ];
    if f.info["http6"].is_null() {
        eprintln!("no IPv6 loopback on this host: the tcp6 probe is skipped");
    } else {
        probes.push(("tcp6", "::1", f.port("http6")));
    }
    probes
}

/// Each direct probe (and curl with the proxy turned off) ends as `want`
/// ("reached" or "failed"), seen by the command and by the fixture.
async fn direct(client: &Client, f: &Fixtures, want: &str) {
    for (kind, host, port) in probes(f) {
        let t = tag();
        let (v, all) = bash(client, &format!("python3 probe.py {kind} {host} {port} {t}")).await;
        assert_eq!(v["exit_code"], 0, "{kind}: {all}");
        assert!(stdout(&v).starts_with(&format!("{kind}: {want}")), "{kind}: {all}");
        assert_eq!(f.reached(&t), want == "reached", "{kind} {t}: {}", f.hits());
    }
    let t = tag();
    let url = format!("{}/hello.txt?noproxy-{t}", f.url("http"));
    let (v, all) = bash(client, &format!("curl -sS --noproxy '*' '{url}'")).await;
    if want == "reached" {
        assert_eq!((v["exit_code"].clone(), stdout(&v)), (json!(0), &*f.s("hello_text")), "{all}");
    } else {
        assert_ne!(v["exit_code"], 0, "{all}");
        assert!(!stdout(&v).contains(&f.s("hello_text")), "{all}");
    }
    assert_eq!(f.reached(&t), want == "reached", "curl --noproxy {t}: {}", f.hits());
}

/// Allowed: every tool reaches the listed fixtures through the proxy, in
/// a bash call and in a shell session; the proxy variables are set.
async fn allowed_hosts_are_reached_through_the_proxy(nobody: bool) {
    let (p, f) = setup();
    let client = start(&p, nobody, &allow_args(&f)).await;
    let names = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "CARGO_HTTP_PROXY",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "PIP_PROXY",
        "NO_PROXY",
        "no_proxy",
    ];
    let show = names.iter().map(|n| format!("echo \"{n}=${{{n}-}}\"")).collect::<Vec<_>>();
    let (v, all) = bash(&client, &show.join("; ")).await;
    let want = names
        .iter()
        .map(|n| format!("{n}={}\n", if n.eq_ignore_ascii_case("no_proxy") { "" } else { PROXY }))
        .collect::<String>();
    assert_eq!(stdout(&v), want, "{all}");

    tools_work(&client, &f).await;

    // A shell session is on the same network.
    let t = tag();
    let id = ok(&client, "shell_open", json!({})).await["session_id"].as_str().unwrap().to_owned();
    let input = format!(
        "curl -sS -f '{}/hello.txt?session-{t}'; echo \"rc=$?\"; \
         python3 probe.py tcp 127.0.0.1 {} session-direct-{t}; exit\n",
        f.url("http"),
        f.port("http")
    );
    ok(&client, "shell_write", json!({"session_id": id, "input": input})).await;
    let mut out = String::new();
    let mut offset = 0;
    loop {
        let v =
            ok(&client, "shell_read", json!({"session_id": id, "offset": offset, "wait_ms": 5000}))
                .await;
        out.push_str(v["output"].as_str().unwrap());
        offset = v["next_offset"].as_u64().unwrap();
        if v["exited"] == true && v["more"] == false {
            break;
        }
    }
    assert!(out.contains(&format!("{}rc=0", f.s("hello_text"))), "{out}");
    assert!(out.contains("tcp: failed"), "{out}");
    assert!(f.reached(&format!("session-{t}")), "{}", f.hits());
    assert!(!f.reached(&format!("session-direct-{t}")), "{}", f.hits());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn allowed_hosts_are_reached_through_the_proxy_as_the_server_s_user() {
    allowed_hosts_are_reached_through_the_proxy(false).await;
}

#[tokio::test]
async fn allowed_hosts_are_reached_through_the_proxy_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    allowed_hosts_are_reached_through_the_proxy(true).await;
}

/// Refused: an unlisted port (plain HTTP: 403 with the proxy's line; HTTPS:
/// the CONNECT answered 403) and `localhost`, listed by name, which
/// resolves to loopback; every tool fails against the unlisted HTTPS port;
/// the answer names each refusal; nothing reached those fixtures.
async fn unlisted_hosts_get_403(nobody: bool) {
    let (p, f) = setup();
    let client = start(&p, nobody, &allow_args(&f)).await;
    let t = tag();
    let (hu, su, s) = (f.port("http_unlisted"), f.port("https_unlisted"), f.port("https"));

    let cmd = format!("curl -sS -w '%{{http_code}}\\n' 'http://127.0.0.1:{hu}/hello.txt?{t}'");
    let (v, all) = bash(&client, &cmd).await;
    let out = stdout(&v);
    assert!(out.starts_with(&format!("serverfs: refused 127.0.0.1:{hu} (")), "{all}");
    assert!(out.ends_with("403\n"), "{all}");
    assert!(all.contains(&format!("network: refused 127.0.0.1:{hu} (")), "{all}");

    let cmd = format!("curl -sS --cacert {} 'https://127.0.0.1:{su}/hello.txt?{t}'", f.ca());
    let (v, all) = bash(&client, &cmd).await;
    assert_eq!(v["exit_code"], 56, "{all}");
    assert!(v["stderr"].as_str().unwrap().contains("403"), "{all}");
    assert!(all.contains(&format!("network: refused 127.0.0.1:{su} (")), "{all}");

    // Listed by name, but the name resolves to loopback.
    let cmd = format!("curl -sS --cacert {} 'https://localhost:{s}/hello.txt?{t}'", f.ca());
    let (v, all) = bash(&client, &cmd).await;
    assert_eq!(v["exit_code"], 56, "{all}");
    assert!(all.contains(&format!("network: refused localhost:{s} (")), "{all}");
    // Not listed by name at all (only as 127.0.0.1).
    let h = f.port("http");
    let cmd = format!("curl -sS -w '%{{http_code}}\\n' 'http://localhost:{h}/hello.txt?{t}'");
    let (v, all) = bash(&client, &cmd).await;
    assert!(stdout(&v).starts_with(&format!("serverfs: refused localhost:{h} (")), "{all}");
    assert!(stdout(&v).ends_with("403\n"), "{all}");

    for (name, command) in tool_commands(&f, "http_unlisted", "https_unlisted", &t) {
        let (v, all) = bash(&client, &command).await;
        if name == "cargo" && stdout(&v).starts_with("SKIP:") {
            eprintln!("{name}: {}", stdout(&v).trim());
            continue;
        }
        assert_ne!(v["exit_code"], 0, "{name}: {all}");
        let port = if name.ends_with("http") { hu } else { su };
        assert!(all.contains(&format!("network: refused 127.0.0.1:{port} (")), "{name}: {all}");
    }
    let hits = f.hits();
    assert!(hits.get("http_unlisted").is_none() && hits.get("https_unlisted").is_none(), "{hits}");
    assert!(!f.reached(&t), "{hits}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn unlisted_hosts_get_403_as_the_server_s_user() {
    unlisted_hosts_get_403(false).await;
}

#[tokio::test]
async fn unlisted_hosts_get_403_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    unlisted_hosts_get_403(true).await;
}

#[tokio::test]
async fn direct_connections_fail_as_the_server_s_user() {
    let (p, f) = setup();
    let client = start(&p, false, &allow_args(&f)).await;
    direct(&client, &f, "failed").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn direct_connections_fail_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    let (p, f) = setup();
    let client = start(&p, true, &allow_args(&f)).await;
    direct(&client, &f, "failed").await;
    client.cancel().await.unwrap();
}

/// Negative control: with `--command-network on` every direct probe
/// reaches its fixture and every tool works without a proxy (so the tests
/// above see a failure only where the allowlist makes one).
async fn with_the_network_on_everything_reaches(nobody: bool) {
    let (p, f) = setup();
    let client = start(&p, nobody, &["--command-network".into(), "on".into()]).await;
    direct(&client, &f, "reached").await;
    tools_work(&client, &f).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn with_the_network_on_everything_reaches_as_the_server_s_user() {
    with_the_network_on_everything_reaches(false).await;
}

#[tokio::test]
async fn with_the_network_on_everything_reaches_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    with_the_network_on_everything_reaches(true).await;
}
