//! The Landlock sandbox against real processes. Each attack is run twice:
//! without the sandbox (the negative control: it must work, so the test can
//! fail) and inside it (it must not).

use crate::common;

use std::path::{Path, PathBuf};

use common::{alive_with, assert_none, spec, supervisor, tag, wait_alive, wait_gone};
use serverfs_exec::{Outcome, Owner, SandboxConfig, SessionConfig, Sessions, run};
use tokio_util::sync::CancellationToken;

/// A directory outside /tmp (which commands may write to), wherever the
/// checkout is.
fn outside_tmp() -> tempfile::TempDir {
    serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"))
}

async fn go(command: &str, root: &Path, sandbox: Option<SandboxConfig>) -> Outcome {
    let mut s = spec(command, root);
    s.sandbox = sandbox;
    run(s, &CancellationToken::new(), None).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_only_below_the_root_tmp_and_tmpdir() {
    let root = outside_tmp();
    let elsewhere = outside_tmp();
    let victim: PathBuf = elsewhere.path().join("victim");
    let write_outside = format!("echo x > {}", victim.display());

    // Negative control: without the sandbox the write lands.
    let out = go(&write_outside, root.path(), None).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(victim.exists());
    std::fs::remove_file(&victim).unwrap();

    let sandbox = Some(SandboxConfig::new(root.path()));
    let out = go(&write_outside, root.path(), sandbox.clone()).await;
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    // Landlock says EACCES; the read-only view, where the kernel lets the
    // supervisor make it (here), says EROFS first.
    let refused = ["Read-only file system", "Permission denied"];
    assert!(refused.iter().any(|r| out.stderr.contains(r)), "{out:?}");
    assert!(!victim.exists());

    // Inside the root, /tmp and the private TMPDIR work; TMPDIR is the
    // command's own and is gone afterwards.
    let t = tag();
    let out = go(
        &format!(
            "set -e; mkdir -p sub; echo a > sub/f; echo b > /tmp/sfs-{t}; rm /tmp/sfs-{t}; \
             echo c > \"$TMPDIR/f\"; cat sub/f \"$TMPDIR/f\"; echo \"$TMPDIR\" >&2"
        ),
        root.path(),
        sandbox.clone(),
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "a\nc\n");
    let tmpdir = PathBuf::from(out.stderr.trim_end());
    assert!(tmpdir.is_absolute() && !tmpdir.exists(), "{tmpdir:?}");

    // An operator-added path is writable.
    let mut cfg = SandboxConfig::new(root.path());
    cfg.writable.push(elsewhere.path().to_owned());
    let out = go(&write_outside, root.path(), Some(cfg)).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(victim.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn network_off_denies_tcp_connect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = outside_tmp();
    let connect = format!(
        "/usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"connected\")'"
    );
    // Negative control: network on (the default) connects.
    let out = go(&connect, root.path(), Some(SandboxConfig::new(root.path()))).await;
    assert_eq!(out.stdout, "connected\n", "{out:?}");
    let mut cfg = SandboxConfig::new(root.path());
    cfg.network = serverfs_exec::Network::Off;
    let out = go(&connect, root.path(), Some(cfg)).await;
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stderr.contains("PermissionError"), "{out:?}");
}

/// Session A runs `sleep 300.<tag>` (its fds 0 and 1 are A's input and
/// output); session B tries to write into A's output through /proc, read
/// A's input, and kill A's process, its supervisor and the server.
async fn cross_session(sandboxed: bool) -> (String, String, bool) {
    let root = outside_tmp();
    let mut cfg = SessionConfig::new(supervisor());
    if sandboxed {
        cfg.sandbox = Some(SandboxConfig::new(root.path()));
    }
    let sessions = Sessions::new(cfg);
    let owner = Owner::new("o");
    let cancel = CancellationToken::new();
    let a = sessions.open(&owner, root.path(), None).unwrap();
    let b = sessions.open(&owner, root.path(), None).unwrap();
    let t = tag();
    sessions.write(&owner, &a, &format!("sleep 300.{t}\n")).await.unwrap();
    wait_alive(&format!("300.{t}")).await;
    let victim = alive_with(&format!("300.{t}"))[0];
    let server = std::process::id();
    let a_supervisor = common::parent_pid(victim);
    sessions
        .write(
            &owner,
            &b,
            &format!(
                "echo INJECTED > /proc/{victim}/fd/1; echo w=$?; \
                 timeout 1 cat /proc/{victim}/fd/0 > /dev/null; echo r=$?; \
                 kill -0 {server}; echo s=$?; kill -0 {a_supervisor}; echo p=$?; \
                 kill -9 {victim}; echo k=$?; echo done\n"
            ),
        )
        .await
        .unwrap();
    let mut b_out = String::new();
    let mut offset = 0;
    while !b_out.contains("done\n") {
        let r = sessions.read(&owner, &b, offset, 30_000, &cancel).await.unwrap();
        offset = r.next_offset;
        b_out.push_str(&r.output);
    }
    let a_out = sessions.read(&owner, &a, 0, 0, &cancel).await.unwrap().output;
    if !sandboxed {
        // B's `kill -9` returns before the victim has left /proc: wait for
        // that (bounded; it fails the control if the kill did not land).
        // With the sandbox the kill is refused (k=1) and nothing is pending.
        wait_gone(&format!("300.{t}")).await;
    }
    let victim_alive = !alive_with(&format!("300.{t}")).is_empty();
    sessions.close_all().await;
    assert_none(&t);
    (a_out, b_out, victim_alive)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_session_cannot_reach_another_through_proc_or_signals() {
    // Negative control: without the sandbox (same user) B reaches A.
    let (a_out, b_out, alive) = cross_session(false).await;
    assert!(a_out.contains("INJECTED"), "{a_out:?} {b_out:?}");
    assert!(b_out.contains("w=0") && b_out.contains("s=0") && b_out.contains("k=0"), "{b_out:?}");
    assert!(!alive);

    let (a_out, b_out, alive) = cross_session(true).await;
    assert!(!a_out.contains("INJECTED"), "{a_out:?}");
    for denied in ["w=1", "r=1", "s=1", "p=1", "k=1"] {
        assert!(b_out.contains(denied), "{denied} in {b_out:?}");
    }
    assert!(alive);
}

/// A command that fights the read-only view: it makes a user and mount
/// namespace of its own (where it holds every capability), then remounts
/// `/` writable with the old mount API and clears its read-only flag with
/// `mount_setattr`, and writes outside. Every step that could undo the view
/// is refused and the write fails. The control, the same program as a
/// plain child of this test (no supervisor, so no filter either), gets its
/// namespaces and both calls through.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_undo_the_read_only_view() {
    let root = outside_tmp();
    let elsewhere = outside_tmp();
    let victim = elsewhere.path().join("victim");
    // CLONE_NEWUSER | CLONE_NEWNS; MS_REMOUNT | MS_BIND (no MS_RDONLY: a
    // writable bind); mount_setattr(AT_FDCWD, "/", 0, {clr: RDONLY}).
    let undo = "import ctypes, errno, struct\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                def said(what, r):\n    \
                    print(what, \"ok\" if r == 0 else errno.errorcode[ctypes.get_errno()])\n\
                said(\"unshare\", libc.unshare(0x10000000 | 0x00020000))\n\
                said(\"remount\", libc.mount(None, b\"/\", None, 32 | 4096, None))\n\
                attr = ctypes.create_string_buffer(struct.pack(\"QQQQ\", 0, 1, 0, 0))\n\
                said(\"mount_setattr\", libc.syscall(442, -100, b\"/\", 0, attr, 32))\n";
    let program = root.path().join("undo.py");
    std::fs::write(&program, undo).unwrap();
    let attack = format!("python3 {}", program.display());

    let control = std::process::Command::new("python3").arg(&program).output().unwrap();
    let control = String::from_utf8_lossy(&control.stdout);
    assert_eq!(control, "unshare ok\nremount ok\nmount_setattr ok\n", "control");

    // With namespaces allowed (--command-namespaces on) it gets its own;
    // nothing it does there reaches the view it came from, and the mount
    // calls are refused anyway. By default it gets no namespace at all.
    let then_write = format!("{attack}; echo x > {}", victim.display());
    let mut allowed = SandboxConfig::new(root.path());
    allowed.namespaces = true;
    for (sandbox, unshare) in [(allowed, "ok"), (SandboxConfig::new(root.path()), "EPERM")] {
        let out = go(&then_write, root.path(), Some(sandbox)).await;
        let expected = format!("unshare {unshare}\nremount EPERM\nmount_setattr EPERM\n");
        assert_eq!(out.stdout, expected, "{out:?}");
        assert!(out.stderr.contains("Read-only file system"), "{out:?}");
        assert!(!victim.exists(), "the write landed");
    }
}

/// A root below `/dev/shm` (a RAM-backed project): the view binds the
/// host's `/dev/shm` back instead of covering it with a fresh one, so the
/// root is still there and writable, and outside it nothing is.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_below_dev_shm_stays_reachable() {
    let root = tempfile::tempdir_in("/dev/shm").unwrap();
    let elsewhere = outside_tmp();
    let victim = elsewhere.path().join("victim");
    let command = format!("echo in > inside && cat inside; echo x > {}", victim.display());
    let out = go(&command, root.path(), Some(SandboxConfig::new(root.path()))).await;
    assert_eq!(out.stdout, "in\n", "{out:?}");
    assert_eq!(std::fs::read_to_string(root.path().join("inside")).unwrap(), "in\n");
    assert!(!victim.exists(), "the write outside landed");
}

/// Runs `touch ran` in `root` under the supervisor with `options`, in a
/// user namespace of its own whose `limit` (a file of /proc/sys/user) is 0,
/// set inside that namespace alone, as a command that holds every one it
/// can get would leave it; returns the supervisor's exit code and line.
fn run_with_none_left(
    limit: &str,
    root: &std::path::Path,
    options: &[&str],
) -> (Option<i32>, String) {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg(format!("echo 0 > /proc/sys/user/{limit} && exec \"$@\""))
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_serverfs-exec-supervisor"))
        .arg(concat!("--serverfs-exec=", env!("CARGO_PKG_VERSION")))
        .arg("--landlock")
        .arg(root)
        .args(options)
        .args(["run", "touch ran"])
        .current_dir(root);
    cmd.stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)));
    let status = cmd.status().unwrap();
    drop(cmd);
    let mut line = String::new();
    ours.read_to_string(&mut line).unwrap();
    (status.code(), line)
}

/// Fail closed: a supervisor told that commands get a view of their own
/// (what start-up found) refuses to start the command where it cannot build
/// one: here where the user's mount namespaces are used up. Control: the
/// same supervisor, not told, runs the command there without the view.
#[test]
fn a_view_found_at_start_is_never_silently_missing() {
    let dir = outside_tmp();
    let root = dir.path();
    let start = |options: &[&str]| run_with_none_left("max_mnt_namespaces", root, options);
    assert_eq!(start(&[]), (Some(0), "exit 0\n".to_owned()), "control");
    assert!(root.join("ran").exists(), "control: the command ran without the view");
    std::fs::remove_file(root.join("ran")).unwrap();
    for view in ["own", "own-proc"] {
        assert_eq!(start(&["--view", view]), (Some(1), "error sandbox\n".to_owned()), "{view}");
        assert!(!root.join("ran").exists(), "the command ran without the view ({view})");
    }
}

/// Fail closed for the network too: a supervisor of a command on the
/// network by allowlist that cannot make the command's network namespace
/// (the user's used up) refuses to start it, never runs it with the host's
/// network. Control: the same place, the network on, runs it.
#[test]
fn a_command_on_the_allowlist_never_runs_without_its_network_namespace() {
    let dir = outside_tmp();
    let root = dir.path();
    let start = |options: &[&str]| run_with_none_left("max_net_namespaces", root, options);
    assert_eq!(start(&[]), (Some(0), "exit 0\n".to_owned()), "control");
    assert!(root.join("ran").exists(), "control: the command ran");
    std::fs::remove_file(root.join("ran")).unwrap();
    assert_eq!(start(&["--network-proxy"]), (Some(1), "error sandbox\n".to_owned()));
    assert!(!root.join("ran").exists(), "the command ran without its network namespace");
}
