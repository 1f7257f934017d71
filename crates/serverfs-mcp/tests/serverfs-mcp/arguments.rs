//! Malformed arguments, against the real binary over HTTP (both protocol
//! eras) and stdio: every one is the tool error
//! `INVALID_ARGUMENT: <argument>: <what was expected>`, never rmcp's bare deserialisation message.

use crate::common;

use common::{BIN, Client, Fixture, HttpServer, call, http_client, lifecycles};
use rmcp::ServiceExt;
use serde_json::{Value, json};

/// (tool, arguments, the argument the error must name).
fn malformed() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        // Unknown argument.
        ("list_workdirs", json!({"verbose": true}), "verbose"),
        ("list_directory", json!({"workdir": "test", "recursive": true}), "recursive"),
        ("find_files", json!({"workdir": "test", "pattern": "*", "type": "file"}), "type"),
        ("search_text", json!({"workdir": "test", "query": "x", "regex": true}), "regex"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "encoding": "latin1"}),
            "encoding",
        ),
        ("stat_file", json!({"workdir": "test", "path": "", "follow": true}), "follow"),
        // Wrong JSON type.
        ("list_directory", json!({"workdir": "test", "path": 5}), "path"),
        ("find_files", json!({"workdir": "test", "pattern": ["*.py"]}), "pattern"),
        (
            "search_text",
            json!({"workdir": "test", "query": "x", "case_sensitive": "no"}),
            "case_sensitive",
        ),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "max_lines": "10"}),
            "max_lines",
        ),
        ("stat_file", json!({"workdir": {"alias": "test"}, "path": ""}), "workdir"),
        // Missing required argument.
        ("list_directory", json!({}), "workdir"),
        ("find_files", json!({"workdir": "test"}), "pattern"),
        ("search_text", json!({"workdir": "test"}), "query"),
        ("read_text_file", json!({"workdir": "test"}), "path"),
        ("stat_file", json!({"workdir": "test"}), "path"),
        // Negative number.
        ("list_directory", json!({"workdir": "test", "offset": -1}), "offset"),
        ("find_files", json!({"workdir": "test", "pattern": "*", "limit": -5}), "limit"),
        ("search_text", json!({"workdir": "test", "query": "x", "limit": -1}), "limit"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "max_lines": -1}),
            "max_lines",
        ),
        // Fractional number.
        ("list_directory", json!({"workdir": "test", "limit": 2.5}), "limit"),
        ("find_files", json!({"workdir": "test", "pattern": "*", "limit": 1.5}), "limit"),
        ("search_text", json!({"workdir": "test", "query": "x", "limit": 0.5}), "limit"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "start_line": 1.5}),
            "start_line",
        ),
        // Out of range.
        ("list_directory", json!({"workdir": "test", "limit": 501}), "limit"),
        ("list_directory", json!({"workdir": "test", "offset": 10_001}), "offset"),
        ("search_text", json!({"workdir": "test", "query": "x", "limit": 0}), "limit"),
        ("search_text", json!({"workdir": "test", "query": ""}), "query"),
        (
            "read_text_file",
            json!({"workdir": "test", "path": "README.md", "max_lines": 501}),
            "max_lines",
        ),
        // null where the argument is required.
        ("list_directory", json!({"workdir": null}), "workdir"),
        ("find_files", json!({"workdir": "test", "pattern": null}), "pattern"),
        ("search_text", json!({"workdir": "test", "query": null}), "query"),
        ("read_text_file", json!({"workdir": "test", "path": null}), "path"),
        ("stat_file", json!({"workdir": null, "path": ""}), "workdir"),
    ]
}

async fn assert_table(client: &Client, transport: &str) {
    for (tool, args, argument) in malformed() {
        let (is_error, text) = call(client, tool, args.clone()).await;
        let text = text.as_str().unwrap_or_default().to_owned();
        assert!(is_error, "{transport} {tool} {args}: accepted");
        let prefix = format!("INVALID_ARGUMENT: {argument}: ");
        assert!(text.starts_with(&prefix), "{transport} {tool} {args}: {text}");
        assert!(text.len() > prefix.len() + 8, "{transport} {tool} {args}: says nothing: {text}");
    }
    // An optional argument sent as null means "not given".
    for (tool, args) in [
        ("list_directory", json!({"workdir": "test", "path": null, "limit": null})),
        ("search_text", json!({"workdir": "test", "query": "hello", "case_sensitive": null})),
        ("read_text_file", json!({"workdir": "test", "path": "README.md", "max_lines": null})),
        // 2.0 is an integer to JSON Schema.
        ("find_files", json!({"workdir": "test", "pattern": "*", "limit": 2.0})),
    ] {
        let (is_error, v) = call(client, tool, args.clone()).await;
        assert!(!is_error, "{transport} {tool} {args}: {v}");
    }
    // Huge input is never echoed.
    let huge = "x".repeat(100_000);
    let mut unknown = json!({"workdir": "test", "path": ""});
    unknown[&huge] = json!(1);
    for args in [unknown, json!({"workdir": "test", "path": "", "limit": huge})] {
        let (is_error, text) = call(client, "list_directory", args).await;
        let text = text.as_str().unwrap().to_owned();
        assert!(is_error && text.starts_with("INVALID_ARGUMENT: "), "{text}");
        assert!(text.len() < 300, "{transport}: long message: {} bytes", text.len());
    }
}

#[tokio::test]
async fn http_both_eras() {
    let fx = Fixture::new();
    let server = HttpServer::start(&["--workdir", &fx.workdir_arg()]);
    for (era, lifecycle) in lifecycles() {
        let client = http_client(&server.url, lifecycle).await;
        assert_table(&client, &format!("http {era}")).await;
        client.cancel().await.unwrap();
    }
    // A refused call is logged like any other, with its code.
    let line = server.log.wait_for(std::time::Duration::from_secs(5), |v| {
        v["event"] == "tool_call"
            && v["error_code"] == "INVALID_ARGUMENT"
            && v["tool"] == "stat_file"
    });
    assert_eq!(line["success"], false);
}

#[tokio::test]
async fn stdio() {
    let fx = Fixture::new();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--stdio", "--workdir", &fx.workdir_arg()]);
    cmd.stderr(std::process::Stdio::null());
    let transport = serverfs_test_support::stdio_transport(cmd);
    let client: Client = rmcp::model::ClientConfig::default().serve(transport).await.unwrap();
    assert_table(&client, "stdio").await;
    client.cancel().await.unwrap();
}
