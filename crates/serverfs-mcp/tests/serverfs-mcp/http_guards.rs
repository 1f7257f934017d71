//! The HTTP surface as hostile and odd clients see it: Host and Origin
//! checks, body cap, malformed requests, health, the OAuth discovery paths,
//! and the exact request sequence of OpenAI tunnel-client's startup probe.

use crate::common;

use common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "tunnel-client", "version": "v0.0.14"}}})
}

struct Http {
    server: HttpServer,
    client: reqwest::Client,
}

impl Http {
    fn start(extra: &[&str]) -> (Self, Fixture) {
        let fx = Fixture::new();
        let mut args = vec!["--workdir".to_owned(), fx.workdir_arg()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = HttpServer::start(&args);
        (Self { server, client: reqwest::Client::new() }, fx)
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.server.url)
            .header("Accept", ACCEPT)
            .header("Content-Type", "application/json")
            .body(body.to_string())
    }

    async fn healthy_initialize(&self) {
        let r = self.post(&initialize("2025-06-18")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "server stopped serving");
    }
}

#[tokio::test]
async fn tunnel_client_probe_sequence() {
    let (h, _fx) = Http::start(&[]);
    // OAuth discovery: bodiless POST, then GET, then the PRMD paths; never 401
    let r = h.client.post(&h.server.url).header("Accept", "application/json").send().await.unwrap();
    assert!(
        r.status().is_client_error() && r.status() != StatusCode::UNAUTHORIZED,
        "{}",
        r.status()
    );
    assert!(r.headers().get("www-authenticate").is_none());
    let r = h.client.get(&h.server.url).header("Accept", "application/json").send().await.unwrap();
    assert_ne!(r.status(), StatusCode::UNAUTHORIZED);
    let base = h.server.url.trim_end_matches("/mcp");
    for path in
        ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
    {
        let r = h.client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // Go SDK v1.4.1 startup probe: initialize 2025-06-18, initialized, GET, DELETE
    let r = h.post(&initialize("2025-06-18")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("mcp-session-id").is_none(), "stateless: no session");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    let r = h
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .header("Mcp-Protocol-Version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let r = h.client.get(&h.server.url).header("Accept", "text/event-stream").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let r = h.client.delete(&h.server.url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    // a forwarded tools/call with the compose service name as Host
    let r = h
        .post(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "list_workdirs", "arguments": {}}}))
        .header("Host", "serverfs-mcp:8000")
        .header("Mcp-Protocol-Version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["structuredContent"]["workdirs"][0]["alias"], "test");
}

#[tokio::test]
async fn legacy_versions_are_echoed() {
    let (h, _fx) = Http::start(&[]);
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let v: Value = h.post(&initialize(version)).send().await.unwrap().json().await.unwrap();
        assert_eq!(v["result"]["protocolVersion"], version);
        assert!(v["result"]["instructions"].as_str().unwrap().contains("untrusted data"));
    }
}

#[tokio::test]
async fn host_and_origin_checks() {
    let (h, _fx) =
        Http::start(&["--allowed-hosts", "localhost,127.0.0.1,serverfs-mcp,mcp.example.com"]);
    let port = h.server.addr.rsplit(':').next().unwrap().to_owned();
    let status = |r: reqwest::Response| r.status();
    // foreign Host: DNS rebinding. The answer names the setting that
    // admits a name; the log line is one of ours, with plain values.
    let r = h.post(&initialize("2025-06-18")).header("Host", "evil.example").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body = r.text().await.unwrap();
    assert!(
        body.starts_with(
            "403 Forbidden: Host 'evil.example' is not allowed; add it to \
             SERVERFS_ALLOWED_HOSTS (--allowed-hosts)"
        ),
        "{body}"
    );
    let line =
        h.server.log.wait_for(std::time::Duration::from_secs(10), |v| v["event"] == "host_refused");
    assert_eq!(line["host"], "evil.example", "{line}");
    assert_eq!(line["setting"], "SERVERFS_ALLOWED_HOSTS (--allowed-hosts)", "{line}");
    // A listed name on another port passes (an entry without a port
    // matches any); a listed name with a port matches that port only.
    let r = h.post(&initialize("2025-06-18")).header("Host", "LocalHost:1").send().await.unwrap();
    assert_eq!(status(r), StatusCode::OK);
    // foreign Origin
    let r = h
        .post(&initialize("2025-06-18"))
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), StatusCode::FORBIDDEN);
    let r = h.post(&initialize("2025-06-18")).header("Origin", "null").send().await.unwrap();
    assert_eq!(status(r), StatusCode::FORBIDDEN);
    // the server's own origins pass
    for origin in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        "https://mcp.example.com".into(),
    ] {
        let r = h
            .post(&initialize("2025-06-18"))
            .header("Origin", origin.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(status(r), StatusCode::OK, "{origin}");
    }
    let r =
        h.post(&initialize("2025-06-18")).header("Host", "mcp.example.com").send().await.unwrap();
    assert_eq!(status(r), StatusCode::OK);
    h.healthy_initialize().await;
}

#[tokio::test]
async fn malformed_and_oversized_requests_get_4xx_and_service_continues() {
    let (h, _fx) = Http::start(&["--max-body-bytes", "4096"]);
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "stat_file", "arguments": {"workdir": "test", "path": "x".repeat(10_000)}}});
    let r = h.post(&big).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    h.healthy_initialize().await;

    for body in ["{", "[]", "null", "{\"jsonrpc\":\"2.0\"}", "\u{0}\u{1}"] {
        let r = h
            .client
            .post(&h.server.url)
            .header("Accept", ACCEPT)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        // rmcp refuses a body that is not a JSON-RPC message as a whole.
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body:?}");
    }
    let r = h
        .client
        .post(&h.server.url)
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    let r = h
        .client
        .post(&h.server.url)
        .header("Accept", ACCEPT)
        .header("Content-Type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let r = h
        .post(&initialize("2025-06-18"))
        .header("Mcp-Protocol-Version", "1999-01-01")
        .send()
        .await
        .unwrap();
    // A header that contradicts the initialize request is a bad request.
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    h.healthy_initialize().await;
}

#[tokio::test]
async fn health_endpoint_and_unknown_paths() {
    let (h, _fx) = Http::start(&[]);
    let base = h.server.url.trim_end_matches("/mcp");
    let r = h.client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    for path in ["/", "/admin", "/mcp/../etc/passwd", "/files/x"] {
        let r = h.client.get(format!("{base}{path}")).send().await.unwrap();
        assert!(
            r.status() == StatusCode::NOT_FOUND || r.status() == StatusCode::METHOD_NOT_ALLOWED,
            "{path}"
        );
    }
    // Only /mcp itself is the endpoint: nothing under it answers, whatever
    // the method (an OAuth client probing there must see 404).
    for path in ["/mcp/", "/mcp/.well-known/openid-configuration", "/mcp/x/y"] {
        let r = h.client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "GET {path}");
        let r = h
            .client
            .post(format!("{base}{path}"))
            .header("Accept", ACCEPT)
            .header("Content-Type", "application/json")
            .body(initialize("2025-06-18").to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "POST {path}");
    }
}

#[tokio::test]
async fn repeated_origin_or_host_headers_are_refused() {
    let (h, _fx) = Http::start(&[]);
    let port = h.server.addr.rsplit(':').next().unwrap().to_owned();
    let own = format!("http://localhost:{port}");
    // rmcp reads only the first Origin; a second must not slip past it.
    for (first, second) in [(own.as_str(), "https://evil.example"), (own.as_str(), own.as_str())] {
        let r = h
            .post(&initialize("2025-06-18"))
            .header("Origin", first)
            .header("Origin", second)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{first} + {second}");
    }
    let r = h
        .post(&initialize("2025-06-18"))
        .header("Host", "localhost")
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    h.healthy_initialize().await;
}

#[test]
fn healthcheck_subcommand() {
    let fx = Fixture::new();
    let server = HttpServer::start(&["--workdir", &fx.workdir_arg()]);
    let ok = std::process::Command::new(BIN)
        .arg("healthcheck")
        .env("SERVERFS_LISTEN", &server.addr)
        .status()
        .unwrap();
    assert!(ok.success());
    drop(server);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap().to_string();
    drop(listener);
    let down = std::process::Command::new(BIN)
        .args(["healthcheck"])
        .env("SERVERFS_LISTEN", dead)
        .status()
        .unwrap();
    assert_eq!(down.code(), Some(1));
}
