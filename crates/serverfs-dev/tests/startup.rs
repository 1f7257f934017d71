//! Start-up and logs as an operator meets them, on the real binary: the
//! `starting` line names the root and the transport; a root that cannot be
//! opened and an address that cannot be listened on exit 2 naming the path
//! or address and the setting; every command leaves one audit line.

mod common;

use std::process::Stdio;

use common::{Project, RawStdio};
use serde_json::Value;

fn log_lines(stderr: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stderr).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn the_starting_line_names_the_root_and_the_transport() {
    let p = Project::new();
    // stdin at EOF: the server starts, then ends as a closed client makes it.
    let out = p.command().arg("--stdio").stdin(Stdio::null()).output().unwrap();
    let lines = log_lines(&out.stderr);
    let starting = lines.iter().find(|v| v["event"] == "starting").expect("a starting line");
    assert_eq!(starting["root"], p.root().to_string_lossy().as_ref(), "{starting}");
    assert_eq!(starting["transport"], "stdio", "{starting}");
}

#[test]
fn a_root_that_cannot_be_opened_is_named_with_its_setting() {
    let p = Project::new();
    let missing = p.dir.path().join("no-such-root");
    let out = std::process::Command::new(common::BIN)
        .arg("--root")
        .arg(&missing)
        .arg("--state-dir")
        .arg(p.state())
        .arg("--stdio")
        .env("XDG_STATE_HOME", p.xdg())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SERVERFS_ROOT"), "{stderr}");
    assert!(stderr.contains(&*missing.to_string_lossy()), "{stderr}");
}

#[test]
fn a_port_in_use_is_exit_2_naming_the_address_and_the_setting() {
    let p = Project::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = p.command().args(["--listen", &addr]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = log_lines(&out.stderr);
    let error = lines.iter().find(|v| v["event"] == "config_error").expect("a config_error line");
    let message = error["error"].as_str().unwrap();
    assert!(message.contains(&addr) && message.contains("SERVERFS_LISTEN"), "{message}");
    let starting = lines.iter().find(|v| v["event"] == "starting").expect("a starting line");
    assert_eq!(starting["transport"], "http", "{starting}");
}

/// Runs bash, one shell_write and a bash that yields over stdio (`env`
/// added), then ends the server; its log lines.
fn commands_logged(p: &Project, env: &[(&str, &str)]) -> Vec<Value> {
    let mut cmd = p.command();
    cmd.envs(env.iter().copied()).stderr(Stdio::piped());
    let mut raw = RawStdio::spawn(cmd);
    let mut answer = |message: Value| raw.call(message);
    let call = |id: u32, name: &str, arguments: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    };
    answer(call(2, "bash", serde_json::json!({"command": "echo audit-me; exit 4"})));
    let opened = answer(call(3, "shell_open", serde_json::json!({})));
    let session = opened["result"]["structuredContent"]["session_id"].clone();
    answer(call(4, "shell_write", serde_json::json!({"session_id": session, "input": "true\n"})));
    let args = serde_json::json!({"command": "sleep 120", "yield_after_seconds": 1, "timeout_seconds": 100});
    let yielded = answer(call(5, "bash", args));
    assert_eq!(yielded["result"]["structuredContent"]["running"], true, "{yielded}");
    let out = raw.end().wait_with_output().unwrap();
    assert!(out.status.success());
    log_lines(&out.stderr)
}

#[test]
fn every_command_leaves_one_audit_line() {
    let p = Project::new();
    let lines = commands_logged(&p, &[]);
    let audit: Vec<&Value> = lines.iter().filter(|v| v["event"] == "command").collect();
    assert_eq!(audit.len(), 3, "{lines:?}");
    assert_eq!(audit[0]["level"], "INFO");
    assert_eq!(audit[0]["tool"], "bash");
    assert_eq!(audit[0]["principal"], "stdio");
    assert_eq!(audit[0]["command"], "echo audit-me; exit 4");
    assert_eq!(audit[0]["status"], "exit 4");
    assert!(audit[0]["duration_ms"].is_u64(), "{}", audit[0]);
    assert_eq!(audit[1]["tool"], "shell_write");
    assert_eq!(audit[1]["command"], "true\n");
    assert_eq!(audit[1]["status"], "written");
    assert_eq!(
        (audit[2]["tool"].as_str(), audit[2]["status"].as_str()),
        (Some("bash"), Some("running"))
    );

    // The operator may leave the command text out; the rest stays.
    let lines = commands_logged(&p, &[("SERVERFS_AUDIT_COMMAND_TEXT", "false")]);
    let audit: Vec<&Value> = lines.iter().filter(|v| v["event"] == "command").collect();
    assert_eq!(audit.len(), 3, "{lines:?}");
    for line in audit {
        assert!(line.get("command").is_none(), "{line}");
        assert!(line["status"].is_string() && line["principal"] == "stdio", "{line}");
    }
    assert!(!lines.iter().any(|v| v.to_string().contains("audit-me")), "{lines:?}");
}
