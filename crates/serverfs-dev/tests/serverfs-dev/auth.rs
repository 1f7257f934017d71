//! serverfs-dev's HTTP authentication end to end: the real binary with a
//! bearer token, and with Cloudflare Access against a JWKS server on
//! loopback (the auth crate's fixtures and test keys); shell sessions
//! belong to the Access user who opened them.

use crate::access;
use crate::common;

use std::process::Stdio;

use common::{HttpServer, Project};
use serde_json::{Value, json};

/// A stateless tools/call with `headers`: (HTTP status, JSON-RPC answer).
async fn call(url: &str, headers: &[(&str, &str)], tool: &str, args: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-06-18");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

const TOKEN: &str = "tok-0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn the_token_is_required_over_http_and_not_over_stdio() {
    let p = Project::new();
    let mut cmd = p.command();
    cmd.env("SERVERFS_TOKEN", TOKEN);
    let server = HttpServer::start_with(cmd);
    let args = json!({"path": "src/lib.rs"});
    let bearer = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}x");
    let basic = format!("Basic {TOKEN}");
    for headers in
        [vec![], vec![("Authorization", wrong.as_str())], vec![("Authorization", basic.as_str())]]
    {
        let (status, body) = call(&server.url, &headers, "read_file", args.clone()).await;
        assert_eq!(status, 401, "{headers:?}: {body}");
        assert_eq!(body, "401 Unauthorized: missing or invalid credentials\n");
    }
    let (status, body) = call(&server.url, &[("Authorization", &bearer)], "read_file", args).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["total_lines"], 3, "{body}");
    // A token in the environment changes nothing for stdio. (One server
    // per root and state directory: the writer holds a lock.)
    drop(server);
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.arg("--stdio").env("SERVERFS_TOKEN", TOKEN).stderr(Stdio::null());
    let client = common::serve(cmd).await;
    common::ok(&client, "read_file", json!({"path": "src/lib.rs"})).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn access_users_own_their_sessions() {
    let jwks = access::JwksServer::start(
        access::jwks(vec![access::jwk(access::KEY_A, "a")]),
        std::time::Duration::ZERO,
    )
    .await;
    let p = Project::new();
    let mut cmd = p.command();
    cmd.env("SERVERFS_ACCESS_TEAM", access::TEAM)
        .env("SERVERFS_ACCESS_AUD", access::AUD)
        .env("SERVERFS_ACCESS_CERTS_URL", &jwks.url);
    let server = HttpServer::start_with(cmd);
    let token_for = |email: &str| {
        let mut claims = access::claims();
        claims["email"] = json!(email);
        access::sign(access::KEY_A, "a", &claims)
    };
    let (alice, bob) = (token_for("alice@example.com"), token_for("bob@example.com"));
    let as_alice = [(serverfs_auth::ACCESS_JWT_HEADER, alice.as_str())];
    let as_bob = [(serverfs_auth::ACCESS_JWT_HEADER, bob.as_str())];

    let (status, _) = call(&server.url, &[], "shell_list", json!({})).await;
    assert_eq!(status, 401);
    let expired = {
        let mut claims = access::claims();
        claims["exp"] = json!(access::now() - 120);
        access::sign(access::KEY_A, "a", &claims)
    };
    let (status, _) =
        call(&server.url, &[(serverfs_auth::ACCESS_JWT_HEADER, &expired)], "shell_list", json!({}))
            .await;
    assert_eq!(status, 401);

    let (status, opened) = call(&server.url, &as_alice, "shell_open", json!({})).await;
    assert_eq!(status, 200, "{opened}");
    let id = opened["result"]["structuredContent"]["session_id"].as_str().unwrap().to_owned();
    let (_, listed) = call(&server.url, &as_alice, "shell_list", json!({})).await;
    assert_eq!(listed["result"]["structuredContent"]["sessions"][0]["session_id"], id.as_str());
    let (_, listed) = call(&server.url, &as_bob, "shell_list", json!({})).await;
    assert_eq!(listed["result"]["structuredContent"]["sessions"], json!([]));
    for (tool, args) in [
        ("shell_write", json!({"session_id": id, "input": "echo hi\n"})),
        ("shell_read", json!({"session_id": id})),
        ("shell_close", json!({"session_id": id})),
    ] {
        let (status, answer) = call(&server.url, &as_bob, tool, args).await;
        assert_eq!(status, 200);
        assert_eq!(
            answer["result"]["isError"], true,
            "bob could use alice's session: {tool} {answer}"
        );
    }
    let (_, closed) = call(&server.url, &as_alice, "shell_close", json!({"session_id": id})).await;
    assert_eq!(closed["result"]["isError"], false, "{closed}");
    // A bash command that yielded is alice's session too.
    let args = json!({"command": "sleep 60", "yield_after_seconds": 1});
    let (_, ran) = call(&server.url, &as_alice, "bash", args).await;
    let id = ran["result"]["structuredContent"]["session_id"].as_str().unwrap().to_owned();
    for tool in ["shell_read", "shell_close"] {
        let (_, answer) = call(&server.url, &as_bob, tool, json!({"session_id": id})).await;
        assert_eq!(answer["result"]["isError"], true, "bob reached alice's command: {answer}");
    }
    let (_, closed) = call(&server.url, &as_alice, "shell_close", json!({"session_id": id})).await;
    assert_eq!(closed["result"]["isError"], false, "{closed}");
    assert!(jwks.fetches() >= 1);
}

/// The text of a tool answer that must be an error.
fn error_of(answer: &Value) -> String {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

const ALICE: &str = "tok-alice-0123456789abcdef";
const BOB: &str = "tok-bob-0123456789abcdef";

/// Named tokens (SERVERFS_TOKENS_FILE): each holder is its own owner with
/// its own quota of shell sessions, cannot reach another's, and is named
/// in every audit line (each command tool's, a session's end, a yielded
/// command's end); unknown tokens are refused as before.
#[tokio::test(flavor = "multi_thread")]
async fn each_named_token_has_its_own_sessions_and_quota() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let file = p.dir.path().join("tokens");
    std::fs::write(&file, format!("# one line per agent\nalice:{ALICE}\n\n bob : {BOB}\n"))
        .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = p.command();
    cmd.env("SERVERFS_TOKENS_FILE", &file);
    let serverfs_test_support::Listening { mut child, addr, log, .. } =
        serverfs_test_support::listen(cmd, std::time::Duration::from_secs(30));
    let (lines, audit) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in log.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = lines.send(v);
            }
        }
    });
    let url = format!("http://{addr}/mcp");
    let (alice, bob) = (format!("Bearer {ALICE}"), format!("Bearer {BOB}"));
    let as_alice = [("Authorization", alice.as_str())];
    let as_bob = [("Authorization", bob.as_str())];

    // Neither a made-up token, nor a name, nor a whole line is a token.
    for bad in
        ["Bearer tok-carol-0123456789abcdef", "Bearer alice", &format!("Bearer alice:{ALICE}")]
    {
        let (status, _) = call(&url, &[("Authorization", bad)], "shell_list", json!({})).await;
        assert_eq!(status, 401, "{bad}");
    }

    // Alice takes every session an owner may have (8); the next is busy.
    let mut ids = Vec::new();
    for _ in 0..8 {
        let (status, opened) = call(&url, &as_alice, "shell_open", json!({})).await;
        assert_eq!(status, 200, "{opened}");
        let id = opened["result"]["structuredContent"]["session_id"].as_str();
        ids.push(id.unwrap_or_else(|| panic!("{opened}")).to_owned());
    }
    let (_, busy) = call(&url, &as_alice, "shell_open", json!({})).await;
    assert!(error_of(&busy).starts_with("SERVER_BUSY"), "{busy}");

    // Bob still gets one; he sees only his own and cannot touch hers: the
    // same answer as for an id that does not exist.
    let (status, opened) = call(&url, &as_bob, "shell_open", json!({})).await;
    assert_eq!(status, 200, "{opened}");
    let bobs = opened["result"]["structuredContent"]["session_id"].as_str().unwrap().to_owned();
    let (_, listed) = call(&url, &as_bob, "shell_list", json!({})).await;
    let listed = &listed["result"]["structuredContent"]["sessions"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["session_id"], bobs.as_str());
    let (_, listed) = call(&url, &as_alice, "shell_list", json!({})).await;
    let listed = &listed["result"]["structuredContent"]["sessions"];
    assert_eq!(listed.as_array().map(Vec::len), Some(8), "{listed}");
    let made_up = "0123456789abcdef0123456789abcdef";
    for (tool, extra) in [
        ("shell_write", json!({"input": "echo hi\n"})),
        ("shell_read", json!({})),
        ("shell_close", json!({})),
    ] {
        let args = |id: &str| {
            let mut args = extra.clone();
            args["session_id"] = json!(id);
            args
        };
        let (_, wrong_id) = call(&url, &as_bob, tool, args(made_up)).await;
        let (_, hers) = call(&url, &as_bob, tool, args(&ids[0])).await;
        assert_eq!(error_of(&hers), error_of(&wrong_id), "bob reached alice's session: {tool}");
    }

    // Her sessions are intact: closing them works, and frees her quota.
    for id in &ids {
        let (_, closed) = call(&url, &as_alice, "shell_close", json!({"session_id": id})).await;
        assert_eq!(closed["result"]["isError"], false, "{closed}");
    }
    let (_, closed) = call(&url, &as_bob, "shell_close", json!({"session_id": bobs})).await;
    assert_eq!(closed["result"]["isError"], false, "{closed}");

    // The audit line names the token's holder.
    let (_, ran) = call(&url, &as_bob, "bash", json!({"command": "true"})).await;
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let line = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let v = audit.recv_timeout(left).expect("an audit line for bash");
        if v["event"] == "command" && v["tool"] == "bash" {
            break v;
        }
    };
    assert_eq!(line["principal"], "token:bob", "{line}");

    // Every shell tool's call has its line, naming the holder and the
    // session (the first 8 hex digits of its id), and so has the end of a
    // session and of a command that yielded (with its exit code).
    let (_, opened) = call(&url, &as_bob, "shell_open", json!({})).await;
    let shell = opened["result"]["structuredContent"]["session_id"].as_str().unwrap().to_owned();
    let on = |args: Value| {
        let mut args = args;
        args["session_id"] = json!(shell);
        args
    };
    call(&url, &as_bob, "shell_write", on(json!({"input": "exit 3\n"}))).await;
    loop {
        let (_, read) = call(&url, &as_bob, "shell_read", on(json!({"wait_ms": 2000}))).await;
        if read["result"]["structuredContent"]["exited"] == true {
            break;
        }
    }
    call(&url, &as_bob, "shell_close", on(json!({}))).await;
    let gate = p.path("gate");
    let command = "while [ ! -e gate ]; do sleep 0.05; done; exit 4";
    let args = json!({"command": command, "yield_after_seconds": 1, "timeout_seconds": 600});
    let (_, yielded) = call(&url, &as_bob, "bash", args).await;
    let yielded = &yielded["result"]["structuredContent"];
    assert_eq!(yielded["running"], true, "{yielded}");
    let command_session = yielded["session_id"].as_str().unwrap().to_owned();
    std::fs::write(&gate, "").unwrap();

    let short = |id: &str| id[..8].to_owned();
    let mut expected: Vec<(&str, &str, String, &str)> = vec![
        ("command", "shell_open", short(&shell), "opened"),
        ("command", "shell_write", short(&shell), "written"),
        ("command", "shell_read", short(&shell), "exited: exit 3"),
        ("session_ended", "shell", short(&shell), "exit 3"),
        ("command", "shell_close", short(&shell), "closed: exit 3"),
        ("command", "bash", short(&command_session), "running"),
        ("session_ended", "bash", short(&command_session), "exit 4"),
    ];
    while !expected.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let v = audit.recv_timeout(left).unwrap_or_else(|_| panic!("missing: {expected:?}"));
        expected.retain(|(event, what, session, status)| {
            let kind = if *event == "command" { &v["tool"] } else { &v["kind"] };
            !(v["event"] == *event
                && kind == what
                && v["session"] == session.as_str()
                && v["principal"] == "token:bob"
                && v["status"].as_str().is_some_and(|s| s.ends_with(status)))
        });
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A tokens file with a bad line stops the server at start-up: exit 2 and
/// one line naming the setting and the line, never a token or the path.
#[test]
fn a_bad_tokens_file_is_a_start_up_error_naming_the_line() {
    let p = Project::new();
    let file = p.dir.path().join("tokens");
    for (text, line) in [
        (format!("alice:{ALICE}\nbob {BOB}\n"), "line 2: expected NAME:TOKEN"),
        (format!("alice:{ALICE}\n# x\nbob:{ALICE}\n"), "line 3: the same token as line 1"),
        (format!("alice:{ALICE}\nalice:{BOB}\n"), "line 2: the name 'alice' is also on line 1"),
        (format!("al ice:{ALICE}\n"), "line 1: the name"),
        (format!("bob:{BOB},x\n"), "line 1: the token may only contain"),
    ] {
        std::fs::write(&file, &text).unwrap();
        let out = p
            .command()
            .arg("--stdio")
            .env("SERVERFS_TOKENS_FILE", &file)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(&format!("SERVERFS_TOKENS_FILE (--tokens-file): {line}")),
            "{stderr}"
        );
        assert!(!stderr.contains(ALICE) && !stderr.contains(BOB), "a token was echoed: {stderr}");
        assert!(!stderr.contains(&*file.to_string_lossy()), "the path was echoed: {stderr}");
    }
    // Named tokens are one source: not beside SERVERFS_TOKEN.
    std::fs::write(&file, format!("alice:{ALICE}\n")).unwrap();
    let out = p
        .command()
        .arg("--stdio")
        .env("SERVERFS_TOKENS_FILE", &file)
        .env("SERVERFS_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is set too; use one") && !stderr.contains(TOKEN), "{stderr}");
}

/// Without a configured credential the local token's holder is one
/// principal, `token:local`: shell_list shows the session it opened, and
/// a request without the token (or with another) is refused, 401.
#[tokio::test]
async fn the_local_token_is_one_principal_that_lists_its_sessions() {
    let p = Project::new();
    let server = HttpServer::start_with(p.command());
    let token = server.local_token.clone().expect("a local token");
    let bare = format!("http://{}/mcp", server.addr);
    let (status, _) = call(&bare, &[], "shell_list", json!({})).await;
    assert_eq!(status, 401);
    let wrong = format!("{bare}?token={}", "0".repeat(64));
    assert_eq!(call(&wrong, &[], "shell_list", json!({})).await.0, 401);
    let header = format!("Bearer {token}");
    let (status, opened) =
        call(&bare, &[("authorization", header.as_str())], "shell_open", json!({})).await;
    assert_eq!(status, 200, "{opened}");
    let id = opened["result"]["structuredContent"]["session_id"].as_str().unwrap().to_owned();
    let (_, listed) = call(&server.url, &[], "shell_list", json!({})).await;
    let sessions = &listed["result"]["structuredContent"]["sessions"];
    assert_eq!(sessions[0]["session_id"], id.as_str(), "{listed}");
    let (_, closed) = call(&server.url, &[], "shell_close", json!({"session_id": id})).await;
    assert!(
        closed["result"]["isError"].is_null() || closed["result"]["isError"] == false,
        "{closed}"
    );
}
