//! Commands on the network by allowlist (`--command-network-allow`): the
//! real binary, real processes, a real upstream on loopback named by its
//! literal address (CI has no internet). What a model reads of a refusal,
//! the audit line of each connection, the refusal of a name that resolves
//! to loopback, a hostile client of the proxy, and the start-up refusals.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::mpsc;

use serde_json::{Value, json};

use crate::common::{self, ALICE, BOB, Project};
use serverfs_test_support::{Listening, listen, ok};

/// The upstream's whole answer: its bytes are what the proxy receives.
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n";

/// A one-answer-per-connection HTTP server on loopback: for each
/// connection it reads the request head, answers [`RESPONSE`] and closes;
/// the receiver gets each request head.
fn upstream() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = stream.write_all(RESPONSE);
            let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
        }
    });
    (port, rx)
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn bash(client: &common::Client, command: &str) -> Value {
    ok(client, "bash", json!({ "command": command })).await
}

/// The JSON log lines of `log` whose `event` is one of `wanted`, read
/// until `n` of them came (whatever their order).
fn events(log: &mut Listening, wanted: &[&str], n: usize) -> Vec<Value> {
    let mut found = Vec::new();
    while found.len() < n {
        let line = log.log.next().expect("the server's log ends early").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if wanted.iter().any(|w| v["event"] == *w) {
            found.push(v);
        }
    }
    found
}

/// Alice's allowed connection and Bob's refused one: each an audit line
/// with exactly the principal, the command, the host and port, the
/// verdict, why, the bytes each way and the duration; Bob's answer says
/// what was refused, and the 403's body names the host and the setting.
#[tokio::test(flavor = "multi_thread")]
async fn each_connection_is_an_audit_line_and_a_refusal_is_in_the_answer() {
    let p = Project::new();
    let (port, requests) = upstream();
    let unlisted = closed_port();
    let mut cmd = p.command_for_alice_and_bob();
    cmd.arg("--command-network-allow").arg(format!("127.0.0.1:{port}"));
    let mut server = listen(cmd, std::time::Duration::from_secs(60));
    let url = format!("http://{}/mcp", server.addr);
    let (alice, bob) =
        (common::http_client(&url, ALICE).await, common::http_client(&url, BOB).await);

    let allowed = bash(&alice, &format!("curl -sS http://127.0.0.1:{port}/x")).await;
    assert_eq!(allowed["stdout"], "hello\n", "{allowed}");
    assert!(allowed.get("network").is_none(), "{allowed}");
    let request_bytes = requests.recv().unwrap().len();

    let refused = bash(&bob, &format!("curl -sS http://127.0.0.1:{unlisted}/x")).await;
    let why = format!("127.0.0.1:{unlisted} (not in --command-network-allow)");
    assert_eq!(refused["stdout"], format!("serverfs: refused {why}\n"), "{refused}");
    assert_eq!(refused["network"], json!([format!("network: refused {why}")]), "{refused}");

    let (commands, lines): (Vec<Value>, Vec<Value>) =
        events(&mut server, &["command", "network"], 4)
            .into_iter()
            .partition(|v| v["event"] == "command");
    let (mut allowed_line, mut refused_line) = (lines[0].clone(), lines[1].clone());
    if allowed_line["verdict"] != "allowed" {
        std::mem::swap(&mut allowed_line, &mut refused_line);
    }
    let id = |principal: &str| {
        let line = commands.iter().find(|c| c["principal"] == format!("token:{principal}"));
        line.unwrap_or_else(|| panic!("no command line of {principal}: {commands:?}"))["command_id"]
            .clone()
    };
    for line in [&mut allowed_line, &mut refused_line] {
        let object = line.as_object_mut().unwrap();
        assert!(object.remove("timestamp").is_some());
        assert!(object.remove("duration_ms").unwrap().is_u64());
    }
    assert_eq!(
        allowed_line,
        json!({
            "level": "INFO", "event": "network", "principal": "token:alice", "command": id("alice"),
            "host": "127.0.0.1", "port": port, "verdict": "allowed", "reason": "closed",
            "sent": request_bytes, "received": RESPONSE.len(),
        })
    );
    assert_eq!(
        refused_line,
        json!({
            "level": "INFO", "event": "network", "principal": "token:bob", "command": id("bob"),
            "host": "127.0.0.1", "port": unlisted, "verdict": "refused",
            "reason": "not in --command-network-allow", "sent": 0, "received": 0,
        })
    );
}

/// A listed name that resolves to loopback is refused (no name leads to
/// the machine's own services), as is an unlisted metadata address; the
/// literal address of the same upstream is reached. As the server's user
/// and as nobody.
async fn names_lead_only_to_public_addresses(nobody: bool) {
    let p = Project::new();
    let (port, requests) = upstream();
    let allow = format!("localhost:{port},127.0.0.1:{port}");
    let mut cmd =
        if nobody { p.command_as_nobody() } else { tokio::process::Command::from(p.command()) };
    cmd.arg("--stdio").args(["--command-network-allow", &allow]).stderr(Stdio::null());
    let client = common::serve(cmd).await;
    let by_name = bash(&client, &format!("curl -sS http://localhost:{port}/x")).await;
    let why = format!(
        "localhost:{port} (resolves to 127.0.0.1, not a public address; only an address listed literally may be reached)"
    );
    assert_eq!(by_name["stdout"], format!("serverfs: refused {why}\n"), "{by_name}");
    let metadata = bash(&client, "curl -sS http://169.254.169.254/latest/meta-data/").await;
    assert_eq!(
        metadata["network"],
        json!(["network: refused 169.254.169.254:80 (not in --command-network-allow)"])
    );
    let literal = bash(&client, &format!("curl -sS http://127.0.0.1:{port}/x")).await;
    assert_eq!(literal["stdout"], "hello\n", "{literal}");
    // The site it reaches is the one allowed, whatever Host the request
    // names (another site behind the same address, a CDN's).
    let fronted =
        bash(&client, &format!("curl -sS -H 'Host: evil.example' http://127.0.0.1:{port}/x")).await;
    assert_eq!(fronted["stdout"], "hello\n", "{fronted}");
    requests.recv().unwrap(); // the literal one's
    let last = requests.recv().unwrap().to_ascii_lowercase();
    assert!(last.contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")), "{last}");
    assert!(!last.contains("evil.example"), "{last}");
    // Around the proxy: no route, and Landlock's TCP rule besides.
    let direct = bash(&client, &format!("curl -sS --noproxy '*' http://127.0.0.1:{port}/x")).await;
    assert_ne!(direct["exit_code"], 0, "{direct}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn names_lead_only_to_public_addresses_as_the_server_s_user() {
    names_lead_only_to_public_addresses(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn names_lead_only_to_public_addresses_as_nobody() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    names_lead_only_to_public_addresses(true).await;
}

/// What a hostile command sends the proxy costs it little and gets a clear
/// answer: a 100 KiB request head (431), garbage (400), a request that is
/// not for a proxy (400), and more connections at once than a command may
/// hold (those past the cap closed, and said in the answer; the others
/// served).
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_client_of_the_proxy_gets_short_answers() {
    let p = Project::new();
    let (port, _requests) = upstream();
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.arg("--stdio")
        .args(["--command-network-allow", &format!("127.0.0.1:{port}")])
        .stderr(Stdio::null());
    let client = common::serve(cmd).await;
    let script = r#"
import socket
def ask(data):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(data)
    answer = s.recv(4096).split(b"\r\n")[0].decode()
    s.close()
    return answer
print(ask(b"GET http://127.0.0.1:PORT/ HTTP/1.1\r\nX-Big: " + b"a" * 102400 + b"\r\n\r\n"))
print(ask(b"\x00\x01\x02garbage\r\n\r\n"))
print(ask(b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n"))
"#
    .replace("PORT", &port.to_string());
    let out = bash(&client, &format!("python3 -c '{script}'")).await;
    let lines: Vec<&str> = out["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(lines[0], "HTTP/1.1 431 Request Header Fields Too Large", "{out}");
    assert_eq!(lines[1], "HTTP/1.1 400 Bad Request", "{out}");
    assert_eq!(lines[2], "HTTP/1.1 400 Bad Request", "{out}");
    // In a command of its own: the connections above may still hold their
    // slots while the server sees them close.
    let script = r#"
import socket
held = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(CAP + 6)]
# Accepted in order: those past the cap are closed at once (end of file),
# while the others wait for their request.
def closed(s):
    try:
        return s.recv(64) == b""
    except OSError:
        return True
print("closed", sum(1 for s in held[CAP:] if closed(s)))
def answered(s):
    s.sendall(b"GET http://127.0.0.1:PORT/ HTTP/1.1\r\nHost: x\r\n\r\n")
    return s.recv(64).startswith(b"HTTP/1.1 200")
print("answered", sum(1 for s in held[:CAP] if answered(s)))
"#
    .replace("PORT", &port.to_string())
    .replace("CAP", &serverfs_egress::MAX_CONNECTIONS.to_string());
    let out = bash(&client, &format!("python3 -c '{script}'")).await;
    let cap = serverfs_egress::MAX_CONNECTIONS;
    assert_eq!(out["stdout"], format!("closed 6\nanswered {cap}\n"), "{out}");
    assert!(
        out["network"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("network: refused a connection (more than")),
        "{out}"
    );
    client.cancel().await.unwrap();
}

/// Bad settings are refused at start with one line naming the setting.
#[test]
fn bad_allowlists_are_refused_at_start() {
    let p = Project::new();
    for (args, says) in [
        (
            vec!["--command-network-allow", "exa mple.org"],
            "entry 1 (`exa mple.org`): not a host name",
        ),
        (vec!["--command-network-allow", ","], "is empty; for no network at all"),
        (
            vec!["--command-network-allow", "crates.io", "--command-network", "off"],
            "cannot be combined with SERVERFS_COMMAND_NETWORK=off",
        ),
        (vec!["--command-network-allow", "crates.io", "--sandbox", "off"], "needs the sandbox"),
    ] {
        let out = p.command().arg("--stdio").args(&args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("SERVERFS_COMMAND_NETWORK_ALLOW"), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Where the kernel refuses commands a network namespace (here a user
/// namespace whose `max_net_namespaces` is 0), the allowlist refuses to
/// start — commands would otherwise have the host's network — with one
/// line naming the setting (exit 2). Control: `--command-network off`
/// starts there (its namespace is a bonus beside seccomp and Landlock).
#[test]
fn without_a_network_namespace_the_allowlist_refuses_to_start() {
    let p = Project::new();
    let start = |network: &[&str]| {
        let server = p.command();
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["--user", "--map-root-user", "sh", "-c"])
            .arg("echo 0 > /proc/sys/user/max_net_namespaces && exec \"$@\"")
            .arg("sh")
            .arg(server.get_program())
            .args(server.get_args())
            .args(network)
            .arg("--stdio")
            .env("XDG_STATE_HOME", p.xdg())
            .stdin(Stdio::null());
        cmd.output().unwrap()
    };
    let refused = start(&["--command-network-allow", "127.0.0.1:1"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    let line = stderr.lines().last().unwrap();
    assert!(
        line.starts_with("serverfs-dev: config error: SERVERFS_COMMAND_NETWORK_ALLOW")
            && line.contains("commands cannot get a network namespace of their own here"),
        "{stderr}"
    );
    let control = start(&["--command-network", "off"]);
    assert_eq!(control.status.code(), Some(0), "{}", String::from_utf8_lossy(&control.stderr));
}
