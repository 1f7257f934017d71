//! `serverfs-probe`: the MCP client that `tests/docker/smoke.sh` runs inside
//! the Compose network, in place of OpenAI's tunnel-client (which cannot be
//! pulled on machines without a container registry).
//!
//! It is a test tool, not part of the product: it is never copied into the
//! `serverfs-mcp` image, and `serverfs-mcp`'s dependency graph does not
//! contain it.
//!
//! ```text
//! serverfs-probe check URL [ALIAS]   run the MCP checks against URL (…/mcp)
//! serverfs-probe write-test PATH...  try to create a file in each PATH; pass iff every write fails
//! serverfs-probe idle                sleep until SIGTERM/SIGINT (keeps the service up)
//! ```
//!
//! `check` sends the bearer token that `MCP_EXTRA_HEADERS` names the way
//! compose.yml sets it for tunnel-client (`Authorization: file:/path`, the
//! file holding `Bearer <token>`), and checks that `/mcp` refuses requests
//! without it.
//!
//! `check` prints one line per check (`ok - …` / `FAIL - …`), then
//! `probe: N passed, M failed`, and exits 1 if anything failed.
#![allow(clippy::print_stdout)]

use std::{borrow::Cow, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result, anyhow, bail};
use rmcp::{
    RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, ReadResourceRequestParams},
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

const EXPECTED_TOOLS: [&str; 6] =
    ["find_files", "list_directory", "list_workdirs", "read_text_file", "search_text", "stat_file"];
const TIMEOUT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            println!("probe: cannot start runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match args.first().map(String::as_str) {
        Some("check") if args.len() >= 2 => {
            let alias = args.get(2).cloned().unwrap_or_else(|| "test".to_owned());
            runtime.block_on(check(&args[1], &alias))
        }
        Some("write-test") if args.len() >= 2 => write_test(&args[1..]),
        Some("idle") => runtime.block_on(idle()),
        _ => {
            println!("usage: serverfs-probe check URL [ALIAS] | write-test PATH... | idle");
            ExitCode::from(2)
        }
    }
}

async fn idle() -> ExitCode {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return ExitCode::from(2);
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    ExitCode::SUCCESS
}

/// Tries to create a file in every given directory. The check passes only if
/// every attempt fails (read-only mount, or no permission).
fn write_test(dirs: &[String]) -> ExitCode {
    let mut failed = 0;
    for dir in dirs {
        let path = format!("{}/serverfs-write-test", dir.trim_end_matches('/'));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => {
                let _ = std::fs::remove_file(&path);
                println!("FAIL - write to {dir} succeeded");
                failed += 1;
            }
            Err(e) => println!("ok - write to {dir} refused ({e})"),
        }
    }
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

struct Report {
    passed: usize,
    failed: usize,
}

impl Report {
    fn record(&mut self, name: &str, outcome: Result<String>) {
        match outcome {
            Ok(detail) if detail.is_empty() => {
                self.passed += 1;
                println!("ok - {name}");
            }
            Ok(detail) => {
                self.passed += 1;
                println!("ok - {name}: {detail}");
            }
            Err(e) => {
                self.failed += 1;
                println!("FAIL - {name}: {e:#}");
            }
        }
    }
}

async fn check(url: &str, alias: &str) -> ExitCode {
    let mut report = Report { passed: 0, failed: 0 };
    let base = url.trim_end_matches('/').trim_end_matches("/mcp").to_owned();
    let token = match bearer_token() {
        Ok(token) => token,
        Err(e) => {
            println!("FAIL - bearer token from MCP_EXTRA_HEADERS: {e:#}");
            return ExitCode::from(1);
        }
    };
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = &token {
        match reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")) {
            Ok(value) => headers.insert(reqwest::header::AUTHORIZATION, value),
            Err(e) => {
                println!("FAIL - bearer token: {e}");
                return ExitCode::from(1);
            }
        };
    }
    let (http, anonymous) = match (
        reqwest::Client::builder().timeout(TIMEOUT).default_headers(headers).build(),
        reqwest::Client::builder().timeout(TIMEOUT).build(),
    ) {
        (Ok(c), Ok(a)) => (c, a),
        (Err(e), _) | (_, Err(e)) => {
            println!("FAIL - http client: {e}");
            return ExitCode::from(1);
        }
    };
    if token.is_some() {
        report.record(
            "without the bearer token, /mcp is 401 with no WWW-Authenticate (no OAuth)",
            async {
                let r =
                    anonymous.post(url).header("content-type", "application/json").send().await?;
                ensure_eq(r.status().as_u16(), 401, "status")?;
                if r.headers().contains_key("www-authenticate") {
                    bail!("WWW-Authenticate present");
                }
                Ok(String::new())
            }
            .await,
        );
    }

    // --- Plain HTTP: what tunnel-client does before it relays anything. ---
    report.record(
        "GET /healthz is 200",
        async {
            let status = http.get(format!("{base}/healthz")).send().await?.status();
            ensure_eq(status.as_u16(), 200, "status")
        }
        .await,
    );
    for path in
        ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
    {
        report.record(
            &format!("GET {path} is 404 (no OAuth; tunnel-client discovery stays optional)"),
            async {
                let status = http.get(format!("{base}{path}")).send().await?.status();
                ensure_eq(status.as_u16(), 404, "status")
            }
            .await,
        );
    }
    report.record(
        "initialize with protocolVersion 2025-06-18 (tunnel-client's startup probe) is accepted",
        raw_initialize(&http, url, None).await.and_then(|(status, body)| {
            ensure_eq(status, 200, "status")?;
            let v = first_json(&body)?;
            let version = v.pointer("/result/protocolVersion").and_then(Value::as_str);
            if version == Some("2025-06-18") {
                Ok(String::new())
            } else {
                bail!("protocolVersion in reply: {version:?}; body: {}", clip(&body))
            }
        }),
    );
    report.record(
        "a foreign Host header is rejected (DNS-rebinding defence)",
        raw_initialize(&http, url, Some(("host", "evil.example:8000"))).await.and_then(
            |(status, body)| {
                if (400..500).contains(&status) {
                    Ok(format!("HTTP {status}"))
                } else {
                    bail!("HTTP {status}: {}", clip(&body))
                }
            },
        ),
    );
    report.record(
        "a foreign Origin header is rejected (DNS-rebinding defence)",
        raw_initialize(&http, url, Some(("origin", "http://evil.example"))).await.and_then(
            |(status, body)| {
                if (400..500).contains(&status) {
                    Ok(format!("HTTP {status}"))
                } else {
                    bail!("HTTP {status}: {}", clip(&body))
                }
            },
        ),
    );

    // --- A real MCP client (rmcp) over Streamable HTTP. ---
    let client = match tokio::time::timeout(
        TIMEOUT,
        ().serve(StreamableHttpClientTransport::from_config(match &token {
            Some(token) => StreamableHttpClientTransportConfig::with_uri(url.to_owned())
                .auth_header(token.clone()),
            None => StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
        })),
    )
    .await
    {
        Ok(Ok(client)) => {
            report.record("MCP handshake over Streamable HTTP", Ok(String::new()));
            client
        }
        Ok(Err(e)) => {
            report.record("MCP handshake over Streamable HTTP", Err(anyhow!("{e}")));
            return finish(&report);
        }
        Err(_) => {
            report.record("MCP handshake over Streamable HTTP", Err(anyhow!("timed out")));
            return finish(&report);
        }
    };
    mcp_checks(&client, alias, &mut report).await;
    let _ = client.cancel().await;
    finish(&report)
}

fn finish(report: &Report) -> ExitCode {
    println!("probe: {} passed, {} failed", report.passed, report.failed);
    if report.failed == 0 && report.passed > 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

async fn mcp_checks(client: &RunningService<RoleClient, ()>, alias: &str, report: &mut Report) {
    report.record(
        "tools/list is exactly the six read-only tools, readOnlyHint=true, openWorldHint=false",
        async {
            let tools = tokio::time::timeout(TIMEOUT, client.list_all_tools()).await??;
            let tools = serde_json::to_value(&tools)?;
            let list = tools.as_array().context("tools is not an array")?;
            let mut names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
            names.sort_unstable();
            if names != EXPECTED_TOOLS {
                bail!("tools: {names:?}");
            }
            for t in list {
                let ann = &t["annotations"];
                if ann["readOnlyHint"] != json!(true) || ann["openWorldHint"] != json!(false) {
                    bail!("{} annotations: {ann}", t["name"]);
                }
            }
            Ok(names.join(","))
        }
        .await,
    );

    report.record(
        "resources/templates/list offers serverfs://{workdir}/{path}",
        async {
            let templates =
                tokio::time::timeout(TIMEOUT, client.list_all_resource_templates()).await??;
            let text = serde_json::to_string(&templates)?;
            if text.contains("serverfs://{workdir}/{path}") {
                Ok(String::new())
            } else {
                bail!("{}", clip(&text))
            }
        }
        .await,
    );

    report.record(
        "list_workdirs shows the alias and description, and no container path",
        async {
            let v = call_ok(client, "list_workdirs", json!({})).await?;
            let text = v.to_string();
            let found = v["workdirs"]
                .as_array()
                .context("no workdirs array")?
                .iter()
                .any(|w| w["alias"] == json!(alias) && w["description"].is_string());
            if !found {
                bail!("{alias} missing: {}", clip(&text));
            }
            if text.contains("/workdirs") {
                bail!("container path leaked: {}", clip(&text));
            }
            Ok(text)
        }
        .await,
    );

    report.record(
        "list_directory lists the root; hidden and denied entries are left out",
        async {
            let v =
                call_ok(client, "list_directory", json!({"workdir": alias, "path": ""})).await?;
            let names: Vec<&str> = v["entries"]
                .as_array()
                .context("no entries")?
                .iter()
                .filter_map(|e| e["name"].as_str())
                .collect();
            for want in ["README.md", "project"] {
                if !names.contains(&want) {
                    bail!("{want} missing from {names:?}");
                }
            }
            for hidden in [".hidden", "secret.env"] {
                if names.contains(&hidden) {
                    bail!("{hidden} listed: {names:?}");
                }
            }
            Ok(format!("{names:?}"))
        }
        .await,
    );

    report.record(
        "find_files *compose*.yml finds project/docker-compose.yml",
        async {
            let v = call_ok(
                client,
                "find_files",
                json!({"workdir": alias, "pattern": "*compose*.yml"}),
            )
            .await?;
            let paths: Vec<&str> = v["matches"]
                .as_array()
                .context("no matches")?
                .iter()
                .filter_map(|m| m["path"].as_str())
                .collect();
            if paths == ["project/docker-compose.yml"] {
                Ok(format!("{paths:?}"))
            } else {
                bail!("{paths:?}")
            }
        }
        .await,
    );

    report.record(
        "search_text DATABASE_URL finds project/main.py and not secret.env",
        async {
            let v =
                call_ok(client, "search_text", json!({"workdir": alias, "query": "DATABASE_URL"}))
                    .await?;
            let hits: Vec<String> = v["matches"]
                .as_array()
                .context("no matches")?
                .iter()
                .map(|m| format!("{}:{}", m["path"].as_str().unwrap_or("?"), m["line"]))
                .collect();
            if hits.iter().any(|h| h.starts_with("project/main.py:"))
                && !hits.iter().any(|h| h.contains("secret"))
            {
                Ok(format!("{hits:?}"))
            } else {
                bail!("{hits:?}")
            }
        }
        .await,
    );

    report.record(
        "read_text_file README.md returns its text",
        async {
            let v =
                call_ok(client, "read_text_file", json!({"workdir": alias, "path": "README.md"}))
                    .await?;
            let content = v["content"].as_str().context("no content")?;
            if content.starts_with("# ServerFS smoke fixture") {
                Ok(format!("{} bytes", content.len()))
            } else {
                bail!("{}", clip(content))
            }
        }
        .await,
    );

    report.record(
        "stat_file project/main.py is a file with a size",
        async {
            let v =
                call_ok(client, "stat_file", json!({"workdir": alias, "path": "project/main.py"}))
                    .await?;
            if v["type"] == json!("file") && v["size"].as_u64().is_some_and(|s| s > 0) {
                Ok(v.to_string())
            } else {
                bail!("{v}")
            }
        }
        .await,
    );

    report.record(
        "resources/read serverfs://ALIAS/README.md returns its text",
        async {
            let uri = format!("serverfs://{alias}/README.md");
            let r = tokio::time::timeout(
                TIMEOUT,
                client.read_resource(ReadResourceRequestParams::new(uri)),
            )
            .await??;
            let text = serde_json::to_string(&r)?;
            if text.contains("ServerFS smoke fixture") {
                Ok(String::new())
            } else {
                bail!("{}", clip(&text))
            }
        }
        .await,
    );

    // --- Escapes and policy: every one must be a tool error with the right code. ---
    let denials: [(&str, Value, &str); 10] = [
        (
            "read ../../etc/passwd",
            json!({"workdir": alias, "path": "../../etc/passwd"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        (
            "read project/../../../etc/passwd",
            json!({"workdir": alias, "path": "project/../../../etc/passwd"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        (
            "read absolute /etc/passwd",
            json!({"workdir": alias, "path": "/etc/passwd"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        ("read .hidden", json!({"workdir": alias, "path": ".hidden"}), "HIDDEN_PATH_NOT_ALLOWED"),
        ("read secret.env", json!({"workdir": alias, "path": "secret.env"}), "DENIED_PATH"),
        ("read project/.env", json!({"workdir": alias, "path": "project/.env"}), "DENIED_PATH"),
        (
            "read etc-link/passwd (symlink to /etc)",
            json!({"workdir": alias, "path": "etc-link/passwd"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "read passwd-link (symlink to /etc/passwd)",
            json!({"workdir": alias, "path": "passwd-link"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "read proc-link/self/environ (symlink to /proc)",
            json!({"workdir": alias, "path": "proc-link/self/environ"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "read in an unknown workdir",
            json!({"workdir": "nope", "path": "README.md"}),
            "WORKDIR_NOT_FOUND",
        ),
    ];
    for (name, args, code) in denials {
        report.record(
            &format!("{name} fails with {code}"),
            call_err(client, "read_text_file", args, code).await,
        );
    }
    report.record(
        "list_directory etc-link (symlink to /etc) fails with SYMLINK_NOT_ALLOWED",
        call_err(
            client,
            "list_directory",
            json!({"workdir": alias, "path": "etc-link"}),
            "SYMLINK_NOT_ALLOWED",
        )
        .await,
    );
    report.record(
        "search_text under etc-link fails with SYMLINK_NOT_ALLOWED",
        call_err(
            client,
            "search_text",
            json!({"workdir": alias, "path": "etc-link", "query": "root"}),
            "SYMLINK_NOT_ALLOWED",
        )
        .await,
    );
    report.record(
        "stat_file ../ fails with PATH_OUTSIDE_WORKDIR",
        call_err(
            client,
            "stat_file",
            json!({"workdir": alias, "path": ".."}),
            "PATH_OUTSIDE_WORKDIR",
        )
        .await,
    );
    report.record(
        "search_text root:x finds nothing (nothing outside the workdir is searched)",
        async {
            let v =
                call_ok(client, "search_text", json!({"workdir": alias, "query": "root:x:0:0"}))
                    .await?;
            ensure_eq(v["returned"].as_u64().unwrap_or(u64::MAX), 0, "returned")
        }
        .await,
    );
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Result<Value> {
    let Value::Object(args) = args else { bail!("arguments must be an object") };
    let params = CallToolRequestParams::new(Cow::Borrowed(tool)).with_arguments(args);
    let result = tokio::time::timeout(TIMEOUT, client.call_tool(params)).await??;
    Ok(serde_json::to_value(&result)?)
}

/// Calls a tool that must succeed; returns its structured content (or the
/// JSON in its first text content).
async fn call_ok(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Result<Value> {
    let r = call(client, tool, args).await?;
    if r["isError"] == json!(true) {
        bail!("tool error: {}", text_of(&r));
    }
    if let Some(v) = r.get("structuredContent").filter(|v| v.is_object()) {
        return Ok(v.clone());
    }
    serde_json::from_str(&text_of(&r))
        .with_context(|| format!("no structured content: {}", clip(&r.to_string())))
}

/// Calls a tool that must fail with `code` (text `CODE: message`), and checks
/// the message leaks no container path.
async fn call_err(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
    code: &str,
) -> Result<String> {
    let r = call(client, tool, args).await?;
    let text = text_of(&r);
    if r["isError"] != json!(true) {
        bail!("not an error: {}", clip(&r.to_string()));
    }
    if !text.starts_with(&format!("{code}: ")) {
        bail!("got {}", clip(&text));
    }
    if text.contains("/workdirs") || text.contains("root:x") {
        bail!("leaks: {}", clip(&text));
    }
    Ok(text)
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The token in `MCP_EXTRA_HEADERS` (`Authorization: file:/path` or a
/// literal `Authorization: Bearer …`); `None` when no Authorization is set.
fn bearer_token() -> Result<Option<String>> {
    let Ok(headers) = std::env::var("MCP_EXTRA_HEADERS") else {
        return Ok(None);
    };
    let Some(value) = headers.split(',').find_map(|h| {
        let (name, value) = h.split_once(':')?;
        name.trim().eq_ignore_ascii_case("authorization").then(|| value.trim().to_owned())
    }) else {
        return Ok(None);
    };
    let value = match value.strip_prefix("file:") {
        Some(path) => std::fs::read_to_string(path).context("reading the Authorization file")?,
        None => value,
    };
    match value.trim().strip_prefix("Bearer ") {
        Some(token) => Ok(Some(token.trim().to_owned())),
        None => bail!("the Authorization value is not `Bearer <token>`"),
    }
}

/// POSTs `initialize` as tunnel-client's startup probe does, optionally with
/// one extra header (`host` replaces the one derived from the URL).
async fn raw_initialize(
    http: &reqwest::Client,
    url: &str,
    extra_header: Option<(&'static str, &str)>,
) -> Result<(u16, String)> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tunnel-client", "version": "probe"}
        }
    });
    let mut req = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some((name, value)) = extra_header {
        req = req.header(name, value);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await?))
}

/// Parses a JSON body, or the first `data:` line of an SSE body.
fn first_json(body: &str) -> Result<Value> {
    if let Ok(v) = serde_json::from_str(body) {
        return Ok(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .map(serde_json::from_str::<Value>)
        .transpose()?
        .ok_or_else(|| anyhow!("no JSON in body: {}", clip(body)))
}

fn ensure_eq<T: PartialEq + std::fmt::Debug>(got: T, want: T, what: &str) -> Result<String> {
    if got == want { Ok(String::new()) } else { bail!("{what}: got {got:?}, want {want:?}") }
}

fn clip(s: &str) -> String {
    let mut end = s.len().min(300);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_owned();
    if end < s.len() {
        out.push('…');
    }
    out
}
