//! serverfs-dev's HTTP authentication end to end: the real binary with a
//! bearer token, and with Cloudflare Access against a JWKS server on
//! loopback (the auth crate's fixtures and test keys); shell sessions
//! belong to the Access user who opened them.

#[path = "../../auth/tests/support/mod.rs"]
mod access;
mod common;

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
    }
    let (status, body) = call(&server.url, &[("Authorization", &bearer)], "read_file", args).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["total_lines"], 3, "{body}");
    // A token in the environment changes nothing for stdio. (One server
    // per root and state directory: the writer holds a lock.)
    drop(server);
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.arg("--stdio").env("SERVERFS_TOKEN", TOKEN).stderr(Stdio::null());
    let client = rmcp::service::serve_client_with_lifecycle(
        rmcp::model::ClientConfig::default(),
        rmcp::transport::TokioChildProcess::new(cmd).unwrap(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await
    .unwrap();
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
