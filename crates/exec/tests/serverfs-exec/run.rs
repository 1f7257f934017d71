//! `run` against real processes: after each case, no process carrying the
//! case's tag may be left.

use crate::common;

use std::time::{Duration, Instant};

use common::{alive_with, assert_none, spec, tag, wait_alive, wait_gone};
use serverfs_core::ErrorCode;
use serverfs_exec::{Outcome, run};
use tokio_util::sync::CancellationToken;

async fn go(command: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    go_in(command, dir.path()).await
}

async fn go_in(command: &str, cwd: &std::path::Path) -> Outcome {
    run(spec(command, cwd), &CancellationToken::new(), None).await.unwrap()
}

/// `command` leaves a `sleep 300.<tag>` behind one way or another: `run`
/// must return long before 300 s, and nothing with the tag may be left.
async fn no_survivor(template: &str) -> Outcome {
    let t = tag();
    let command = template.replace("TAG", &t);
    let start = Instant::now();
    let out = go(&command).await;
    assert!(start.elapsed() < Duration::from_secs(20), "{command} took {:?}", start.elapsed());
    assert_none(&t);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn background_job_is_killed_and_run_returns() {
    let out = no_survivor("sleep 300.TAG & exit 0").await;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out);
}

#[tokio::test(flavor = "multi_thread")]
async fn setsid_daemon_is_killed() {
    let out = no_survivor("setsid sleep 300.TAG & setsid -f sleep 301.TAG; echo ok").await;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn double_fork_is_killed() {
    let out = no_survivor("( (sleep 300.TAG &) & ); ( (setsid sleep 301.TAG &) & ); echo ok").await;
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn nohup_is_killed() {
    let out =
        no_survivor("nohup sleep 300.TAG > /dev/null 2>&1 & nohup sleep 301.TAG & exit 0").await;
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn background_holding_stdout_does_not_hang() {
    let out =
        no_survivor("(sleep 300.TAG; echo late) & (exec sleep 301.TAG >&2) & echo early").await;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, "early\n");
    assert!(!out.output_truncated);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_the_tree_and_reports_the_signal() {
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&format!("echo before; sleep 301.{t} & sleep 300.{t}"), dir.path());
    s.timeout_seconds = 1;
    let out = run(s, &CancellationToken::new(), None).await.unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(out.stdout, "before\n");
    assert!(!out.cancelled);
    assert_none(&t);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_out_of_range_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    for secs in [0, 601] {
        let mut s = spec("true", dir.path());
        s.timeout_seconds = secs;
        let e = run(s, &CancellationToken::new(), None).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
    }
    let mut s = spec("exit 3", dir.path());
    s.timeout_seconds = 600;
    assert_eq!(run(s, &CancellationToken::new(), None).await.unwrap().exit_code, Some(3));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancellation_token_kills_the_tree() {
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let s = spec(&format!("setsid sleep 301.{t} & sleep 300.{t}"), dir.path());
    let token = CancellationToken::new();
    let task = {
        let token = token.clone();
        tokio::spawn(async move { run(s, &token, None).await })
    };
    wait_alive(&format!("301.{t}")).await;
    wait_alive(&format!("300.{t}")).await;
    token.cancel();
    let out = task.await.unwrap().unwrap();
    assert!(out.cancelled);
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    assert_none(&t);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_future_kills_the_tree() {
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let s = spec(&format!("( (sleep 301.{t} &) & ); sleep 300.{t}"), dir.path());
    let token = CancellationToken::new();
    {
        let fut = run(s, &token, None);
        tokio::pin!(fut);
        let needle = format!("300.{t}");
        tokio::select! {
            r = &mut fut => panic!("finished early: {r:?}"),
            () = wait_alive(&needle) => {}
        }
        // `fut` is dropped here, mid-command.
    }
    assert!(!token.is_cancelled(), "the caller's token is not fired by a drop");
    wait_gone(&t).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_to_the_supervisor_kills_the_tree() {
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let s = spec(&format!("setsid sleep 301.{t} & sleep 300.{t}"), dir.path());
    let task = tokio::spawn(async move { run(s, &CancellationToken::new(), None).await });
    wait_alive(&format!("301.{t}")).await;
    // The supervisor is bash's parent (bash's argv holds the command).
    let sup: Vec<i32> = alive_with(&t)
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: i32 = stat[stat.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()?;
            let parent = std::fs::read(format!("/proc/{ppid}/cmdline")).ok()?;
            String::from_utf8_lossy(&parent).contains("serverfs-exec-supervisor").then_some(ppid)
        })
        .collect::<std::collections::BTreeSet<i32>>()
        .into_iter()
        .collect();
    assert_eq!(sup.len(), 1, "{sup:?}");
    let pid = rustix::process::Pid::from_raw(sup[0]).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    assert_none(&t);
}

#[tokio::test(flavor = "multi_thread")]
async fn non_zero_exit_is_a_result() {
    let out = go("echo out; echo err >&2; exit 7").await;
    assert_eq!(out.exit_code, Some(7));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.timed_out && !out.output_truncated && !out.cancelled);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_by_a_signal_reports_it() {
    let out = go("kill -TERM $$").await;
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal.as_deref(), Some("SIGTERM"));
}

#[tokio::test(flavor = "multi_thread")]
async fn floods_on_both_streams_are_capped_and_drained() {
    let out = go(
        "head -c 10000000 /dev/zero | tr '\\0' a & head -c 10000000 /dev/zero | tr '\\0' b >&2; wait",
    )
    .await;
    assert_eq!(out.exit_code, Some(0));
    assert!(out.output_truncated);
    assert_eq!(out.stdout.chars().count(), 16_000);
    assert_eq!(out.stderr.chars().count(), 16_000);
    assert!(out.stdout.chars().all(|c| c == 'a'));
    assert!(out.stderr.chars().all(|c| c == 'b'));
}

#[tokio::test(flavor = "multi_thread")]
async fn multibyte_characters_at_the_cap_are_whole() {
    // One ASCII byte first, so the cap falls in the middle of the bytes of
    // a two-byte character if counted in bytes.
    let out =
        go("printf x; printf 'é%.0s' $(seq 1 20000); printf '€%.0s' $(seq 1 20000) >&2").await;
    assert!(out.output_truncated);
    assert_eq!(out.stdout, format!("x{}", "é".repeat(15_999)));
    assert_eq!(out.stderr, "€".repeat(16_000));
    // Exactly at the cap is not truncated.
    let out = go("printf 'é%.0s' $(seq 1 16000)").await;
    assert_eq!(out.stdout.chars().count(), 16_000);
    assert!(!out.output_truncated);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_utf8_is_replaced() {
    let out = go("printf 'a\\377b'").await;
    assert_eq!(out.stdout, "a\u{FFFD}b");
}

#[tokio::test(flavor = "multi_thread")]
async fn cd_and_export_do_not_persist() {
    let dir = tempfile::tempdir().unwrap();
    let out = go_in("cd /; export SERVERFS_PERSIST=1; pwd", dir.path()).await;
    assert_eq!(out.stdout, "/\n");
    let out = go_in("pwd -P; echo \"${SERVERFS_PERSIST-unset}\"", dir.path()).await;
    let real = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(out.stdout, format!("{}\nunset\n", real.display()));
}

#[tokio::test(flavor = "multi_thread")]
async fn environment_is_minimal() {
    // cargo runs tests with CARGO_* variables set: the server's
    // environment is not empty, so this can fail.
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    let out = go("env").await;
    let keys: Vec<&str> = out.stdout.lines().filter_map(|l| l.split('=').next()).collect();
    for k in &keys {
        assert!(
            ["PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"].contains(k),
            "unexpected variable {k} in {keys:?}"
        );
    }
    assert!(keys.contains(&"PATH"));
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_is_dev_null() {
    let out = go("cat; echo done").await;
    assert_eq!(out.stdout, "done\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn cwd_through_proc_self_fd_follows_the_open_directory() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("before")).unwrap();
    let handle = std::fs::File::open(dir.path().join("before")).unwrap();
    // Renamed after it was opened: only the fd still names it.
    std::fs::rename(dir.path().join("before"), dir.path().join("after")).unwrap();
    let cwd = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let out = go_in("pwd -P; touch made-here", std::path::Path::new(&cwd)).await;
    let real = std::fs::canonicalize(dir.path().join("after")).unwrap();
    assert_eq!(out.stdout, format!("{}\n", real.display()));
    assert!(dir.path().join("after/made-here").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_is_reported_for_long_commands() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("sleep 1.5", dir.path());
    s.progress_interval = Duration::from_millis(200);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let out = run(
        s,
        &CancellationToken::new(),
        Some(Arc::new(move |_p| {
            c.fetch_add(1, Ordering::Relaxed);
        })),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(calls.load(Ordering::Relaxed) >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn many_commands_at_once_all_clean_up() {
    let t = tag();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let command = format!("sleep 300.{t} & setsid sleep 301.{t} & echo {i}");
        tasks.push(tokio::spawn(async move { go(&command).await }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().stdout, format!("{i}\n"));
    }
    assert_none(&t);
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_that_keep_forking_are_all_killed() {
    // Detached loops that keep starting sleeps while the supervisor kills:
    // the kill loop must still converge.
    let out = no_survivor(
        "for i in 1 2 3; do setsid bash -c 'while :; do sleep 300.TAG & sleep 0.02; done' & done; \
         sleep 0.5; echo ok",
    )
    .await;
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn stopped_descendants_are_killed() {
    let out = no_survivor("setsid sleep 300.TAG & p=$!; sleep 0.2; kill -STOP $p; echo ok").await;
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn grandchildren_in_another_session_are_killed() {
    // Neither bash's process group nor its direct children cover these:
    // the inner sleeps reach the supervisor only once their parent is dead.
    let out = no_survivor(
        "setsid bash -c 'sleep 300.TAG & setsid sleep 301.TAG & sleep 302.TAG' & \
         setsid bash -c 'bash -c \"sleep 303.TAG & sleep 304.TAG\"' & sleep 0.3; echo ok",
    )
    .await;
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_or_nul_commands_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in
        ["echo a\0b".to_owned(), format!("echo {}", "x".repeat(serverfs_exec::MAX_COMMAND_BYTES))]
    {
        let e = run(spec(&cmd, dir.path()), &CancellationToken::new(), None).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
    }
}

/// A supervisor that ignores its control channel and SIGTERM: the server
/// closes the channel, waits, sends SIGTERM, waits, and only then SIGKILLs
/// it. (Takes about 2 × 10 s of grace.)
#[tokio::test(flavor = "multi_thread")]
async fn unresponsive_supervisor_gets_sigterm_then_sigkill() {
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let fake = serverfs_exec::Supervisor::new(
        "/bin/sh",
        [
            "-c".to_owned(),
            "trap 'echo term >> \"$0\"' TERM; while :; do sleep 0.1; done".to_owned(),
            log.display().to_string(),
        ],
    );
    let mut s = spec(&format!("sleep 300.{t}"), dir.path());
    s.supervisor = fake.clone();
    s.timeout_seconds = 1;
    let e = run(s, &CancellationToken::new(), None).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InternalError);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "term\n");
    assert_none(&t);
    // The one started ahead for the next command (this fake, which ignores
    // its channel) is killed when the last `Supervisor` goes: once it is
    // there, so that the test never ends while it is being started.
    let needle = log.display().to_string();
    let start = Instant::now();
    while alive_with(&needle).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "no supervisor started ahead");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(fake);
    wait_gone(&needle).await;
}

/// The supervisors waiting for a command (`ready` mode) that this test
/// process started with `needle` (a sandbox root) in their arguments.
fn ready_supervisors(needle: &std::path::Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    alive_with(needle.to_str().unwrap())
        .into_iter()
        .filter(|&pid| {
            common::parent_pid(pid) == me
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"ready"))
        })
        .collect()
}

/// Waits (bounded) until `n` supervisors with `needle` wait for a command:
/// one is started when a command ends.
async fn wait_ready(needle: &std::path::Path, n: usize) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let ready = ready_supervisors(needle);
        if ready.len() == n {
            return ready;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "ready supervisors: {ready:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every command is handed to a supervisor started for it (the first) or
/// ahead (from the second on), in the sandbox: the command runs in its
/// directory with its own writable `TMPDIR`, nothing it starts survives,
/// and each command gets a new supervisor (one is always waiting).
#[tokio::test(flavor = "multi_thread")]
async fn commands_handed_to_a_supervisor_started_ahead_keep_every_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let supervisor = common::supervisor();
    let mut sandbox = serverfs_exec::SandboxConfig::new(&work);
    sandbox.network = serverfs_exec::Network::Off;
    let shapes = [
        "sleep 300.TAG & exit 0",
        "setsid sleep 300.TAG & setsid -f sleep 301.TAG; exit 0",
        "( (sleep 300.TAG &) & ); ( (setsid sleep 301.TAG &) & ); exit 0",
        "nohup sleep 300.TAG > /dev/null 2>&1 & exit 0",
    ];
    let mut tmpdirs = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let t = tag();
        let parent = serverfs_test_support::ParentArgv::new(&work);
        let report = "pwd; echo \"$TMPDIR\"; \
                      touch \"$TMPDIR/mine\" && echo tmp-writable; \
                      touch /var/tmp/serverfs-outside-TAG 2>/dev/null || echo outside-refused; ";
        let mut s = serverfs_exec::CommandSpec::new(
            supervisor.clone(),
            format!("{}{report}{shape}", parent.prefix()).replace("TAG", &t),
            &work,
        );
        s.sandbox = Some(sandbox.clone());
        let token = CancellationToken::new();
        let (out, argv) = tokio::join!(run(s, &token, None), parent.read());
        let out = out.unwrap();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        assert!(argv.contains(" ready "), "command {i}: supervisor argv {argv:?}");
        assert!(!argv.contains("sleep"), "the command is in the argv: {argv}");
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[0], work.to_str().unwrap(), "command {i} ran elsewhere");
        let parent_dir = format!("{}/serverfs-cmd-", std::env::temp_dir().display());
        assert!(lines[1].starts_with(&parent_dir), "{out:?}");
        assert_eq!(&lines[2..], ["tmp-writable", "outside-refused"], "command {i}: {out:?}");
        let outside = format!("/var/tmp/serverfs-outside-{t}");
        let escaped = std::fs::remove_file(&outside).is_ok();
        assert!(!escaped, "command {i} wrote outside the sandbox");
        assert!(!std::path::Path::new(lines[1]).exists(), "the private TMPDIR is removed");
        tmpdirs.push(lines[1].to_owned());
        assert_none(&t);
        wait_ready(&work, 1).await;
    }
    tmpdirs.dedup();
    assert_eq!(tmpdirs.len(), shapes.len(), "each command has its own TMPDIR");
    // The longest command allowed is handed over whole.
    let parent = serverfs_test_support::ParentArgv::new(&work);
    let filler = "x".repeat(serverfs_exec::MAX_COMMAND_BYTES - 100 - parent.prefix().len());
    let command = format!("{}: {filler}; echo whole", parent.prefix());
    let mut s = serverfs_exec::CommandSpec::new(supervisor.clone(), command, &work);
    s.sandbox = Some(sandbox.clone());
    let token = CancellationToken::new();
    let (out, argv) = tokio::join!(run(s, &token, None), parent.read());
    let out = out.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(0), "whole\n"), "{out:?}");
    assert!(argv.contains(" ready "), "{argv}");
    // The last one started ahead ends with the `Supervisor`.
    wait_ready(&work, 1).await;
    drop(supervisor);
    wait_ready(&work, 0).await;
}

/// The supervisor waiting for the next command can be killed (by any
/// process of the same user, e.g. another session's command), or sent
/// SIGTERM, which ends it at once as it has nothing to stop yet. The next
/// command then starts a supervisor of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_supervisor_killed_while_waiting_is_replaced() {
    use rustix::process::Signal;
    let dir = tempfile::tempdir().unwrap();
    let supervisor = common::supervisor();
    let token = CancellationToken::new();
    let go = |command: &str| {
        let mut s = serverfs_exec::CommandSpec::new(supervisor.clone(), command, dir.path());
        s.sandbox = Some(serverfs_exec::SandboxConfig::new(dir.path()));
        run(s, &token, None)
    };
    go("true").await.unwrap();
    for signal in [Signal::KILL, Signal::TERM] {
        let ready = wait_ready(dir.path(), 1).await;
        let pid = rustix::process::Pid::from_raw(ready[0]).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        // Wait until the killed one has closed its channel (it is a zombie
        // or reaped), so the next command sees it gone rather than racing
        // it.
        let dead = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
        };
        let start = Instant::now();
        while !dead(ready[0]) {
            assert!(start.elapsed() < Duration::from_secs(30), "{signal:?} did not end it");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = tag();
        let parent = serverfs_test_support::ParentArgv::new(dir.path());
        let command = format!("{}sleep 300.{t} & true", parent.prefix());
        let (out, argv) = tokio::join!(go(&command), parent.read());
        let out = out.unwrap();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        // Run (the killed one is dead) by a supervisor started for it.
        assert!(argv.contains(" ready "), "{argv}");
        assert_none(&t);
    }
}

/// A descriptor the server holds without close-on-exec (one a launcher left
/// open) does not reach the command: its supervisor marks every descriptor
/// above 2 close-on-exec before it starts bash. Control: a plain child of
/// this process writes through it.
#[tokio::test(flavor = "multi_thread")]
async fn a_descriptor_the_server_left_inheritable_does_not_reach_the_command() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    let file = std::fs::File::create(&outside).unwrap();
    // `dup` leaves the new descriptor without close-on-exec.
    let inheritable = rustix::io::dup(&file).unwrap();
    let n = inheritable.as_raw_fd();
    let write = format!("{{ echo pwned >&{n}; }} 2>/dev/null && echo wrote");
    let control = std::process::Command::new("bash").args(["-c", &write]).output().unwrap();
    assert_eq!(control.stdout, b"wrote\n", "control: a plain child inherits fd {n}");
    std::fs::write(&outside, "").unwrap();
    let out = go_in(&write, dir.path()).await;
    assert_eq!(out.stdout, "", "the command wrote through fd {n}: {out:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "");
}
