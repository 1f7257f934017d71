//! Start-up as an operator meets it, on the real binary: the `starting`
//! line names the root and the transport; a root that cannot be opened and
//! an address that cannot be listened on exit 2 naming the path or address
//! and the setting.

mod common;

use std::process::Stdio;

use common::Project;
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
