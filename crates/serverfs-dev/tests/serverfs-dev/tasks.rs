//! MCP Tasks (`io.modelcontextprotocol/tasks`) end to end: the real binary,
//! rmcp's client declaring the extension, real processes.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ALICE, BOB, HttpServer, Project, assert_none_survive, ok, tag, wait_until_running};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    DetailedTask, GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use serverfs_test_support::Client;

fn with_tasks() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("tasks-test", "1"),
    )
}

/// A client over stdio that declares tasks: in the 2026-07-28 era (`era`
/// `None`), or at a legacy `initialize` naming `era`.
async fn stdio_tasks_client_in(p: &Project, era: Option<ProtocolVersion>) -> Client {
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.arg("--stdio").stderr(Stdio::null());
    let transport = serverfs_test_support::stdio_transport(cmd);
    let (config, lifecycle) = match era {
        None => (
            with_tasks(),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
        Some(v) => (with_tasks().with_protocol_version(v), ClientLifecycleMode::Initialize),
    };
    serve_client_with_lifecycle(config, transport, lifecycle).await.unwrap()
}

async fn stdio_tasks_client(p: &Project) -> Client {
    stdio_tasks_client_in(p, None).await
}

/// A 2026-07-28 client (stateless: the capabilities ride on every request)
/// that declares tasks and holds `token`.
async fn http_tasks_client(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    let lifecycle =
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let transport = StreamableHttpClientTransport::from_config(config);
    serve_client_with_lifecycle(with_tasks(), transport, lifecycle).await.unwrap()
}

/// Calls `tool`; the id of the task the server answers with.
async fn start_task(client: &Client, tool: &str, args: Value) -> String {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("{tool} did not answer a task: {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> DetailedTask {
    client.peer().get_task(GetTaskParams::new(id.to_owned())).await.unwrap().task
}

/// Polls until the task has ended (bounded, generously).
async fn ended(client: &Client, id: &str) -> DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let task = get(client, id).await;
        if task.status().is_terminal() {
            return task;
        }
        assert!(Instant::now() < deadline, "the task never ended: {task:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The structured result of a completed task.
fn completed(task: &DetailedTask) -> Value {
    match &task.payload {
        TaskPayload::Completed { result } => result["structuredContent"].clone(),
        other => panic!("not completed: {other:?}"),
    }
}

/// `bash` runs as a task: the status message shows the output so far,
/// and the result is the call's own answer. Other tools answer at once.
#[tokio::test(flavor = "multi_thread")]
async fn bash_runs_as_a_task_with_its_output_on_the_way() {
    let p = Project::new();
    let client = stdio_tasks_client(&p).await;
    let gate = p.path("gate");
    let command = "echo first line; while [ ! -e gate ]; do sleep 0.05; done; echo done; exit 3";
    let id = start_task(&client, "bash", json!({"command": command})).await;
    // Progress comes every 5 s; wait for the first.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = get(&client, &id).await;
        assert_eq!(task.status(), TaskStatus::Working, "{task:?}");
        if task.task.status_message.as_deref().is_some_and(|m| m.contains("last: first line")) {
            break;
        }
        assert!(Instant::now() < deadline, "no output in the status: {task:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    std::fs::write(&gate, "").unwrap();
    let task = ended(&client, &id).await;
    assert_eq!(task.task.status_message.as_deref(), Some("exit 3"), "how it ended");
    let v = completed(&task);
    assert_eq!(
        (v["exit_code"].as_i64(), v["stdout"].as_str()),
        (Some(3), Some("first line\ndone\n"))
    );
    // The very answer the call gives without a task (the gate is open now).
    let plain = p.stdio_client().await;
    let params = CallToolRequestParams::new("bash")
        .with_arguments(json!({"command": command}).as_object().unwrap().clone());
    let answer = plain.call_tool(params).await.unwrap();
    let TaskPayload::Completed { result } = &task.payload else { unreachable!() };
    let mut result = result.clone();
    // The envelope's field (this result is inlined in a task), not the answer.
    assert_eq!(result.remove("resultType"), Some(json!("complete")));
    assert_eq!(Value::Object(result), serde_json::to_value(&answer).unwrap());
    plain.cancel().await.unwrap();

    // Not a command: answered at once, as before.
    let params = CallToolRequestParams::new("read_file")
        .with_arguments(json!({"path": "src/lib.rs"}).as_object().unwrap().clone());
    let response = client.call_tool_once(params).await.unwrap();
    assert!(matches!(response, CallToolResponse::Complete(_)), "{response:?}");
    client.cancel().await.unwrap();
}

/// tasks/cancel kills the command's whole tree; the task ends cancelled.
/// Ending the server ends the commands of the tasks still running.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_kills_the_tree_and_shutdown_ends_the_rest() {
    let p = Project::new();
    let client = stdio_tasks_client(&p).await;
    let t = tag();
    let command = format!("sleep {t} & sleep {t}");
    let id = start_task(&client, "bash", json!({"command": command, "timeout_seconds": 600})).await;
    let running = t.clone();
    tokio::task::spawn_blocking(move || wait_until_running(&running)).await.unwrap();
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.unwrap();
    let killed = t.clone();
    tokio::task::spawn_blocking(move || assert_none_survive(&killed)).await.unwrap();
    assert_eq!(ended(&client, &id).await.status(), TaskStatus::Cancelled);

    // Cancelled at once, racing the command's start: by the time the task
    // says cancelled, nothing of it is left (the call returns only then).
    for _ in 0..5 {
        let raced = tag();
        let command = format!("sleep {raced} & sleep {raced}");
        let args = json!({"command": command, "timeout_seconds": 600});
        let id = start_task(&client, "bash", args).await;
        client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.unwrap();
        assert_eq!(ended(&client, &id).await.status(), TaskStatus::Cancelled);
        let left = serverfs_test_support::pids_with(&raced);
        assert!(left.is_empty(), "a cancelled task left {left:?}");
    }

    let left = tag();
    let command = format!("sleep {left} & sleep {left}");
    start_task(&client, "bash", json!({"command": command, "timeout_seconds": 600})).await;
    let running = left.clone();
    tokio::task::spawn_blocking(move || wait_until_running(&running)).await.unwrap();
    client.cancel().await.unwrap();
    tokio::task::spawn_blocking(move || assert_none_survive(&left)).await.unwrap();
}

/// A task is its creator's: to another principal it does not exist (the
/// error of an id never issued) and cannot be cancelled by them.
#[tokio::test(flavor = "multi_thread")]
async fn another_principal_cannot_see_or_cancel_a_task() {
    let p = Project::new();
    let server = HttpServer::start_with(p.command_for_alice_and_bob());
    let alice = http_tasks_client(&server.url, ALICE).await;
    let bob = http_tasks_client(&server.url, BOB).await;

    let t = tag();
    let command = format!("sleep {t} & sleep {t}");
    let id = start_task(&alice, "bash", json!({"command": command, "timeout_seconds": 600})).await;
    let running = t.clone();
    tokio::task::spawn_blocking(move || wait_until_running(&running)).await.unwrap();
    let unknown = |e: rmcp::ServiceError| e.to_string();
    let never = "00000000-0000-4000-8000-000000000000";
    let never_issued = bob.peer().get_task(GetTaskParams::new(never)).await.map_err(unknown);
    let seen = bob.peer().get_task(GetTaskParams::new(id.clone())).await.map_err(unknown);
    let expected = never_issued.unwrap_err().replace(never, &id);
    assert_eq!(seen.unwrap_err(), expected, "bob sees alice's task");
    let cancel = bob.peer().cancel_task(CancelTaskParams::new(id.clone())).await;
    assert!(cancel.is_err(), "bob cancelled alice's task");
    assert!(!serverfs_test_support::pids_with(&t).is_empty(), "bob's cancel stopped it");
    assert_eq!(get(&alice, &id).await.status(), TaskStatus::Working);

    alice.peer().cancel_task(CancelTaskParams::new(id.clone())).await.unwrap();
    tokio::task::spawn_blocking(move || assert_none_survive(&t)).await.unwrap();
    assert_eq!(ended(&alice, &id).await.status(), TaskStatus::Cancelled);
}

/// A client that does not declare the extension sees no task: the call
/// answers as before, and tasks/get is refused.
#[tokio::test(flavor = "multi_thread")]
async fn without_the_extension_nothing_changes() {
    let p = Project::new();
    let client = p.stdio_client().await;
    let v = ok(&client, "bash", json!({"command": "echo plain"})).await;
    assert_eq!(v["stdout"], "plain\n");
    let refused = client.peer().get_task(GetTaskParams::new("any")).await;
    assert!(refused.is_err(), "{refused:?}");
    client.cancel().await.unwrap();
}

/// A client of an era before 2026-07-28 cannot read a task, whatever it
/// declares (the MCP Inspector declares the extension at a legacy
/// `initialize`): every era gets the plain answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_client_that_declares_tasks_gets_plain_answers() {
    let p = Project::new();
    for era in [
        ProtocolVersion::V_2024_11_05,
        ProtocolVersion::V_2025_03_26,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ] {
        let client = stdio_tasks_client_in(&p, Some(era.clone())).await;
        let params = CallToolRequestParams::new("bash")
            .with_arguments(json!({"command": "echo plain"}).as_object().unwrap().clone());
        match client.call_tool_once(params).await.unwrap() {
            CallToolResponse::Complete(result) => {
                let v = result.structured_content.expect("structured content");
                assert_eq!(v["stdout"], "plain\n", "{era}");
            }
            other => panic!("{era}: a legacy client got {other:?}"),
        }
        client.cancel().await.unwrap();
    }
}

/// `tasks/get` over HTTP without `Mcp-Name` (fastmcp's tasks package
/// leaves it out): the task id in the body decides; a header that names
/// another task is still refused (-32020).
#[tokio::test(flavor = "multi_thread")]
async fn tasks_get_without_mcp_name_is_answered_and_a_wrong_one_refused() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let alice = http_tasks_client(&server.url, ALICE).await;
    let id = start_task(&alice, "bash", json!({"command": "echo headless"})).await;
    ended(&alice, &id).await;

    let post = |name: Option<&str>| {
        let mut args = vec![
            "-sS".to_owned(),
            "-H".to_owned(),
            format!("Authorization: Bearer {ALICE}"),
            "-H".to_owned(),
            "Content-Type: application/json".to_owned(),
            "-H".to_owned(),
            "Accept: application/json, text/event-stream".to_owned(),
            "-H".to_owned(),
            "Mcp-Method: tasks/get".to_owned(),
            "-H".to_owned(),
            "MCP-Protocol-Version: 2026-07-28".to_owned(),
        ];
        if let Some(name) = name {
            args.extend(["-H".to_owned(), format!("Mcp-Name: {name}")]);
        }
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": {
            "taskId": id,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "headless", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": {"io.modelcontextprotocol/tasks": {}}
                }
            }
        }});
        args.extend(["-d".to_owned(), body.to_string(), server.url.clone()]);
        let out = std::process::Command::new("curl").args(&args).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let answered = post(None);
    assert_eq!(answered["result"]["taskId"], id.as_str(), "{answered}");
    assert_eq!(answered["result"]["status"], "completed", "{answered}");
    let refused = post(Some("another-task"));
    assert_eq!(refused["error"]["code"], -32020, "{refused}");
    alice.cancel().await.unwrap();
}
