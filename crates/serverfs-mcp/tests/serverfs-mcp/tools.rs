//! End to end: the real binary, a real rmcp client, over HTTP (legacy
//! initialize flow and 2026-07-28) and stdio.

use crate::common;

use common::*;
use rmcp::ServiceExt;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

const TOOLS: [&str; 6] =
    ["find_files", "list_directory", "list_workdirs", "read_text_file", "search_text", "stat_file"];

/// Every tool and the resource template, asserting results and that no
/// response ever names a host path.
async fn exercise(client: &Client, fx: &Fixture) {
    let mut seen = String::new();

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, TOOLS);
    for tool in &tools {
        let a = tool.annotations.as_ref().expect("annotations");
        assert_eq!(a.read_only_hint, Some(true), "{}", tool.name);
        assert_eq!(a.open_world_hint, Some(false), "{}", tool.name);
        assert_eq!(a.destructive_hint, Some(false), "{}", tool.name);
        assert!(tool.output_schema.is_some(), "{} has no outputSchema", tool.name);
    }

    let (err, v) = call(client, "list_workdirs", json!({})).await;
    assert!(!err);
    assert_eq!(v, json!({"workdirs": [{"alias": "test", "description": "Fixture tree"}]}));
    seen += &v.to_string();

    let (err, v) = call(client, "list_directory", json!({"workdir": "test"})).await;
    assert!(!err, "{v}");
    let names: Vec<&str> =
        v["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["README.md", "empty", "etc-link", "project", "中文.txt"]);
    assert_eq!(v["entries"][2]["type"], "symlink");
    assert!(v["entries"][2].get("size").is_none());
    assert_eq!(v["entries"][0]["size"], 16);
    assert_eq!(
        (v["returned"].clone(), v["has_more"].clone(), v["omitted"].clone()),
        (json!(5), json!(false), json!(0))
    );
    seen += &v.to_string();

    let (err, v) =
        call(client, "list_directory", json!({"workdir": "test", "offset": 1, "limit": 2})).await;
    assert!(!err);
    assert_eq!(v["entries"][0]["name"], "empty");
    assert_eq!((v["returned"].clone(), v["has_more"].clone()), (json!(2), json!(true)));

    let (err, v) = call(
        client,
        "read_text_file",
        json!({"workdir": "test", "path": "project/main.py", "start_line": 2}),
    )
    .await;
    assert!(!err);
    assert_eq!(v["content"], "DATABASE_URL = os.getenv(\"DATABASE_URL\")\n");
    assert_eq!(
        (v["end_line"].clone(), v["has_more"].clone(), v["next_start_line"].clone()),
        (json!(2), json!(false), Value::Null)
    );
    seen += &v.to_string();

    let (err, v) =
        call(client, "read_text_file", json!({"workdir": "test", "path": "中文.txt"})).await;
    assert!(!err);
    assert_eq!(v["content"], "你好，世界\n");

    let (err, v) =
        call(client, "stat_file", json!({"workdir": "test", "path": "project/docker-compose.yml"}))
            .await;
    assert!(!err);
    assert_eq!(v["type"], "file");
    assert_eq!(v["mime_type"], "application/yaml");
    assert!(v["modified_at"].as_str().unwrap().ends_with('Z'));
    seen += &v.to_string();

    let (err, v) = call(client, "stat_file", json!({"workdir": "test", "path": "project"})).await;
    assert!(!err);
    assert_eq!((v["type"].clone(), v["mime_type"].clone()), (json!("directory"), Value::Null));
    assert!(v.get("size").is_none());

    for (tool, args, code) in [
        (
            "read_text_file",
            json!({"workdir": "test", "path": "../../etc/passwd"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "/etc/passwd"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "etc-link/passwd"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        ("read_text_file", json!({"workdir": "test", "path": "secret.env"}), "DENIED_PATH"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": ".hidden/notes.txt"}),
            "HIDDEN_PATH_NOT_ALLOWED",
        ),
        ("read_text_file", json!({"workdir": "test", "path": "missing.txt"}), "PATH_NOT_FOUND"),
        ("read_text_file", json!({"workdir": "test", "path": "project"}), "NOT_A_FILE"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "max_lines": 501}),
            "INVALID_ARGUMENT",
        ),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "start_line": 0}),
            "INVALID_ARGUMENT",
        ),
        ("list_directory", json!({"workdir": "test", "path": "README.md"}), "NOT_A_DIRECTORY"),
        ("list_directory", json!({"workdir": "test", "limit": 0}), "INVALID_ARGUMENT"),
        ("list_directory", json!({"workdir": "test", "limit": 501}), "INVALID_ARGUMENT"),
        ("list_directory", json!({"workdir": "nope"}), "WORKDIR_NOT_FOUND"),
        ("stat_file", json!({"workdir": "test", "path": "C:\\Windows"}), "INVALID_ARGUMENT"),
        (
            "find_files",
            json!({"workdir": "test", "pattern": "*", "limit": 101}),
            "INVALID_ARGUMENT",
        ),
        (
            "find_files",
            json!({"workdir": "test", "path": "etc-link", "pattern": "*"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "find_files",
            json!({"workdir": "test", "path": "../", "pattern": "*"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        ("search_text", json!({"workdir": "test", "query": ""}), "INVALID_ARGUMENT"),
        ("search_text", json!({"workdir": "test", "query": "x", "limit": 0}), "INVALID_ARGUMENT"),
        (
            "search_text",
            json!({"workdir": "test", "path": ".hidden", "query": "x"}),
            "HIDDEN_PATH_NOT_ALLOWED",
        ),
    ] {
        let (is_error, text) = call(client, tool, args.clone()).await;
        assert!(is_error, "{tool} {args}");
        let text = text.as_str().unwrap().to_owned();
        assert!(text.starts_with(&format!("{code}: ")), "{tool} {args}: {text}");
        seen += &text;
    }

    // unknown arguments are refused, not ignored
    let unknown = client
        .call_tool(rmcp::model::CallToolRequestParams::new("stat_file").with_arguments(
            json!({"workdir": "test", "path": "", "follow": true}).as_object().unwrap().clone(),
        ))
        .await;
    let unknown = serde_json::to_value(unknown.unwrap()).unwrap();
    assert_eq!(unknown["isError"], true, "{unknown}");
    let text = unknown["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("INVALID_ARGUMENT: follow: unknown argument"), "{text}");

    let templates = client.list_resource_templates(None).await.unwrap();
    assert_eq!(templates.resource_templates[0].uri_template, "serverfs://{workdir}/{path}");

    let read = client
        .read_resource(ReadResourceRequestParams::new("serverfs://test/README.md"))
        .await
        .unwrap();
    let contents = serde_json::to_value(&read.contents).unwrap();
    assert_eq!(contents[0]["text"], "# Fixture\nhello\n");
    assert_eq!(contents[0]["mimeType"], "text/markdown");
    let read = client
        .read_resource(ReadResourceRequestParams::new("serverfs://test/%E4%B8%AD%E6%96%87.txt"))
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&read.contents).unwrap()[0]["text"], "你好，世界\n");

    for (uri, code) in [
        ("serverfs://test/%2e%2e/%2e%2e/etc/passwd", "PATH_OUTSIDE_WORKDIR"),
        ("serverfs://test/etc-link%2Fpasswd", "SYMLINK_NOT_ALLOWED"),
        ("serverfs://test/secret.env", "DENIED_PATH"),
        ("serverfs://test/.hidden/notes.txt", "HIDDEN_PATH_NOT_ALLOWED"),
        ("serverfs://test/missing", "PATH_NOT_FOUND"),
        ("serverfs://nope/x", "WORKDIR_NOT_FOUND"),
    ] {
        let err = client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&format!("{code}: ")), "{uri}: {text}");
        seen += &text;
    }

    assert_no_host_path(&seen, &fx.root());
}

#[tokio::test]
async fn http_both_protocol_eras() {
    let fx = Fixture::new();
    let server = HttpServer::start(&[
        "--workdir",
        &fx.workdir_arg(),
        "--workdir-description",
        "test=Fixture tree",
    ]);
    for (era, lifecycle) in lifecycles() {
        let client = http_client(&server.url, lifecycle).await;
        let negotiated = client.peer_info().map(|i| i.protocol_version.to_string());
        if era == "2026-07-28" {
            assert_eq!(negotiated.as_deref(), Some("2026-07-28"));
        }
        exercise(&client, &fx).await;
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn stdio_serves_and_exits_when_stdin_closes() {
    let fx = Fixture::new();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args([
        "--stdio",
        "--workdir",
        &fx.workdir_arg(),
        "--workdir-description",
        "test=Fixture tree",
    ]);
    let transport = serverfs_test_support::stdio_transport(cmd);
    let client: Client = rmcp::model::ClientConfig::default().serve(transport).await.unwrap();
    exercise(&client, &fx).await;
    client.cancel().await.unwrap();
}

#[test]
fn stdio_exit_code_on_closed_stdin() {
    let fx = Fixture::new();
    let started = std::time::Instant::now();
    let out = std::process::Command::new(BIN)
        .args(["--stdio", "--workdir", &fx.workdir_arg()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
