//! The read-only handler in process, over an in-memory duplex pipe (rmcp's
//! own test pattern): no binary, no port — the handler the binary serves,
//! built from the library, with a real client and a real directory.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use serverfs_core::Policy;
use serverfs_mcp::{INSTRUCTIONS, ReadOnlyFs, ReadOnlyServer, WorkdirSpec, Workdirs};
use serverfs_tools::{Concurrency, Limits};

async fn connect(dir: &std::path::Path) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let spec = WorkdirSpec {
        alias: "w".into(),
        description: Some("fixture".into()),
        host_path: dir.to_path_buf(),
        origin: "workdir 'w'".into(),
        relative: false,
    };
    let workdirs = Workdirs::open(vec![spec], Policy::new(false, &[]).unwrap()).unwrap();
    let fs = Arc::new(ReadOnlyFs::new(workdirs, Limits::default()));
    let server = ReadOnlyServer::new(fs, &Concurrency::default());
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let (served, client) = tokio::join!(server.serve(server_io), ().serve(client_io));
    let served = served.unwrap();
    tokio::spawn(async move { served.waiting().await });
    client.unwrap()
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> Value {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap()
}

#[tokio::test]
async fn the_handler_serves_every_tool_in_process() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n// needle\n").unwrap();
    std::fs::write(dir.path().join(".env"), "SECRET=1\n").unwrap();
    let client = connect(dir.path()).await;

    let info = client.peer_info().unwrap();
    assert_eq!(info.instructions.as_deref(), Some(INSTRUCTIONS));
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 6);
    assert!(tools.iter().all(|t| t.annotations.as_ref().unwrap().read_only_hint == Some(true)));

    let found = call(&client, "find_files", json!({"workdir": "w", "pattern": "*.rs"})).await;
    assert_eq!(
        found["structuredContent"]["matches"],
        json!([{"path": "src/main.rs", "type": "file"}])
    );
    let hits = call(&client, "search_text", json!({"workdir": "w", "query": "needle"})).await;
    assert_eq!(hits["structuredContent"]["matches"][0]["line"], 2);
    let tail = call(
        &client,
        "read_text_file",
        json!({"workdir": "w", "path": "src/main.rs", "start_line": -1}),
    )
    .await;
    assert_eq!(tail["structuredContent"]["content"], "// needle\n");
    let denied = call(&client, "stat_file", json!({"workdir": "w", "path": ".env"})).await;
    assert_eq!(denied["isError"], true);
    assert!(denied["content"][0]["text"].as_str().unwrap().starts_with("DENIED_PATH: w:/.env"));
    let bad = call(&client, "list_directory", json!({"workdir": "w", "limit": 0})).await;
    assert!(bad["content"][0]["text"].as_str().unwrap().starts_with("INVALID_ARGUMENT: limit:"));
    client.cancel().await.unwrap();
}
