//! Start-up configuration through the real binary: the Docker slot layout,
//! and every kind of bad setting exiting 2 with one line that names the
//! slot or setting and never a host path.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

const SENTINEL: &str = ".serverfs-disabled";

/// `dir/01`…`dir/16`, all disabled like Compose's `.empty` mounts.
fn slots(dir: &Path) {
    for n in 1..=16 {
        let slot = dir.join(format!("{n:02}"));
        std::fs::create_dir_all(&slot).unwrap();
        std::fs::write(slot.join(SENTINEL), "").unwrap();
    }
}

fn enable(dir: &Path, n: u32) {
    std::fs::remove_file(dir.join(format!("{n:02}")).join(SENTINEL)).unwrap();
}

/// Runs the binary to completion (it must fail fast) with `env`; the one
/// line it printed, which must not name `dir` (start-up errors never show
/// host paths, not even one the operator typed).
fn run_failing(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("SERVERFS_WORKDIRS_DIR", dir)
        .env("SERVERFS_LISTEN", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "expected exit 2, got {:?}: {stderr}", out.status);
    // Warnings (running as root, a token file others can read) may come
    // first; the error is one line.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains(r#""event":"config_warning""#))
        .collect();
    assert_eq!(lines.len(), 1, "expected one line: {stderr}");
    assert!(!lines[0].contains(&*dir.to_string_lossy()), "host path in: {}", lines[0]);
    lines[0].to_owned()
}

#[test]
fn slot_errors_name_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    slots(dir.path());
    // alias set but nothing mounted (sentinel present)
    let line = run_failing(dir.path(), &[("WORKDIR_03_ALIAS", "logs")], &[]);
    assert!(line.contains("slot 03:"), "{line}");
    // mounted but no alias
    enable(dir.path(), 4);
    let line = run_failing(dir.path(), &[("WORKDIR_01_ALIAS", "")], &[]);
    assert!(line.contains("slot 04:"), "{line}");
    // invalid and duplicate aliases
    enable(dir.path(), 5);
    let line =
        run_failing(dir.path(), &[("WORKDIR_04_ALIAS", "ok"), ("WORKDIR_05_ALIAS", "../x")], &[]);
    assert!(line.contains("slot 05:") && line.contains("invalid"), "{line}");
    let line =
        run_failing(dir.path(), &[("WORKDIR_04_ALIAS", "same"), ("WORKDIR_05_ALIAS", "same")], &[]);
    assert!(line.contains("slot 05:") && line.contains("slot 04"), "{line}");
    // a slot directory missing
    std::fs::remove_dir_all(dir.path().join("16")).unwrap();
    let line =
        run_failing(dir.path(), &[("WORKDIR_04_ALIAS", "a"), ("WORKDIR_05_ALIAS", "b")], &[]);
    assert!(line.contains("slot 16:"), "{line}");
}

#[test]
fn bad_settings_name_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    slots(dir.path());
    enable(dir.path(), 1);
    let base = [("WORKDIR_01_ALIAS", "projects")];
    for (key, value) in [
        ("SERVERFS_MAX_READ_BYTES", "abc"),
        ("SERVERFS_MAX_READ_BYTES", "-1"),
        ("SERVERFS_MAX_READ_BYTES", "0"),
        ("SERVERFS_MAX_READ_LINES", "0"),
        ("SERVERFS_MAX_WALK_ENTRIES", "1e9"),
        ("SERVERFS_SEARCH_TIMEOUT_SECONDS", "0"),
        ("SERVERFS_DEFAULT_LIST_LIMIT", "501"),
        ("SERVERFS_DEFAULT_SEARCH_RESULTS", "101"),
        ("SERVERFS_ALLOW_HIDDEN", "maybe"),
        ("SERVERFS_LOG_LEVEL", "LOUD"),
        ("SERVERFS_LISTEN", "not-an-address"),
        ("SERVERFS_EXTRA_DENY_GLOBS", "[unclosed"),
        ("SERVERFS_EXTRA_DENY_GLOBS", "logs,../x"),
        ("SERVERFS_EXTRA_DENY_GLOBS", "ok,/"),
        ("SERVERFS_MAX_CONCURRENT_SEARCHES", "0"),
        ("SERVERFS_MAX_CONCURRENT_READS", "100000"),
        ("SERVERFS_MAX_CONCURRENT_LOOKUPS", "0"),
        ("SERVERFS_BUSY_WAIT_SECONDS", "0"),
        ("SERVERFS_HTTP_HEADER_TIMEOUT_SECONDS", "0"),
        ("SERVERFS_HTTP_HEADER_TIMEOUT_SECONDS", "soon"),
        ("SERVERFS_HTTP_BODY_TIMEOUT_SECONDS", "0"),
        ("SERVERFS_HTTP_BODY_TIMEOUT_SECONDS", "86401"),
        ("SERVERFS_MAX_CONNECTIONS", "0"),
        ("SERVERFS_MAX_CONNECTIONS", "-4"),
        ("SERVERFS_TOKEN", ""),
    ] {
        let mut env = base.to_vec();
        env.push((key, value));
        let line = run_failing(dir.path(), &env, &[]);
        assert!(line.contains(key), "{key}={value}: {line}");
    }
    // A setting with a fixed set of values lists them.
    for (key, value, values) in [
        ("SERVERFS_ALLOW_HIDDEN", "maybe", "true, false"),
        ("SERVERFS_TEXT_OUTPUT", "yaml", "compact, json"),
    ] {
        let mut env = base.to_vec();
        env.push((key, value));
        let line = run_failing(dir.path(), &env, &[]);
        assert!(
            line.ends_with(&format!("invalid value '{value}': expected one of {values}")),
            "{line}"
        );
    }
}

#[test]
fn token_errors_never_show_the_token_or_its_path() {
    let dir = tempfile::tempdir().unwrap();
    slots(dir.path());
    enable(dir.path(), 1);
    let alias = ("WORKDIR_01_ALIAS", "projects");
    let file = dir.path().join("token");
    let file_arg = file.to_string_lossy().into_owned();
    // unreadable (missing) file; run_failing also checks no host path leaks
    let line = run_failing(dir.path(), &[alias], &["--token-file", &file_arg]);
    assert!(line.contains("SERVERFS_TOKEN_FILE"), "{line}");
    let line = run_failing(dir.path(), &[alias, ("SERVERFS_TOKEN_FILE", &file_arg)], &[]);
    assert!(line.contains("SERVERFS_TOKEN_FILE"), "{line}");
    // empty, or only a newline
    for text in ["", "\n"] {
        std::fs::write(&file, text).unwrap();
        let line = run_failing(dir.path(), &[alias], &["--token-file", &file_arg]);
        assert!(line.contains("SERVERFS_TOKEN_FILE") && line.contains("empty"), "{line}");
    }
    // characters a header cannot carry safely
    std::fs::write(&file, "secret with-space\n").unwrap();
    let line = run_failing(dir.path(), &[alias], &["--token-file", &file_arg]);
    assert!(line.contains("SERVERFS_TOKEN_FILE") && !line.contains("secret"), "{line}");
    let line = run_failing(dir.path(), &[alias, ("SERVERFS_TOKEN", "secret,comma")], &[]);
    assert!(line.contains("SERVERFS_TOKEN") && !line.contains("secret"), "{line}");
    // both sources at once
    std::fs::write(&file, "fine-token-0123456789\n").unwrap();
    let line = run_failing(
        dir.path(),
        &[alias, ("SERVERFS_TOKEN", "fine-token-0123456789")],
        &["--token-file", &file_arg],
    );
    assert!(line.contains("SERVERFS_TOKEN") && line.contains("is set too; use one"), "{line}");
    assert!(!line.contains("fine-token-0123456789"), "{line}");
}

#[test]
fn connection_cap_must_fit_the_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let out = Command::new("sh")
        .args(["-c", "ulimit -n 200 && exec \"$0\" \"$@\"", BIN, "--listen", "127.0.0.1:0"])
        .args(["--workdir", &format!("a={}", real.display()), "--max-connections", "100"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SERVERFS_MAX_CONNECTIONS") && stderr.contains("200"), "{stderr}");
}

#[test]
fn workdir_flag_errors() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let arg = format!("a={}", real.display());
    assert!(run_failing(dir.path(), &[], &["--workdir", &arg, "--workdir", &arg]).contains("'a'"));
    assert!(run_failing(dir.path(), &[], &["--workdir", "bad alias=/tmp"]).contains("invalid"));
    let missing_path = dir.path().join("missing");
    let missing = format!("m={}", missing_path.display());
    let line = run_failing(dir.path(), &[], &["--workdir", &missing]);
    assert_eq!(line, "serverfs-mcp: config error: --workdir 'm': the directory does not exist");
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let line = run_failing(dir.path(), &[], &["--workdir", &format!("f={}", file.display())]);
    assert_eq!(line, "serverfs-mcp: config error: --workdir 'f': the path is not a directory");
    std::fs::write(real.join(SENTINEL), "").unwrap();
    assert!(run_failing(dir.path(), &[], &["--workdir", &arg]).contains(SENTINEL));
    // A '~' the shell did not expand (quoted, or from a unit file).
    let line = run_failing(dir.path(), &[], &["--workdir", "h=~/no-such-serverfs-dir"]);
    assert_eq!(
        line,
        "serverfs-mcp: config error: --workdir 'h': the directory does not exist (it starts \
         with '~', which only a shell expands, and not inside quotes or an environment file: \
         use $HOME or the full path)"
    );
}

/// `--workdir x=/` serves every file the user can read: allowed, but said.
#[test]
fn the_filesystem_root_as_a_workdir_is_warned_about() {
    let fx = Fixture::new();
    let root_warning = |w: &String| w.contains("is the filesystem root '/'");
    let (child, log) = start_logged(&["--workdir", "all=/", "--listen", "127.0.0.1:0"], &[]);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(warnings.iter().any(root_warning), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.starts_with("--workdir 'all' is")), "{warnings:?}");
    let workdir = fx.workdir_arg();
    let (child, log) = start_logged(&["--workdir", &workdir, "--listen", "127.0.0.1:0"], &[]);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(!warnings.iter().any(root_warning), "{warnings:?}");
}

/// A slot past the sixteenth is not served; start-up says so.
#[test]
fn a_seventeenth_slot_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    slots(dir.path());
    enable(dir.path(), 1);
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let env = [("WORKDIR_01_ALIAS", "one"), ("WORKDIR_17_ALIAS", "seventeen")];
    let args = ["--workdirs-dir", &dir_arg, "--listen", "127.0.0.1:0"];
    let (child, log) = start_logged(&args, &env);
    let warnings = warnings_until_listening(&log);
    stop(child);
    let said = "WORKDIR_17_ALIAS is set but only slots 01…16 exist: it is ignored";
    assert!(warnings.iter().any(|w| w.starts_with(said)), "{warnings:?}");
    let (child, log) = start_logged(&args, &env[..1]);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(!warnings.iter().any(|w| w.contains("WORKDIR_17")), "{warnings:?}");
}

/// `selfcheck` and `healthcheck` take the options after the subcommand too.
#[test]
fn subcommands_take_options_after_them() {
    let fx = Fixture::new();
    let workdir = fx.workdir_arg();
    for args in [["--workdir", &workdir, "selfcheck"], ["selfcheck", "--workdir", &workdir]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(report["workdirs"][0]["alias"], "test", "{args:?}: {report}");
    }
    let server = HttpServer::start(&["--workdir", &workdir]);
    let out = Command::new(BIN).args(["healthcheck", "--listen", &server.addr]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--listen` errors show the expected form, with what to type instead.
#[test]
fn listen_errors_show_the_expected_form() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let workdir = format!("a={}", real.display());
    for (value, hint) in [
        (
            "8000",
            "(a port alone is not enough: 0.0.0.0:8000 for every interface, 127.0.0.1:8000 for \
             this machine only)",
        ),
        (
            ":8000",
            "(a port alone is not enough: 0.0.0.0:8000 for every interface, 127.0.0.1:8000 for \
             this machine only)",
        ),
        ("localhost:18001", "(for localhost use 127.0.0.1:18001)"),
        ("example.org:80", "(a host name is not resolved; give its address)"),
        ("nonsense", "[::1]:8790"),
    ] {
        let line = run_failing(dir.path(), &[], &["--workdir", &workdir, "--listen", value]);
        let start = format!(
            "serverfs-mcp: config error: SERVERFS_LISTEN (--listen): invalid value '{value}': \
             expected HOST:PORT with HOST an IP address, e.g. 127.0.0.1:8790"
        );
        assert!(line.starts_with(&start) && line.ends_with(hint), "{line}");
    }
}

/// A relative `--workdir` path is resolved against the working directory
/// and said once at INFO, by alias, without the path.
#[test]
fn a_relative_workdir_is_resolved_and_logged_by_alias() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir.path());
    let (child, log) =
        start_logged_from(cmd, &["--workdir", "d=docs", "--listen", "127.0.0.1:0"], &[]);
    log.wait_for(std::time::Duration::from_secs(20), |v| v["event"] == "listening");
    stop(child);
    let lines = log.lines();
    let resolved: Vec<_> =
        lines.iter().filter(|v| v["event"] == "relative_path_resolved").collect();
    assert_eq!(resolved.len(), 1, "{lines:?}");
    assert_eq!(resolved[0]["workdir"], "d", "{}", resolved[0]);
    assert!(!resolved[0].to_string().contains(&*dir.path().to_string_lossy()), "{}", resolved[0]);
}

/// Run with nothing (no --workdir, no slot directory): the one line says
/// what to pass.
#[test]
fn no_arguments_says_to_pass_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("no-slots-here");
    let line = run_failing(&absent, &[], &[]);
    assert!(line.contains("--workdir ALIAS=PATH"), "{line}");
    assert!(!line.contains("slot 01"), "{line}");
}

#[tokio::test]
async fn sixteen_slots_serve_in_slot_order() {
    let dir = tempfile::tempdir().unwrap();
    slots(dir.path());
    let mut env: Vec<(String, String)> = Vec::new();
    for n in 1..=16u32 {
        enable(dir.path(), n);
        env.push((format!("WORKDIR_{n:02}_ALIAS"), format!("w{n:02}")));
    }
    env.push(("WORKDIR_02_DESCRIPTION".into(), "Application logs".into()));
    env.push(("SERVERFS_WORKDIRS_DIR".into(), dir.path().to_string_lossy().into_owned()));
    let env_ref: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = HttpServer::start_with_env(&[], &env_ref);
    let client = http_client(&server.url, rmcp::service::ClientLifecycleMode::Initialize).await;
    let (err, v) = call(&client, "list_workdirs", json!({})).await;
    assert!(!err);
    let aliases: Vec<&str> =
        v["workdirs"].as_array().unwrap().iter().map(|w| w["alias"].as_str().unwrap()).collect();
    let expected: Vec<String> = (1..=16).map(|n| format!("w{n:02}")).collect();
    assert_eq!(aliases, expected);
    assert_eq!(v["workdirs"][1]["description"], "Application logs");
    assert_eq!(v["workdirs"][0]["description"], serde_json::Value::Null);
    assert!(!v.to_string().contains("/0"), "slot paths leaked: {v}");
    client.cancel().await.unwrap();
}

/// Deny globs from the environment: every spelling denies what it names,
/// and a comma inside braces belongs to the glob.
#[tokio::test]
async fn configured_deny_globs_deny_what_they_name() {
    let fx = Fixture::new();
    let root = fx.root();
    for rel in ["secrets/a.txt", "conf/prod.yml", "conf/dev.yml", "a.txt", "b.txt", "c.txt"] {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x\n").unwrap();
    }
    let globs = "secrets/, conf//prod.yml, {a,b}.txt";
    let server = HttpServer::start_with_env(
        &["--workdir", &fx.workdir_arg()],
        &[("SERVERFS_EXTRA_DENY_GLOBS", globs)],
    );
    let client = http_client(&server.url, rmcp::service::ClientLifecycleMode::Initialize).await;
    for path in ["secrets", "secrets/a.txt", "conf/prod.yml", "a.txt", "b.txt"] {
        let args = json!({"workdir": "test", "path": path});
        assert_eq!(error_code(&client, "stat_file", args).await, "DENIED_PATH", "{path}");
    }
    for path in ["conf/dev.yml", "c.txt"] {
        let (err, v) = call(&client, "stat_file", json!({"workdir": "test", "path": path})).await;
        assert!(!err, "{path}: {v}");
    }
    client.cancel().await.unwrap();
}

/// The server started with `args` and `env`, and its whole log.
fn start_logged(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, Log) {
    start_logged_from(Command::new(BIN), args, env)
}

/// [`start_logged`] from `command` (the binary, e.g. in another directory).
fn start_logged_from(
    mut command: Command,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, Log) {
    let mut child = command
        .args(args)
        .env_remove("SERVERFS_TOKEN")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    (child, Log::collect(lines))
}

/// The messages of the `config_warning` lines logged before `listening`.
fn warnings_until_listening(log: &Log) -> Vec<String> {
    log.wait_for(std::time::Duration::from_secs(20), |v| v["event"] == "listening");
    let lines = log.lines();
    let until = lines.iter().take_while(|v| v["event"] != "listening");
    let warnings = until.filter(|v| v["event"] == "config_warning");
    warnings.map(|v| v["message"].as_str().unwrap().to_owned()).collect()
}

fn stop(mut child: std::process::Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Listening beyond loopback while answering only loopback Host names
/// would refuse every remote client, and without a token anyone who
/// reaches the address reads the workdirs: start-up says both (and still
/// starts: Compose listens on 0.0.0.0 in an internal network, no token).
#[test]
fn remote_listen_with_loopback_hosts_warns() {
    let fx = Fixture::new();
    let workdir = fx.workdir_arg();
    let args = ["--workdir", &workdir, "--listen", "0.0.0.0:0"];
    let hosts = ["--allowed-hosts", "localhost,127.0.0.1,[::1]"];
    let (child, log) = start_logged(&[&args[..], &hosts[..]].concat(), &[]);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(warnings.iter().any(|w| w.contains("SERVERFS_ALLOWED_HOSTS")), "{warnings:?}");
    let no_token = |w: &String| w.contains("without a token") && w.contains("SERVERFS_TOKEN");
    assert!(warnings.iter().any(no_token), "{warnings:?}");
    // With a token, or on loopback, there is nothing to say about tokens.
    let token = [("SERVERFS_TOKEN", "t0ken-for-tests_0123456789abcdef")];
    let (child, log) = start_logged(&args, &token);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(!warnings.iter().any(no_token), "{warnings:?}");
    let (child, log) = start_logged(&["--workdir", &workdir, "--listen", "127.0.0.1:0"], &[]);
    let warnings = warnings_until_listening(&log);
    stop(child);
    assert!(!warnings.iter().any(no_token), "{warnings:?}");
}

/// A token file others can read is warned about (never naming its path or
/// the token); one only its owner reads is not. Running as root is warned
/// about, and only then.
#[test]
fn a_readable_token_file_and_running_as_root_are_warned_about() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fx = Fixture::new();
    let workdir = fx.workdir_arg();
    let file = fx.dir.path().join("token");
    std::fs::write(&file, "t0ken-for-tests_0123456789abcdef\n").unwrap();
    let file_arg = file.to_string_lossy().into_owned();
    let args = ["--workdir", &workdir, "--listen", "127.0.0.1:0", "--token-file", &file_arg];
    let readable = |w: &String| w.contains("readable by group or others");
    for (mode, warned) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let (child, log) = start_logged(&args, &[]);
        let warnings = warnings_until_listening(&log);
        stop(child);
        assert_eq!(warnings.iter().any(readable), warned, "{mode:o}: {warnings:?}");
        for w in &warnings {
            assert!(!w.contains(&file_arg) && !w.contains("t0ken"), "{w}");
        }
        let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        assert_eq!(warnings.iter().any(|w| w.contains("running as root")), root, "{warnings:?}");
    }
}

/// An address that cannot be listened on is a configuration error: exit 2
/// and a line naming the address and the setting.
#[test]
fn a_port_in_use_is_exit_2_naming_the_address_and_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let fx = Fixture::new();
    let out = Command::new(BIN)
        .args(["--workdir", &fx.workdir_arg(), "--listen", &addr])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    // One plain line, like every other start-up error, and nothing that
    // reads like a good start before it: the address is bound first.
    assert!(!stderr.contains(r#""event":"starting""#), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert_eq!(
        line,
        format!(
            "serverfs-mcp: config error: SERVERFS_LISTEN (--listen): cannot listen on {addr}: \
             the address is already in use"
        )
    );
}
