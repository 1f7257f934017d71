//! What clients and models get from every serverfs-dev tool, on the real
//! binary over HTTP (so file_link is listed too):
//! - schemas strict clients accept: no `type` arrays, bounds JSON numbers
//!   hold, every optional input nullable, and every tool callable the way
//!   the OpenAI Agents SDK's strict mode calls it (every argument sent,
//!   `null` for the ones left out);
//! - the compact text a model reads beside structuredContent, and the
//!   JSON mirror with `--text-output json`.

mod common;
#[path = "../../tools/tests/support/strict.rs"]
mod strict;

use common::{Client, HttpServer, Project};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

/// One call: (isError, structuredContent or Null, the text content).
async fn answer(client: &Client, tool: &str, args: Value) -> (bool, Value, String) {
    let args = args.as_object().unwrap().clone();
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    let content = serde_json::to_value(&result.content).unwrap();
    assert_eq!(content.as_array().unwrap().len(), 1, "{tool}: {content}");
    let text = content[0]["text"].as_str().unwrap().to_owned();
    let structured = result.structured_content.unwrap_or(Value::Null);
    (result.is_error.unwrap_or(false), structured, text)
}

const PATCH: &str =
    "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-    1\n+    2\n*** End Patch\n";

#[tokio::test]
async fn every_tool_takes_null_for_what_it_leaves_out() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let client = server.client().await;
    let tools = client.list_all_tools().await.unwrap();
    let session = {
        let (is_error, v, _) = answer(&client, "shell_open", json!({"workdir": null})).await;
        assert!(!is_error, "{v}");
        v["session_id"].as_str().unwrap().to_owned()
    };
    let required = |tool: &str| match tool {
        "list_directory" | "shell_list" | "shell_open" => json!({}),
        "find_files" => json!({"pattern": "*.rs"}),
        "search_text" => json!({"query": "fn"}),
        "read_text_file" | "stat_file" | "read_file" | "file_link" => json!({"path": "src/lib.rs"}),
        "write_file" => json!({"path": "new.txt", "content": "x\n"}),
        "apply_patch" => json!({"patch": PATCH}),
        "bash" => json!({"command": "echo hi"}),
        "shell_write" => json!({"session_id": session, "input": "echo hi\n"}),
        "shell_read" | "shell_close" => json!({"session_id": session}),
        other => panic!("{other}: a tool this test does not know"),
    };
    // shell_close last: the others use the session.
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_by_key(|n| *n == "shell_close");
    assert!(names.contains(&"file_link") && names.len() >= 15, "{names:?}");
    for name in names {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let input = Value::Object((*tool.input_schema).clone());
        let output = Value::Object((*tool.output_schema.clone().expect("outputSchema")).clone());
        strict::assert_portable(&input, &format!("{name} input"));
        strict::assert_portable(&output, &format!("{name} output"));
        let required_names = input["required"].as_array().cloned().unwrap_or_default();
        for (arg, property) in input["properties"].as_object().unwrap() {
            let nullable =
                property["anyOf"].as_array().is_some_and(|a| a.iter().any(|s| s["type"] == "null"));
            assert_eq!(nullable, !required_names.contains(&json!(arg)), "{name}.{arg}: {property}");
        }
        let strict_input = strict::strict(&input);
        assert_eq!(strict_input["required"].as_array().unwrap().len(), {
            input["properties"].as_object().unwrap().len()
        });
        let args = strict::with_nulls(&required(name), &input);
        let (is_error, structured, text) = answer(&client, name, args.clone()).await;
        assert!(!is_error, "{name} {args}: {text}");
        assert!(structured.is_object(), "{name}: {structured}");
        assert!(serde_json::from_str::<Value>(&text).is_err(), "{name}: JSON text {text}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_text_is_for_a_model_or_the_json_when_asked() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let client = server.client().await;
    let (_, _, text) =
        answer(&client, "bash", json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert_eq!(text, "out\n[stderr]\nerr\n[exit code 3]\n");
    let (_, _, text) = answer(&client, "read_file", json!({"path": "src/lib.rs"})).await;
    assert_eq!(text, "src/lib.rs: lines 1 to 3 of 3\nfn one() -> u32 {\n    1\n}\n");
    let (_, _, text) = answer(&client, "list_directory", json!({})).await;
    assert!(text.starts_with(".: 2 entries"), "{text}");
    assert!(text.contains("\n.gitignore\t8\n") && text.contains("\nsrc/\n"), "{text}");
    let (_, _, text) = answer(&client, "search_text", json!({"query": "1"})).await;
    assert_eq!(text, "src/lib.rs:2:    1\n");
    let (is_error, _, text) = answer(&client, "read_file", json!({"path": ".env"})).await;
    assert!(is_error && text.starts_with("DENIED_PATH: "), "{text}");
    // serverfs-dev has one root, no workdirs, and .git is work, not a secret.
    let (is_error, _, text) = answer(&client, "read_file", json!({"path": ".git/config"})).await;
    assert!(is_error && text.starts_with("DENIED_PATH: project:/.git/config is inside .git"));
    assert!(!text.contains("credential"), "{text}");
    for path in ["../x", "/etc/passwd", "a\\b"] {
        let (is_error, _, text) = answer(&client, "read_file", json!({"path": path})).await;
        assert!(is_error && !text.contains("workdir"), "{text}");
    }
    client.cancel().await.unwrap();
    drop(server);

    let mut cmd = p.command();
    cmd.env("SERVERFS_TEXT_OUTPUT", "json");
    let server = HttpServer::start_with(cmd);
    let client = server.client().await;
    for (tool, args) in [
        ("bash", json!({"command": "echo hi"})),
        ("read_file", json!({"path": "src/lib.rs"})),
        ("list_directory", json!({})),
    ] {
        let (is_error, structured, text) = answer(&client, tool, args).await;
        assert!(!is_error);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), structured, "{tool}");
    }
    client.cancel().await.unwrap();
}
