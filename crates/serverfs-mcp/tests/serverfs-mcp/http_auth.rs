//! The optional bearer token on `/mcp`: refused without it (missing, wrong,
//! another scheme) in both protocol eras, accepted with it from the
//! environment or a file; `/healthz` and the 404s stay open; the 401 never
//! invites an OAuth flow; stdio ignores it.

use crate::common;

use common::*;
use reqwest::StatusCode;
use rmcp::ServiceExt;
use serde_json::json;

const TOKEN: &str = "t0ken-for-tests_0123456789abcdef";

fn start(fx: &Fixture, env: &[(&str, &str)], extra: &[&str]) -> HttpServer {
    let workdir = fx.workdir_arg();
    let mut args = vec!["--workdir", &workdir];
    args.extend_from_slice(extra);
    HttpServer::start_with_env(&args, env)
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
}

async fn post(url: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(initialize());
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn token_is_required_on_mcp_in_both_eras() {
    let fx = Fixture::new();
    let server = start(&fx, &[("SERVERFS_TOKEN", TOKEN)], &[]);
    for (era, lifecycle) in lifecycles() {
        let refused = try_http_client(&server.url, lifecycle.clone(), None).await;
        assert!(refused.is_err(), "{era}: served without a token");
        let refused = try_http_client(&server.url, lifecycle.clone(), Some("wrong")).await;
        assert!(refused.is_err(), "{era}: served with a wrong token");
        let client = try_http_client(&server.url, lifecycle, Some(TOKEN)).await.unwrap();
        let (err, v) = call(&client, "list_workdirs", json!({})).await;
        assert!(!err, "{era}: {v}");
        assert_eq!(v["workdirs"][0]["alias"], "test");
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn refusals_are_plain_401_without_an_oauth_challenge() {
    let fx = Fixture::new();
    let server = start(&fx, &[("SERVERFS_TOKEN", TOKEN)], &[]);
    let basic = format!("Basic {TOKEN}");
    let almost = format!("Bearer {TOKEN}x");
    for authorization in [None, Some("Bearer wrong"), Some(almost.as_str()), Some(basic.as_str())] {
        let r = post(&server.url, authorization).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{authorization:?}");
        // tunnel-client would switch to OAuth on `resource_metadata`.
        assert!(r.headers().get("www-authenticate").is_none(), "{authorization:?}");
        let body = r.text().await.unwrap();
        assert_eq!(body, "401 Unauthorized: missing or invalid bearer token\n");
    }
    // Each 401 is logged with its reason, never with what was presented.
    let refused = |reason: &'static str| {
        move |v: &serde_json::Value| v["event"] == "auth_refused" && v["reason"] == reason
    };
    let timeout = std::time::Duration::from_secs(20);
    server.log.wait_for(timeout, refused("no Authorization header"));
    server.log.wait_for(timeout, refused("invalid bearer credentials"));
    for line in server.log.lines() {
        assert!(!line.to_string().contains("wrong") && !line.to_string().contains(TOKEN), "{line}");
    }
    let r = post(&server.url, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = post(&server.url, Some(&format!("bearer {TOKEN}"))).await;
    assert_eq!(r.status(), StatusCode::OK, "the scheme is case-insensitive");

    // /healthz stays open; the discovery paths stay 404, not 401.
    let base = server.url.trim_end_matches("/mcp");
    let client = reqwest::Client::new();
    let r = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/mcp/.well-known/oauth-protected-resource",
    ] {
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn token_file_with_trailing_newline() {
    let fx = Fixture::new();
    let file = fx.dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let path = file.to_string_lossy().into_owned();
    let server = start(&fx, &[], &["--token-file", &path]);
    assert_eq!(post(&server.url, None).await.status(), StatusCode::UNAUTHORIZED);
    let r = post(&server.url, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = post(&server.url, Some(&format!("Bearer {TOKEN}\u{20}x"))).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn stdio_needs_no_token() {
    let fx = Fixture::new();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--stdio", "--workdir", &fx.workdir_arg()]).env("SERVERFS_TOKEN", TOKEN);
    let transport = serverfs_test_support::stdio_transport(cmd);
    let client: Client = rmcp::model::ClientConfig::default().serve(transport).await.unwrap();
    let (err, v) = call(&client, "list_workdirs", json!({})).await;
    assert!(!err, "{v}");
    client.cancel().await.unwrap();
}
