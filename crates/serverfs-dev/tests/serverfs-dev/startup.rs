//! Start-up and logs as an operator meets them, on the real binary: the
//! `starting` line names the root and the transport; every start-up error
//! is exit 2 and one plain line naming the setting (never a host path or
//! OS text); a relative root is resolved and said once; every command
//! leaves one audit line.

use crate::common;

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

/// The one plain line a failed start ends with (log lines may come
/// before it), after checking exit code 2 and that no host path of the
/// test (`p.dir`) is in it.
fn start_error(p: &Project, mut command: std::process::Command) -> String {
    let out = command.stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default().to_owned();
    assert!(!line.contains(&*p.dir.path().to_string_lossy()), "host path in: {line}");
    line
}

/// serverfs-dev run on `root` with the test's state dirs.
fn with_root(p: &Project, root: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(common::BIN);
    cmd.arg("--root").arg(root).arg("--state-dir").arg(p.state());
    cmd.env_remove("SERVERFS_TOKEN").env("XDG_STATE_HOME", p.xdg());
    cmd
}

/// Every start-up error: exit 2, one plain line naming the setting, with
/// the expected form where there is one, never a host path or OS text.
#[test]
fn start_up_errors_name_the_setting_in_one_plain_line() {
    let p = Project::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let file = p.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let missing = p.dir.path().join("no-such-dir");
    let e = "serverfs-dev: config error:";
    let mut cases: Vec<(std::process::Command, String)> = vec![
        (
            with_root(&p, &missing),
            format!("{e} SERVERFS_ROOT (--root): the directory does not exist"),
        ),
        (with_root(&p, &file), format!("{e} SERVERFS_ROOT (--root): the path is not a directory")),
        (
            {
                let mut c = p.command();
                c.arg("--command-writable").arg(&missing);
                c
            },
            format!(
                "{e} SERVERFS_COMMAND_WRITABLE (--command-writable): the path does not exist \
                 (each must exist)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.arg("--command-readable").arg(format!("/usr,{}", missing.display()));
                c
            },
            format!(
                "{e} SERVERFS_COMMAND_READABLE (--command-readable): path 2 of 2 does not exist \
                 (each must exist)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.env("SERVERFS_COMMAND_CAPABILITIES", "CAP_NET_BIND_SERVICE,CAP_NOPE");
                c
            },
            format!(
                "{e} SERVERFS_COMMAND_CAPABILITIES (--command-capabilities): 'CAP_NOPE' is not \
                 a capability (e.g. CAP_NET_BIND_SERVICE)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.args(["--max-file-bytes", "0"]);
                c
            },
            format!("{e} SERVERFS_MAX_FILE_BYTES (--max-file-bytes): must be at least 1"),
        ),
        (
            {
                let mut c = p.command();
                c.args(["--listen", "8000"]);
                c
            },
            format!(
                "{e} SERVERFS_LISTEN (--listen): invalid value '8000': expected HOST:PORT with \
                 HOST an IP address, e.g. 127.0.0.1:8790 or [::1]:8790 (a port alone is not \
                 enough: 0.0.0.0:8000 for every interface, 127.0.0.1:8000 for this machine only)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.args(["--listen", ":8000"]);
                c
            },
            format!(
                "{e} SERVERFS_LISTEN (--listen): invalid value ':8000': expected HOST:PORT with \
                 HOST an IP address, e.g. 127.0.0.1:8790 or [::1]:8790 (a port alone is not \
                 enough: 0.0.0.0:8000 for every interface, 127.0.0.1:8000 for this machine only)"
            ),
        ),
        (
            with_root(&p, std::path::Path::new("~/no-such-serverfs-dir")),
            format!(
                "{e} SERVERFS_ROOT (--root): the directory does not exist (it starts with '~', \
                 which only a shell expands, and not inside quotes or an environment file: use \
                 $HOME or the full path)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.arg("--tokens-file").arg(&missing);
                c
            },
            format!("{e} SERVERFS_TOKENS_FILE (--tokens-file): the file does not exist"),
        ),
        (
            {
                let mut c = p.command();
                c.env("SERVERFS_LISTEN", "localhost:18001");
                c
            },
            format!(
                "{e} SERVERFS_LISTEN (--listen): invalid value 'localhost:18001': expected \
                 HOST:PORT with HOST an IP address, e.g. 127.0.0.1:8790 or [::1]:8790 (for \
                 localhost use 127.0.0.1:18001)"
            ),
        ),
        (
            {
                let mut c = p.command();
                c.args(["--listen", &addr]);
                c
            },
            format!(
                "{e} SERVERFS_LISTEN (--listen): cannot listen on {addr}: the address is already \
                 in use"
            ),
        ),
    ];
    // Every setting with a fixed set of values lists them.
    for (flag, value, values) in [
        ("--sandbox", "maybe", "on, off"),
        ("--command-network", "none", "on, off"),
        ("--text-output", "yaml", "compact, json"),
        ("--audit-command-text", "no", "true, false"),
    ] {
        let mut c = p.command();
        c.args([flag, value]);
        let env = format!("SERVERFS_{}", flag[2..].to_ascii_uppercase().replace('-', "_"));
        cases.push((
            c,
            format!("{e} {env} ({flag}): invalid value '{value}': expected one of {values}"),
        ));
    }
    for (command, expected) in cases {
        assert_eq!(start_error(&p, command), expected);
    }
}

/// An address in use is said before anything that reads like a good
/// start: the address is bound first.
#[test]
fn a_port_in_use_is_said_before_anything_starts() {
    let p = Project::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = p.command();
    c.args(["--listen", &taken.local_addr().unwrap().to_string()]);
    let out = c.stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let events: Vec<Value> = log_lines(&out.stderr);
    let good_start = ["supervisor", "starting", "sandbox", "stale_tmpdirs_removed"];
    assert!(!events.iter().any(|v| good_start.iter().any(|g| v["event"] == *g)), "{stderr}");
    assert!(stderr.trim_end().ends_with("the address is already in use"), "{stderr}");
}

/// `--root /` serves every file the user can read: allowed, but said.
#[test]
fn the_filesystem_root_as_the_root_is_warned_about() {
    let p = Project::new();
    for (root, warned) in [(std::path::PathBuf::from("/"), true), (p.root(), false)] {
        let out = with_root(&p, &root).arg("--stdio").stdin(Stdio::null()).output().unwrap();
        let lines = log_lines(&out.stderr);
        let said = lines.iter().any(|v| {
            v["event"] == "config_warning"
                && v["message"].as_str().is_some_and(|m| m.contains("the filesystem root '/'"))
        });
        assert_eq!(said, warned, "{root:?}: {lines:?}");
    }
}

/// A relative `--root` is resolved against the working directory: the
/// server starts on the right directory and says so once, without a path.
#[test]
fn a_relative_root_is_resolved_and_logged_once() {
    let p = Project::new();
    let relative = p.root().strip_prefix(p.dir.path()).unwrap().to_path_buf();
    let out = with_root(&p, &relative)
        .current_dir(p.dir.path())
        .arg("--stdio")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines = log_lines(&out.stderr);
    let resolved: Vec<&Value> =
        lines.iter().filter(|v| v["event"] == "relative_path_resolved").collect();
    assert_eq!(resolved.len(), 1, "{lines:?}");
    assert_eq!(resolved[0]["setting"], "SERVERFS_ROOT (--root)");
    assert!(!resolved[0].to_string().contains(&*p.dir.path().to_string_lossy()));
    let starting = lines.iter().find(|v| v["event"] == "starting").expect("a starting line");
    assert_eq!(starting["root"], p.root().to_string_lossy().as_ref(), "{starting}");
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
    assert_eq!(audit.len(), 4, "{lines:?}");
    assert_eq!(audit[0]["level"], "INFO");
    assert_eq!(audit[0]["tool"], "bash");
    assert_eq!(audit[0]["principal"], "stdio");
    assert_eq!(audit[0]["command"], "echo audit-me; exit 4");
    assert_eq!(audit[0]["status"], "exit 4");
    assert!(audit[0]["duration_ms"].is_u64(), "{}", audit[0]);
    assert_eq!(
        (audit[1]["tool"].as_str(), audit[1]["status"].as_str()),
        (Some("shell_open"), Some("opened"))
    );
    assert!(audit[1].get("command").is_none(), "{}", audit[1]);
    assert_eq!(audit[2]["tool"], "shell_write");
    assert_eq!(audit[2]["command"], "true\n");
    assert_eq!(audit[2]["status"], "written");
    assert_eq!(audit[1]["session"], audit[2]["session"]);
    assert_eq!(
        (audit[3]["tool"].as_str(), audit[3]["status"].as_str()),
        (Some("bash"), Some("running"))
    );
    // At shutdown both sessions are closed by the server, and end.
    let by: Vec<&Value> = lines.iter().filter(|v| v["event"] == "session_closed").collect();
    assert!(by.len() == 2 && by.iter().all(|v| v["by"] == "shutdown"), "{lines:?}");

    // The operator may leave the command text out; the rest stays.
    let lines = commands_logged(&p, &[("SERVERFS_AUDIT_COMMAND_TEXT", "false")]);
    let audit: Vec<&Value> = lines.iter().filter(|v| v["event"] == "command").collect();
    assert_eq!(audit.len(), 4, "{lines:?}");
    for line in audit {
        assert!(line.get("command").is_none(), "{line}");
        assert!(line["status"].is_string() && line["principal"] == "stdio", "{line}");
    }
    assert!(!lines.iter().any(|v| v.to_string().contains("audit-me")), "{lines:?}");
}

/// serverfs-dev refuses to start from below a path commands may write
/// (a command could replace the program, and the next start would run
/// that): the root, a `--command-writable` path, `/tmp`, the commands'
/// `TMPDIR` parent. Exit 2, one line naming the place and the fix.
/// Control: the same copy started from a directory commands cannot write
/// (beside the test's state dir) starts.
#[test]
fn a_program_where_commands_may_write_is_refused() {
    let p = Project::new();
    let cache = p.root().parent().unwrap().join("outside");
    let below_tmp = tempfile::tempdir_in("/tmp").unwrap();
    let tmpdir = p.private.path().join("tmpdir");
    for (dir, place, extra, env) in [
        (p.root().join("bin"), "the project root", vec![], None),
        (
            cache.join("bin"),
            "a --command-writable path (SERVERFS_COMMAND_WRITABLE)",
            vec!["--command-writable".to_owned(), cache.display().to_string()],
            None,
        ),
        (below_tmp.path().join("bin"), "/tmp", vec![], None),
        (tmpdir.join("bin"), "the commands' TMPDIR parent ($TMPDIR)", vec![], Some(&tmpdir)),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("serverfs-dev");
        serverfs_test_support::copy_program(common::BIN, &copy);
        let mut cmd = std::process::Command::new(&copy);
        cmd.args(p.command().get_args()).args(&extra).arg("--stdio");
        cmd.env("XDG_STATE_HOME", p.xdg());
        if let Some(tmpdir) = env {
            cmd.env("TMPDIR", tmpdir);
        }
        let line = start_error(&p, cmd);
        assert_eq!(
            line,
            format!(
                "serverfs-dev: config error: {place}: the program serverfs-dev lies below it, \
                 where commands may write: a command could replace it, and the next start \
                 would run that unconfined; install serverfs-dev where commands cannot write \
                 (e.g. /usr/local/bin), or build it there (CARGO_TARGET_DIR)"
            ),
        );
    }
    let elsewhere = p.private.path().join("bin");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let copy = elsewhere.join("serverfs-dev");
    serverfs_test_support::copy_program(common::BIN, &copy);
    let mut cmd = std::process::Command::new(&copy);
    cmd.args(p.command().get_args()).arg("--stdio").env("XDG_STATE_HOME", p.xdg());
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
