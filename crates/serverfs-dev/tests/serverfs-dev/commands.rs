//! serverfs-dev's commands end to end: the real binary, real processes.
//! After every call that started something, `/proc` is scanned for the
//! call's uniquely tagged `sleep`: nothing may survive the call.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    ALICE, BOB, HttpServer, Project, RawStdio, assert_none_survive, call, error_code, ok, tag,
    wait_until_running,
};
use serde_json::{Value, json};

#[tokio::test]
async fn bash_results_and_nothing_survives_a_call() {
    let p = Project::new();
    let client = p.stdio_client().await;
    let v = ok(&client, "bash", json!({"command": "echo out; echo err >&2; exit 7"})).await;
    assert_eq!(v["exit_code"], 7);
    assert_eq!(v["stdout"], "out\n");
    assert_eq!(v["stderr"], "err\n");
    assert_eq!(v["timed_out"], false);
    let v = ok(&client, "bash", json!({"command": "pwd", "workdir": "src"})).await;
    assert!(v["stdout"].as_str().unwrap().ends_with("/src\n"), "{v}");
    for shape in [
        "sleep {} & exit 0",
        "setsid sleep {} &",
        "( (sleep {} &) & )",
        "nohup sleep {} >/dev/null 2>&1 &",
        "sleep {} & echo started",
    ] {
        let t = tag();
        let v = ok(&client, "bash", json!({"command": shape.replace("{}", &t)})).await;
        assert_eq!(v["exit_code"], 0, "{shape}: {v}");
        assert_none_survive(&t);
    }
    // A command that kills its own supervisor: its orphans come back to
    // the server, which kills them.
    let t = tag();
    let command = format!("sleep {t} & setsid sleep {t} & kill -9 $PPID; sleep {t}");
    let (_, v) = call(&client, "bash", json!({"command": command})).await;
    assert_none_survive(&t);
    let v2 = ok(&client, "bash", json!({"command": "echo still-serving"})).await;
    assert_eq!(v2["stdout"], "still-serving\n", "after {v}");
    let t = tag();
    let v =
        ok(&client, "bash", json!({"command": format!("sleep {t}"), "timeout_seconds": 1})).await;
    assert_eq!((v["timed_out"].clone(), v["exit_code"].clone()), (json!(true), Value::Null), "{v}");
    assert_eq!(v["signal"], "SIGKILL");
    assert_none_survive(&t);
    // cd and export do not carry over.
    ok(&client, "bash", json!({"command": "cd src && export FOO=bar"})).await;
    let v = ok(&client, "bash", json!({"command": "pwd; echo \"[$FOO]\""})).await;
    assert!(v["stdout"].as_str().unwrap().ends_with("/project\n[]\n"), "{v}");
    let host = p.dir.path();
    for (workdir, code) in [
        ("../outside", "PATH_OUTSIDE_WORKDIR"),
        (".git", "DENIED_PATH"),
        ("src/lib.rs", "NOT_A_DIRECTORY"),
    ] {
        assert_eq!(
            error_code(&client, "bash", json!({"command": "true", "workdir": workdir}), host).await,
            code
        );
    }
    assert_eq!(
        error_code(&client, "bash", json!({"command": "true", "timeout_seconds": 601}), host).await,
        "INVALID_ARGUMENT"
    );
    client.cancel().await.unwrap();
}

/// The server runs as a normal user (as root, /proc hides nothing from
/// anyone): as `nobody` through `setpriv` when the test runs as root.
#[tokio::test]
async fn the_server_s_secrets_do_not_reach_commands() {
    let p = Project::new();
    let as_root = rustix_euid_is_root();
    let mut cmd =
        if as_root { p.command_as_nobody() } else { tokio::process::Command::from(p.command()) };
    cmd.arg("--stdio")
        .env("SERVERFS_TOKEN", "fake-secret-token-0123456789abcdef")
        .env("OTHER_SECRET", "s3cr3t")
        .stderr(Stdio::null());
    let client = common::serve(cmd).await;
    // bash's parent is the supervisor; the supervisor's parent the server.
    let script = "id -u; env; for pid in $PPID $(ps -o ppid= $PPID); do \
        cat /proc/$pid/environ 2>&1 | tr '\\0' '\\n'; head -c 64 /proc/$pid/mem 2>&1; done";
    let v = ok(&client, "bash", json!({"command": script})).await;
    let out = v["stdout"].as_str().unwrap();
    eprintln!("OUT {out}");
    assert!(!out.contains("fake-secret-token") && !out.contains("s3cr3t"), "{out}");
    assert!(out.contains("PATH="), "{out}");
    if as_root {
        assert!(out.starts_with("65534\n"), "{out}");
    }
    client.cancel().await.unwrap();
}

fn rustix_euid_is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n")
}

#[tokio::test]
async fn the_command_policy_refuses_and_runs_nothing() {
    let p = Project::new();
    p.write("target.txt", "keep\n");
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.args(["--stdio", "--deny", "rm,curl"]).stderr(Stdio::null());
    let client = common::serve(cmd).await;
    let host = p.dir.path();
    for command in [
        "rm target.txt",
        "git status;rm -rf target.txt",
        "\"/usr/bin/rm\" target.txt",
        "r\\m target.txt",
        "echo $(rm target.txt)",
        "echo `rm target.txt`",
        "ls | rm target.txt",
        "true\nrm target.txt",
    ] {
        assert_eq!(
            error_code(&client, "bash", json!({"command": command}), host).await,
            "COMMAND_NOT_ALLOWED",
            "{command}"
        );
        assert_eq!(p.read("target.txt"), "keep\n", "{command}");
    }
    let session = ok(&client, "shell_open", json!({})).await;
    let id = session["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        error_code(
            &client,
            "shell_write",
            json!({"session_id": id, "input": "rm target.txt\n"}),
            host
        )
        .await,
        "COMMAND_NOT_ALLOWED"
    );
    ok(&client, "shell_close", json!({"session_id": id})).await;
    assert_eq!(p.read("target.txt"), "keep\n");
    let v = ok(&client, "bash", json!({"command": "cat target.txt"})).await;
    assert_eq!(v["stdout"], "keep\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn shell_sessions_keep_state_and_closing_kills_their_tree() {
    let p = Project::new();
    let client = p.stdio_client().await;
    let id = ok(&client, "shell_open", json!({"workdir": "src"})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32);
    ok(
        &client,
        "shell_write",
        json!({"session_id": id, "input": "export X=kept; echo \"$X $(basename $PWD)\"\n"}),
    )
    .await;
    let mut out = String::new();
    let mut offset = 0;
    while !out.contains("kept src") {
        let v =
            ok(&client, "shell_read", json!({"session_id": id, "offset": offset, "wait_ms": 5000}))
                .await;
        out.push_str(v["output"].as_str().unwrap());
        offset = v["next_offset"].as_u64().unwrap();
    }
    let listed = ok(&client, "shell_list", json!({})).await;
    assert_eq!(listed["sessions"][0]["session_id"], id.as_str());
    let t = tag();
    ok(
        &client,
        "shell_write",
        json!({"session_id": id, "input": format!("sleep {t} & setsid sleep {t} &\n")}),
    )
    .await;
    wait_until_running(&t);
    ok(&client, "shell_close", json!({"session_id": id})).await;
    assert_none_survive(&t);
    let (is_error, _) = call(&client, "shell_read", json!({"session_id": id})).await;
    assert!(is_error);
    // A session ended by a signal says so.
    let id = ok(&client, "shell_open", json!({})).await["session_id"].as_str().unwrap().to_owned();
    ok(&client, "shell_write", json!({"session_id": id, "input": "kill -9 $$\n"})).await;
    let v = loop {
        let v = ok(&client, "shell_read", json!({"session_id": id, "wait_ms": 5000})).await;
        if v["exited"] == true {
            break v;
        }
    };
    assert_eq!(
        (v["exit_code"].clone(), v["signal"].clone()),
        (Value::Null, json!("SIGKILL")),
        "{v}"
    );
    client.cancel().await.unwrap();
}

fn post(url: &str, body: Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-06-18")
        .body(body.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_client_that_disconnects_leaves_nothing_running() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let t = tag();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": format!("sleep {t} & sleep {t}")}}});
    let request = tokio::spawn(post(&server.url, body).send());
    tokio::task::spawn_blocking({
        let t = t.clone();
        move || wait_until_running(&t)
    })
    .await
    .unwrap();
    // The client gives up: its connection closes.
    request.abort();
    tokio::task::spawn_blocking(move || assert_none_survive(&t)).await.unwrap();
}

#[test]
fn a_stdio_cancel_notification_kills_the_command() {
    let p = Project::new();
    let mut server = RawStdio::start(&p);
    let t = tag();
    server
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash",
        "arguments": {"command": format!("(sleep {t} &); sleep {t}")}}}));
    wait_until_running(&t);
    server.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    assert_none_survive(&t);
    server.finish();
}

/// Peak resident memory of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_megabytes_on_each_stream_are_cut_and_memory_stays_flat() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let client = server.client().await;
    let flood = "head -c 10000000 /dev/zero | tr '\\0' a & yes é | tr -d '\\n' | head -c 10000000 >&2; wait";
    let v = ok(&client, "bash", json!({"command": flood})).await;
    assert_eq!(v["output_truncated"], true);
    assert_eq!(v["stdout"].as_str().unwrap().chars().count(), 16_000);
    let stderr = v["stderr"].as_str().unwrap();
    assert_eq!(stderr.chars().count(), 16_000, "never a split character");
    assert!(stderr.chars().all(|c| c == 'é'));
    // Twenty megabytes went through the server; it kept a few kilobytes.
    let peak = peak_rss_kib(server.pid());
    assert!(peak < 64 * 1024, "server peak RSS {peak} KiB");
    client.cancel().await.unwrap();
}

/// A long command reports progress to a client that sent a progress token
/// (every 5 s, so a 6 s command reports at least once), then its result.
#[test]
fn a_long_command_reports_progress_over_stdio() {
    let p = Project::new();
    let mut server = RawStdio::start(&p);
    // It waits for the file `go` (the test's event, not a clock).
    let command =
        "echo first; echo 'second line'; while [ ! -e go ]; do sleep 0.05; done; echo done";
    server
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash",
        "arguments": {"command": command}, "_meta": {"progressToken": "p-1"}}}));
    let mut progress = Vec::new();
    let answer = loop {
        let v = server.next();
        if v["method"] == "notifications/progress" {
            progress.push(v["params"].clone());
            std::fs::write(p.path("go"), "").unwrap();
        } else if v["id"] == 2 {
            break v;
        }
    };
    let stdout = &answer["result"]["structuredContent"]["stdout"];
    assert_eq!(stdout, "first\nsecond line\ndone\n", "{answer}");
    assert!(!progress.is_empty(), "no progress notification");
    assert!(
        progress.iter().all(|p| p["progressToken"] == "p-1" && p["total"] == 30.0),
        "{progress:?}"
    );
    // What it is doing: its lines so far and the last one.
    assert_eq!(progress[0]["message"], "2 lines of output; last: second line", "{progress:?}");
    server.finish();
}

/// Reads a session from `offset` until it has exited: (output, last answer).
async fn read_to_exit(client: &common::Client, id: &str, mut offset: u64) -> (String, Value) {
    let mut out = String::new();
    loop {
        let v =
            ok(client, "shell_read", json!({"session_id": id, "offset": offset, "wait_ms": 5000}))
                .await;
        out.push_str(v["output"].as_str().unwrap());
        offset = v["next_offset"].as_u64().unwrap();
        if v["exited"] == true && v["more"] == false {
            return (out, v);
        }
    }
}

/// A command that prints, then waits for the file `go` in the root (the
/// test's event, not a clock), then prints again and exits 3.
const GATED: &str =
    "echo first; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; echo rest; exit 3";

/// The yielded answer of `GATED`, checked; returns the session id.
fn check_yielded(v: &Value) -> String {
    assert_eq!(v["running"], true, "{v}");
    assert_eq!((v["stdout"].as_str(), v["stderr"].as_str()), (Some("first\n"), Some("oops\n")));
    assert_eq!((v["exit_code"].clone(), v["next_offset"].clone()), (Value::Null, json!(11)));
    let id = v["session_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_bash_call_yields_and_goes_on_as_the_caller_s_session() {
    use rmcp::model::CallToolRequestParams;
    let p = Project::new();
    let client = p.stdio_client().await;
    let args = json!({"command": GATED, "yield_after_seconds": 1});
    let result = client
        .call_tool(
            CallToolRequestParams::new("bash").with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let v = result.structured_content.clone().unwrap();
    let id = check_yielded(&v);
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"].clone();
    let hint = format!(
        "[still running as session {id}; read more with shell_read(session_id={id}, offset=11)]"
    );
    assert!(text.as_str().unwrap().contains(&hint), "{text}");
    assert_eq!(ok(&client, "shell_list", json!({})).await["sessions"][0]["session_id"], id);
    let write = json!({"session_id": id, "input": "echo more\n"});
    assert_eq!(error_code(&client, "shell_write", write, p.dir.path()).await, "INVALID_ARGUMENT");
    std::fs::write(p.path("go"), "").unwrap();
    let (rest, end) = read_to_exit(&client, &id, 11).await;
    assert_eq!(rest, "rest\n");
    assert_eq!(end["exit_code"], 3, "{end}");
    ok(&client, "shell_close", json!({"session_id": id})).await;

    // One that ends first answers as before: no new field.
    let v = ok(&client, "bash", json!({"command": "echo quick", "yield_after_seconds": 1})).await;
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["exit_code", "output_truncated", "stderr", "stdout", "timed_out"], "{v}");
    for bad in [0, 601] {
        let args = json!({"command": "true", "yield_after_seconds": bad});
        assert_eq!(error_code(&client, "bash", args, p.dir.path()).await, "INVALID_ARGUMENT");
    }

    // Its own timeout still kills it, tree and all.
    let t = tag();
    let command = format!("sleep {t} & setsid sleep {t}");
    let args = json!({"command": command, "yield_after_seconds": 1, "timeout_seconds": 2});
    let v = ok(&client, "bash", args).await;
    assert_eq!(v["running"], true, "{v}");
    let (_, end) = read_to_exit(&client, v["session_id"].as_str().unwrap(), 0).await;
    assert_eq!((end["exit_code"].clone(), end["signal"].clone()), (Value::Null, json!("SIGKILL")));
    assert_none_survive(&t);

    // shell_close kills it, tree and all.
    let t = tag();
    let args =
        json!({"command": format!("sleep {t} & setsid sleep {t}"), "yield_after_seconds": 1});
    let v = ok(&client, "bash", args).await;
    wait_until_running(&t);
    ok(&client, "shell_close", json!({"session_id": v["session_id"]})).await;
    assert_none_survive(&t);

    // So does its owner's disconnect (the stdio server exits).
    let t = tag();
    let args = json!({"command": format!("sleep {t} & sleep {t}"), "yield_after_seconds": 1});
    assert_eq!(ok(&client, "bash", args).await["running"], true);
    wait_until_running(&t);
    client.cancel().await.unwrap();
    assert_none_survive(&t);
}

/// The issue's case: a client that gives up at 60 s runs a command allowed
/// 120 s over HTTP. The first call answers at the default yield point
/// (30 s), well inside the client's patience; polling gets the rest.
#[tokio::test(flavor = "multi_thread")]
async fn over_http_a_command_longer_than_the_client_waits_is_polled_to_its_end() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let client = server.client().await;
    let started = Instant::now();
    let v = ok(&client, "bash", json!({"command": GATED, "timeout_seconds": 120})).await;
    assert!(started.elapsed() < Duration::from_secs(55), "answered after {:?}", started.elapsed());
    let id = check_yielded(&v);
    std::fs::write(p.path("go"), "").unwrap();
    let (rest, end) = read_to_exit(&client, &id, 11).await;
    assert_eq!((rest.as_str(), end["exit_code"].clone()), ("rest\n", json!(3)), "{end}");
    ok(&client, "shell_close", json!({"session_id": id})).await;
    client.cancel().await.unwrap();
}

/// The command line of a command's parent, the supervisor (read from
/// outside: the command's own `/proc` hides it).
async fn supervisor_argv(client: &common::Client, p: &Project) -> String {
    let parent = serverfs_test_support::ParentArgv::new(&p.root());
    let command = format!("{}true", parent.prefix());
    let (v, argv) = tokio::join!(ok(client, "bash", json!({"command": command})), parent.read());
    assert_eq!(v["exit_code"], 0, "{v}");
    argv
}

/// Commands run under the small `serverfs-dev-supervisor` installed beside
/// the server; a server binary copied alone runs them under itself
/// (`__supervise`), with the same guarantee that nothing survives. Either
/// way from the sealed copy made at start (`/proc/self/fd/N` of the
/// server), never from the file.
#[tokio::test]
async fn the_supervisor_is_the_program_beside_the_server_or_the_server_itself() {
    let p = Project::new();
    let client = p.stdio_client().await;
    let argv = supervisor_argv(&client, &p).await;
    let sealed_copy = |argv: &str| {
        let rest = argv.strip_prefix("/proc/self/fd/")?;
        let digits = rest.find(' ')?;
        rest[..digits].parse::<u32>().ok()?;
        Some(rest[digits + 1..].to_owned())
    };
    let args = sealed_copy(&argv).unwrap_or_else(|| panic!("not the sealed copy: {argv}"));
    assert!(args.starts_with("--serverfs-exec="), "not the program beside the server: {argv}");
    drop(client);

    // Not below /tmp: serverfs-dev refuses to start where commands may write.
    let alone = common::private_dir();
    let bin = alone.path().join("serverfs-dev");
    serverfs_test_support::copy_program(common::BIN, &bin);
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.arg("--root").arg(p.root()).arg("--state-dir").arg(p.state()).arg("--stdio");
    cmd.env_remove("SERVERFS_TOKEN").env("XDG_STATE_HOME", p.xdg()).stderr(Stdio::null());
    let client = common::serve(cmd).await;
    let argv = supervisor_argv(&client, &p).await;
    let args = sealed_copy(&argv).unwrap_or_else(|| panic!("not the sealed copy: {argv}"));
    assert!(args.starts_with("__supervise --serverfs-exec="), "not the server itself: {argv}");
    let t = tag();
    let v = ok(&client, "bash", json!({"command": format!("setsid sleep {t} & exit 0")})).await;
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_none_survive(&t);
}

/// A POST of `message` to `url` as the holder of `bearer`, in the
/// 2025-11-25 era (no session: every POST stands alone).
fn post_as(url: &str, bearer: &str, message: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-11-25")
        .header("Authorization", format!("Bearer {bearer}"))
        .body(message.to_string())
}

fn cancel_of(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "test"}})
}

/// `notifications/cancelled` in a POST of its own (stateless HTTP, the
/// 2025-11-25 era) stops the command of the request it names, whether that
/// request's answer is still pending or already streaming progress; that
/// POST then ends without an answer, as the protocol asks.
/// The same cancel from another caller does nothing. Nothing is logged
/// as an ERROR.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_cancel_notification_stops_only_its_own_callers_command() {
    let p = Project::new();
    let cmd = p.command_for_alice_and_bob();
    let serverfs_test_support::Listening { child: _child, addr, log, .. } =
        serverfs_test_support::listen(cmd, Duration::from_secs(30));
    let (lines, cancel_lines) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in log.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && (v["event"] == "cancelled" || v["level"] == "ERROR")
            {
                let _ = lines.send(v);
            }
        }
    });
    let url = format!("http://{addr}/mcp");
    let bash = |id: u64, t: &str, progress: bool| {
        let mut params = json!({"name": "bash",
            "arguments": {"command": format!("sleep {t} & sleep {t}"), "timeout_seconds": 600}});
        if progress {
            params["_meta"] = json!({"progressToken": id});
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };

    // Pending: no progress asked for, so nothing is sent before the end.
    let pending = tag();
    let call = tokio::spawn(post_as(&url, ALICE, &bash(7, &pending, false)).send());
    let t = pending.clone();
    tokio::task::spawn_blocking(move || wait_until_running(&t)).await.unwrap();
    // Bob names Alice's request id: nothing happens to it.
    let bob = post_as(&url, BOB, &cancel_of(7)).send().await.unwrap();
    assert_eq!(bob.status(), 202);
    assert!(!serverfs_test_support::pids_with(&pending).is_empty(), "bob's cancel stopped it");
    assert!(cancel_lines.try_recv().is_err(), "bob's cancel was taken");
    let alice = post_as(&url, ALICE, &cancel_of(7)).send().await.unwrap();
    assert_eq!(alice.status(), 202);
    let t = pending.clone();
    tokio::task::spawn_blocking(move || assert_none_survive(&t)).await.unwrap();
    let response = call.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(!body.contains("\"result\""), "a cancelled request has no answer: {body}");
    let line = cancel_lines.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (line["principal"].as_str(), line["request_id"].as_str()),
        (Some("token:alice"), Some("7"))
    );

    // Streaming: the answer is an event stream already carrying progress.
    let streaming = tag();
    let mut response = post_as(&url, ALICE, &bash(8, &streaming, true)).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = response.chunk().await.unwrap().expect("the stream ended before any progress");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let alice = post_as(&url, ALICE, &cancel_of(8)).send().await.unwrap();
    assert_eq!(alice.status(), 202);
    let t = streaming.clone();
    tokio::task::spawn_blocking(move || assert_none_survive(&t)).await.unwrap();
    while let Some(chunk) = response.chunk().await.unwrap() {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!seen.contains("\"result\""), "a cancelled request has no answer: {seen}");
    // A cancelled call is logged at INFO; nothing is an ERROR.
    let line = cancel_lines.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (line["event"].as_str(), line["request_id"].as_str()),
        (Some("cancelled"), Some("8"))
    );
    assert!(cancel_lines.try_recv().is_err(), "an ERROR line was logged");
}

/// Posts tools/list to the URL in argv[1] (with argv[2], when given, as a
/// bearer token); prints the HTTP status, or `refused`, the error's type
/// and its status when there is one.
const CALL_OWN_SERVER: &str = r#"import sys, urllib.request
body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
    "Mcp-Protocol-Version": "2025-11-25"}
if len(sys.argv) > 2:
    headers["Authorization"] = "Bearer " + sys.argv[2]
request = urllib.request.Request(sys.argv[1], data=body, headers=headers)
try:
    print(urllib.request.urlopen(request, timeout=30).status)
except Exception as e:
    print("refused", type(e).__name__, getattr(e, "code", ""))
"#;

/// Over loopback HTTP without a configured credential, `/mcp` admits only
/// the token the server drew for this start, from a file in its state dir
/// that every command's view covers: a command finds the directory empty,
/// and its call to its own server, with no token or a made-up one, is
/// refused (401), however it routes it. The controls: a process that is
/// not the server's reads the file, and its call with the token (in the
/// query, and in the `Authorization` header) is answered, without it 401.
/// As this user and, when the tests run as root, as `nobody`.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_call_its_own_server() {
    let root = std::process::Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let runs: &[bool] = if root { &[false, true] } else { &[false] };
    for &as_nobody in runs {
        // Each its own project: the state dirs one server made are its user's.
        let p = Project::new();
        p.write("call.py", CALL_OWN_SERVER);
        let command = if as_nobody { p.as_nobody(&p.command()) } else { p.command() };
        let as_whom = if as_nobody { "as nobody" } else { "as this user" };
        let server = HttpServer::start_with(command);
        let token = server.local_token.clone().expect("a local token");
        let port = server.addr.rsplit(':').next().unwrap();
        let file = p.state().join(format!("local-token.{port}"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), token, "{as_whom}");
        let bare = format!("http://{}/mcp", server.addr);
        let call = |args: &[&str]| {
            let out = std::process::Command::new("python3")
                .arg(p.path("call.py"))
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        assert_eq!(call(&[&server.url]), "200", "control, token in the query {as_whom}");
        assert_eq!(call(&[&bare, &token]), "200", "control, token in the header {as_whom}");
        assert_eq!(call(&[&bare]), "refused HTTPError 401", "control, no token {as_whom}");
        let client = server.client().await;
        let command = format!(
            "ls -A {state}; cat {file}; echo; python3 call.py {bare}; python3 call.py {bare}?token=0000000000000000",
            state = p.state().display(),
            file = file.display(),
        );
        let v = ok(&client, "bash", json!({"command": command})).await;
        let stdout = v["stdout"].as_str().unwrap();
        assert!(!stdout.contains(&token), "{as_whom}: the command read the token: {v}");
        assert_eq!(stdout.trim(), "refused HTTPError 401\nrefused HTTPError 401", "{as_whom}: {v}");
        assert!(v["stderr"].as_str().unwrap().contains("No such file"), "{as_whom}: {v}");
        client.cancel().await.unwrap();
    }
}

/// Where commands get no view of their own (here the server runs in a user
/// namespace whose `max_mnt_namespaces` is 0), they could read the local
/// token's file: start-up says so, WARN, naming the fix. Control: the same
/// server with its view says nothing of the kind.
#[test]
fn without_a_view_the_local_token_comes_with_a_warning() {
    let p = Project::new();
    let start = |max_mnt_namespaces: &str| {
        let server = p.command();
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["--user", "--map-root-user", "sh", "-c"])
            .arg(format!(
                "echo {max_mnt_namespaces} > /proc/sys/user/max_mnt_namespaces && exec \"$@\""
            ))
            .arg("sh")
            .arg(server.get_program())
            .args(server.get_args())
            .env("XDG_STATE_HOME", p.xdg());
        let started = serverfs_test_support::listen(cmd, Duration::from_secs(30));
        assert!(started.local_token.is_some());
        started.start_up
    };
    let warned = |lines: &[String]| {
        lines
            .iter()
            .any(|l| l.contains(r#""level":"WARN""#) && l.contains("can read the local token"))
    };
    let without_view = start("0");
    assert!(warned(&without_view), "{without_view:#?}");
    let with_view = start("1000");
    assert!(!warned(&with_view), "{with_view:#?}");
}

/// Over authenticated HTTP no principal holds every command slot: with two
/// slots and alice's first command running, her second is kept from the
/// last slot (it waits its bounded 30 s, then SERVER_BUSY) and bob's command
/// then runs at once. Without the fair share alice's second takes the last
/// slot and runs (this test then waits for its answer in vain).
#[tokio::test(flavor = "multi_thread")]
async fn one_principal_never_holds_every_command_slot() {
    let p = Project::new();
    let mut cmd = p.command_for_alice_and_bob();
    cmd.args(["--max-concurrent-commands", "2"]);
    let serverfs_test_support::Listening { child: _child, addr, log: _log, .. } =
        serverfs_test_support::listen(cmd, Duration::from_secs(30));
    let url = format!("http://{addr}/mcp");
    // No yield: a command yielding to a session gives its slot back.
    let bash = |id: u64, command: String| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "bash",
            "arguments": {"command": command, "timeout_seconds": 600, "yield_after_seconds": 600}}})
    };
    let (first, second) = (tag(), tag());
    let _alice_1 = tokio::spawn(post_as(&url, ALICE, &bash(1, format!("sleep {first}"))).send());
    let t = first.clone();
    tokio::task::spawn_blocking(move || wait_until_running(&t)).await.unwrap();
    let alice_2 = post_as(&url, ALICE, &bash(2, format!("sleep {second}"))).send();
    let answer = tokio::time::timeout(Duration::from_secs(120), alice_2)
        .await
        .expect("alice's second command took the last slot and ran")
        .unwrap();
    let body = answer.text().await.unwrap();
    assert!(body.contains("SERVER_BUSY"), "{body}");
    assert!(serverfs_test_support::pids_with(&second).is_empty());
    let bob = post_as(&url, BOB, &bash(3, "echo bob-ran".into())).send().await.unwrap();
    let body = bob.text().await.unwrap();
    assert!(body.contains("bob-ran"), "bob's command did not run: {body}");
}
