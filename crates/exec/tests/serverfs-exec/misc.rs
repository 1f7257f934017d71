//! The limiter, the policy in front of real commands, and probes that need
//! a process of their own: the server's secret environment, its
//! hardening, and its death.

use crate::common;

use std::time::{Duration, Instant};

use common::{spec, tag, wait_alive, wait_gone};
use serverfs_core::{ErrorCode, FsError};
use serverfs_exec::{Limiter, Outcome, Policy, harden_server_process, run};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread")]
async fn the_cap_gives_server_busy() {
    let t = tag();
    let limiter = std::sync::Arc::new(Limiter::new(1, 0, Duration::from_secs(5)));
    let permit = limiter.acquire("t").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = spec(&format!("sleep 300.{t}"), dir.path());
    let token = CancellationToken::new();
    let task = {
        let token = token.clone();
        tokio::spawn(async move {
            let _permit = permit;
            run(s, &token, None).await
        })
    };
    wait_alive(&t).await;
    let e = limiter.acquire("t").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::ServerBusy);
    token.cancel();
    task.await.unwrap().unwrap();
    // The slot is free again.
    limiter.acquire("t").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_is_bounded_in_count_and_time() {
    let limiter = std::sync::Arc::new(Limiter::new(1, 1, Duration::from_millis(300)));
    let held = limiter.acquire("t").await.unwrap();
    let l2 = limiter.clone();
    let waiter = tokio::spawn(async move { l2.acquire("t").await.map(drop) });
    let start = Instant::now();
    while limiter.waiting() == 0 {
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::task::yield_now().await;
    }
    // The queue is full: refused at once.
    assert_eq!(limiter.acquire("t").await.unwrap_err().code(), ErrorCode::ServerBusy);
    // The waiter gives up after its bounded wait.
    assert_eq!(waiter.await.unwrap().unwrap_err().code(), ErrorCode::ServerBusy);
    assert_eq!(limiter.waiting(), 0);
    // A waiter gets a slot that is released while it waits.
    let limiter = std::sync::Arc::new(Limiter::new(1, 1, Duration::from_secs(30)));
    let held2 = limiter.acquire("t").await.unwrap();
    let l2 = limiter.clone();
    let waiter = tokio::spawn(async move { l2.acquire("t").await.map(drop) });
    while limiter.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    drop(held2);
    waiter.await.unwrap().unwrap();
    drop(held);
}

async fn checked_run(
    policy: &Policy,
    command: &str,
    cwd: &std::path::Path,
) -> Result<Outcome, FsError> {
    policy.check(command)?;
    run(spec(command, cwd), &CancellationToken::new(), None).await
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_commands_do_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "x").unwrap();
    let deny = Policy { allow: None, deny: vec!["rm".into()] };
    let allow = Policy { allow: Some(vec!["ls".into(), "cat".into(), "git".into()]), deny: vec![] };
    let cases = [
        "git;rm -f victim",
        "\"/usr/bin/rm\" -f victim",
        "'rm' -f victim",
        "r\\m -f victim",
        "echo $(rm -f victim)",
        "echo `rm -f victim`",
        "ls | rm -f victim",
        "ls\nrm -f victim",
        "ls && rm -f victim",
        "FOO=1 rm -f victim",
        "env rm -f victim",
        "bash -c 'rm -f victim'",
    ];
    for policy in [&deny, &allow] {
        for cmd in cases {
            let e = checked_run(policy, cmd, dir.path()).await.unwrap_err();
            assert_eq!(e.code(), ErrorCode::CommandNotAllowed, "{cmd:?} under {policy:?}");
            assert!(victim.exists(), "{cmd:?} removed the file under {policy:?}");
        }
    }
    // Permitted commands do run.
    let out = checked_run(&allow, "cat victim", dir.path()).await.unwrap();
    assert_eq!(out.stdout, "x");
    let out = checked_run(&deny, "ls; git --version >/dev/null 2>&1; cat victim", dir.path())
        .await
        .unwrap();
    assert!(out.stdout.ends_with('x'));
    // Without a policy the same command does remove it: the checks above
    // could fail.
    checked_run(&Policy::default(), "rm -f victim", dir.path()).await.unwrap();
    assert!(!victim.exists());
}

/// Runs one `#[ignore]`d probe of this binary in a process of its own,
/// with `SERVERFS_TOKEN` (and `extra`) in its environment, unprivileged when
/// we are root and `setpriv` exists.
fn probe(name: &str, extra: &[(&str, &str)]) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    let root = rustix::process::geteuid().is_root();
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    let mut cmd = if root && setpriv.exists() {
        let mut c = std::process::Command::new(setpriv);
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all"]);
        c.arg(&exe);
        c
    } else {
        std::process::Command::new(&exe)
    };
    // This module's path in the binary's test names (`misc::probe_secret`).
    let name = format!("{}::{name}", module_path!().split_once("::").map_or("", |(_, m)| m));
    cmd.args(["--exact", &name, "--ignored", "--nocapture", "--test-threads=1"])
        .env("SERVERFS_TOKEN", "fake-token-4711-0123456")
        .env("TMPDIR", "/tmp")
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

#[test]
fn server_secret_is_neither_inherited_nor_readable() {
    let out = probe("probe_secret", &[]).wait_with_output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains("probe_secret: checked"), "{text}");
    // As root, the probe runs as nobody (setpriv), where the /proc checks
    // mean something.
    if std::path::Path::new("/usr/bin/setpriv").exists() {
        assert!(text.contains("privileged: false"), "{text}");
    }
}

/// A process's directory of TMPDIRs goes with its last command: nothing is
/// left in /tmp once its commands have ended (a process of its own, so no
/// other test's command holds the directory).
#[test]
fn the_tmpdir_directory_goes_with_the_last_command() {
    let out = probe("probe_tmpdir_parent", &[]).wait_with_output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("probe_tmpdir_parent: checked"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a probe: run by the_tmpdir_directory_goes_with_the_last_command"]
async fn probe_tmpdir_parent() {
    if std::env::var("SERVERFS_TOKEN").is_err() {
        return;
    }
    let cwd = std::path::Path::new("/");
    let out = run(spec("dirname \"$TMPDIR\"", cwd), &CancellationToken::new(), None).await.unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let parent = std::path::PathBuf::from(out.stdout.trim());
    let named = format!("/tmp/serverfs-cmd-{}-", std::process::id());
    assert!(parent.to_str().unwrap().starts_with(&named), "{}", parent.display());
    // The supervisor started ahead for a next command holds a TMPDIR until
    // its Supervisor is dropped, which may finish just after `run`.
    let gone = || async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while parent.exists() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        !parent.exists()
    };
    assert!(gone().await, "left after the last command: {}", parent.display());
    // Made again for the next command, and gone again after it.
    run(spec("true", cwd), &CancellationToken::new(), None).await.unwrap();
    assert!(gone().await, "left after the second command: {}", parent.display());
    eprintln!("probe_tmpdir_parent: checked");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a probe: run by server_secret_is_neither_inherited_nor_readable"]
async fn probe_secret() {
    use std::os::fd::AsRawFd;
    let Ok(token) = std::env::var("SERVERFS_TOKEN") else { return };
    let dir = tempfile::tempdir().unwrap();
    let go = |cmd: String| {
        let cwd = dir.path().to_path_buf();
        async move { run(spec(&cmd, &cwd), &CancellationToken::new(), None).await.unwrap() }
    };
    let me = std::process::id();
    // Not inherited.
    let out = go("env".into()).await;
    assert!(!out.stdout.contains("SERVERFS_TOKEN"), "{}", out.stdout);
    assert!(!out.stdout.contains(&token));
    // Without CAP_SYS_PTRACE (unprivileged), a same-user command could
    // read the server's environ before hardening...
    let privileged = rustix::process::geteuid().is_root();
    let read_environ = format!("tr '\\0' '\\n' < /proc/{me}/environ | grep -c SERVERFS_TOKEN");
    if !privileged {
        let out = go(read_environ.clone()).await;
        assert_eq!(out.stdout, "1\n", "precondition: readable before hardening");
    }
    harden_server_process().unwrap();
    assert_eq!(
        rustix::process::dumpable_behavior().unwrap(),
        rustix::process::DumpableBehavior::NotDumpable
    );
    if !privileged {
        // ...and cannot after.
        let out = go(read_environ).await;
        assert_eq!(out.stdout, "0\n");
        let out = go(format!("cat /proc/{me}/environ")).await;
        assert_ne!(out.exit_code, Some(0));
        assert!(!out.stdout.contains(&token));
        assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
    }
    // A non-dumpable server can still start commands in /proc/self/fd/N.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let handle = std::fs::File::open(dir.path().join("sub")).unwrap();
    let cwd = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let out = run(spec("pwd -P", std::path::Path::new(&cwd)), &CancellationToken::new(), None)
        .await
        .unwrap();
    let real = std::fs::canonicalize(dir.path().join("sub")).unwrap();
    assert_eq!(out.stdout, format!("{}\n", real.display()));
    eprintln!("probe_secret: checked (privileged: {privileged})");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_death_kills_the_tree() {
    use std::os::unix::fs::PermissionsExt;
    let t = tag();
    // Made here, not in the probe: the probe is killed, and a directory of
    // its own would be left in /tmp (owned by nobody) on every run.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir_env = dir.path().to_str().unwrap();
    let env = [("SERVERFS_EXEC_PROBE_TAG", t.as_str()), ("SERVERFS_EXEC_PROBE_DIR", dir_env)];
    let mut child = probe("probe_server_dies", &env);
    wait_alive(&format!("300.{t}")).await;
    wait_alive(&format!("301.{t}")).await;
    wait_alive(&format!("302.{t}")).await;
    // The "server" dies at once, no cleanup of its own.
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_gone(&t).await;
    // What a dead server leaves: its directory of TMPDIRs, which the next
    // start of a server of its user sweeps. The probe's user is not ours,
    // so this test removes it (the probe's TMPDIR is /tmp).
    let left = serverfs_test_support::tmpdir_parent_of(pid);
    let left = left.expect("the dead server's TMPDIRs are not where expected");
    std::fs::remove_dir_all(&left).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a probe: run by server_death_kills_the_tree"]
async fn probe_server_dies() {
    let Ok(t) = std::env::var("SERVERFS_EXEC_PROBE_TAG") else { return };
    let dir = std::path::PathBuf::from(std::env::var("SERVERFS_EXEC_PROBE_DIR").unwrap());
    let cmd = format!("setsid sleep 300.{t} & ( (sleep 301.{t} &) & ); sleep 302.{t}");
    let _ = run(spec(&cmd, &dir), &CancellationToken::new(), None).await;
}

/// A supervisor program from another release (installed beside the server,
/// it can be left behind by an upgrade) refuses our command lines with
/// exit 2 and runs nothing, and so does one called without the protocol
/// argument; the marker is the only difference from a command line that
/// does run.
#[test]
fn a_supervisor_of_another_version_runs_nothing() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let run = |first: Option<&str>| {
        // The control channel stays open (our end lives until the end of
        // the call), so only a refusal ends the supervisor without bash.
        let (_ours, theirs) = UnixStream::pair().unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_serverfs-exec-supervisor"));
        cmd.args(first).args(["run", "touch ran; exit 0"]);
        cmd.current_dir(dir.path())
            .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)));
        cmd.status().unwrap().code()
    };
    assert_eq!(run(Some("--serverfs-exec=0.0.0-other")), Some(2));
    assert_eq!(run(None), Some(2));
    assert!(!dir.path().join("ran").exists(), "a refused supervisor ran the command");
    let current = concat!("--serverfs-exec=", env!("CARGO_PKG_VERSION"));
    assert_eq!(run(Some(current)), Some(0));
    assert!(dir.path().join("ran").exists(), "the same command line with our version runs");
}

/// The private TMPDIRs of a server that is gone (killed with commands
/// running) are removed by the next start's sweep, with what they hold
/// (its directory of them, and one named as earlier versions named them);
/// a running server's (this test's own), a foreign name and a symlink are
/// left alone.
#[test]
fn stale_tmpdirs_of_servers_that_are_gone_are_swept() {
    let tmp = std::env::temp_dir();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let unique = std::process::id();
    let stale = tmp.join(format!("serverfs-cmd-{dead}-sweeptest{unique}"));
    let live = tmp.join(format!("serverfs-cmd-{unique}-sweeptest"));
    let foreign = tmp.join(format!("serverfs-cmd-sweeptest{unique}"));
    let target = tempfile::tempdir().unwrap();
    let link = tmp.join(format!("serverfs-cmd-{dead}-sweeplink{unique}"));
    let stale_parent = tmp.join(format!("serverfs-cmd-{dead}"));
    std::fs::create_dir_all(stale_parent.join("0123abcd")).unwrap();
    std::fs::write(stale_parent.join("0123abcd/left-behind"), "x").unwrap();
    for dir in [&stale, &live, &foreign] {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("left-behind"), "x").unwrap();
    }
    std::fs::write(target.path().join("kept"), "x").unwrap();
    std::os::unix::fs::symlink(target.path(), &link).unwrap();

    assert!(serverfs_exec::sweep_stale_tmpdirs() >= 2);
    assert!(!stale.exists(), "the dead server's TMPDIR is still there");
    assert!(!stale_parent.exists(), "the dead server's TMPDIRs are still there");
    assert!(live.join("left-behind").exists() && foreign.join("left-behind").exists());
    assert!(target.path().join("kept").exists(), "the sweep followed a symlink");
    for dir in [&live, &foreign] {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::remove_file(&link).unwrap();
}
