//! The layers every command runs under besides Landlock (no terminal, no
//! capabilities, the seccomp filter), against real processes and the real
//! kernel. Each attack also runs as a plain child of this test, without the
//! supervisor: that negative control must work (so the test can fail), and
//! under the supervisor it must not.

use crate::common;

use std::path::Path;

use common::spec;
use serverfs_exec::{Outcome, SandboxConfig, run};
use tokio_util::sync::CancellationToken;

/// `command` under the supervisor (and `sandbox`, if any).
async fn confined(command: &str, root: &Path, sandbox: Option<SandboxConfig>) -> Outcome {
    let mut s = spec(command, root);
    s.sandbox = sandbox;
    run(s, &CancellationToken::new(), None).await.unwrap()
}

/// `command` as a plain child of this test: the negative control.
fn plain(command: &str, root: &Path) -> String {
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-c", command])
        .current_dir(root)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Prints the errno name of the Python statement, or `ok`.
fn python(statement: &str) -> String {
    format!(
        "python3 -c 'import ctypes, errno, fcntl, os, socket, termios\ntry:\n    {statement}\n    print(\"ok\")\nexcept OSError as e:\n    print(errno.errorcode[e.errno])'"
    )
}

/// The layers of the confine module, one attack each.
#[tokio::test(flavor = "multi_thread")]
async fn no_terminal_no_capabilities_and_the_filter_hold() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    // Its own session: the server's controlling terminal is not its own.
    // (Read through a child, not getsid here: where this test's session
    // leader is outside its pid namespace, as in CI, the kernel says 0.)
    let sid = "python3 -c 'import os; print(os.getsid(0))'";
    let own_sid = plain(sid, root);
    let out = confined(sid, root, None).await;
    assert!(!out.stdout.trim().is_empty(), "{out:?}");
    assert_ne!(out.stdout.trim(), own_sid.trim(), "a plain child shares our session: {out:?}");

    // TIOCSTI is refused before the kernel looks at the descriptor (on
    // /dev/null the kernel itself says ENOTTY).
    let tiocsti =
        python("fcntl.ioctl(os.open(\"/dev/null\", os.O_RDONLY), termios.TIOCSTI, b\"x\")");
    assert_eq!(plain(&tiocsti, root).trim(), "ENOTTY", "control");
    assert_eq!(confined(&tiocsti, root, None).await.stdout.trim(), "EPERM");

    // prlimit on another process (this test's own), even of the same user.
    let me = std::process::id();
    let prlimit = format!("prlimit --pid {me} --core=0:0 && echo ok || echo refused");
    assert_eq!(plain(&prlimit, root).trim(), "ok", "control");
    assert_eq!(confined(&prlimit, root, None).await.stdout.trim(), "refused");
    // On itself it still works (bash's ulimit).
    let own = confined("ulimit -c 0 && echo ok", root, None).await;
    assert_eq!(own.stdout.trim(), "ok", "{own:?}");
    // Scheduling of another process: its CPUs and its policy (set to what
    // they are, so the control changes nothing).
    for (what, attack) in [
        (
            "sched_setaffinity",
            format!("taskset -p -a $(taskset -p {me} | awk '{{print $NF}}') {me}"),
        ),
        ("sched_setscheduler", format!("chrt -o -p 0 {me}")),
    ] {
        let attack = format!("{attack} > /dev/null && echo ok || echo refused");
        assert_eq!(plain(&attack, root).trim(), "ok", "control: {what}");
        assert_eq!(confined(&attack, root, None).await.stdout.trim(), "refused", "{what}");
    }

    // Hiding its open files from the server (the peer module looks there):
    // prctl(PR_SET_DUMPABLE, 0).
    let hide = python(
        "if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:\n        raise OSError(ctypes.get_errno(), \"prctl\")",
    );
    assert_eq!(plain(&hide, root).trim(), "ok", "control");
    assert_eq!(confined(&hide, root, None).await.stdout.trim(), "EPERM");

    // A raw socket: refused by the filter, for root too.
    let raw = python("socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)");
    assert_eq!(confined(&raw, root, None).await.stdout.trim(), "EPERM");
    if is_root() {
        assert_eq!(plain(&raw, root).trim(), "ok", "control (root)");
        // Root without capabilities: no device node, no hostname (in a UTS
        // namespace of its own, so the control changes nothing outside).
        let mknod = "mknod \"$TMPDIR/blk\" b 7 0 && echo ok || echo refused";
        assert_eq!(plain(&mknod.replace("$TMPDIR", "."), root).trim(), "ok", "control (root)");
        assert_eq!(confined(mknod, root, None).await.stdout.trim(), "refused");
        let hostname = "unshare -u hostname serverfs-test && echo ok || echo refused";
        assert_eq!(plain(hostname, root).trim(), "ok", "control (root)");
        assert_eq!(confined(hostname, root, None).await.stdout.trim(), "refused");
        // A mount (the control in a mount namespace of its own), and file
        // capabilities on a program it may write.
        let mount =
            "unshare -m mount -t tmpfs serverfs-test \"$TMPDIR\" && echo ok || echo refused";
        let control = mount.replace("$TMPDIR", &root.display().to_string());
        assert_eq!(plain(&control, root).trim(), "ok", "control (root)");
        assert_eq!(confined(mount, root, None).await.stdout.trim(), "refused");
        let setcap = "cp /bin/true \"$TMPDIR/t\" && setcap cap_net_raw+ep \"$TMPDIR/t\" \
                      && echo ok || echo refused";
        let control = setcap.replace("$TMPDIR", &root.display().to_string());
        assert_eq!(plain(&control, root).trim(), "ok", "control (root)");
        assert_eq!(confined(setcap, root, None).await.stdout.trim(), "refused");
        // The server's environment (its tokens): this test process made
        // non-dumpable as the server is; root with capabilities reads it.
        serverfs_exec::harden_server_process().unwrap();
        let environ = format!("cat /proc/{me}/environ > /dev/null && echo ok || echo refused");
        assert_eq!(plain(&environ, root).trim(), "ok", "control (root)");
        assert_eq!(confined(&environ, root, None).await.stdout.trim(), "refused");
    } else {
        eprintln!("not root: the capability checks ran only as a plain user");
    }
}

/// `--command-network off`: every socket family but AF_UNIX is refused by
/// the filter (UDP, MPTCP, and so `listen` without `bind`), not only TCP
/// `bind`/`connect` by Landlock.
#[tokio::test(flavor = "multi_thread")]
async fn network_off_leaves_only_unix_sockets() {
    let dir = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
    let root = dir.path();
    let mut sandbox = SandboxConfig::new(root);
    sandbox.network = serverfs_exec::Network::Off;
    for (what, statement) in [
        ("UDP", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"),
        ("MPTCP", "socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)"),
        ("listen without bind", "socket.socket(socket.AF_INET6).listen()"),
        ("SCTP", "socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)"),
    ] {
        let attack = python(statement);
        // A kernel without SCTP (as here) says so to the control; the
        // filter refuses by family, before the protocol is looked at.
        let control = plain(&attack, root);
        let lands = if what == "SCTP" { &["ok", "EPROTONOSUPPORT"][..] } else { &["ok"][..] };
        assert!(lands.contains(&control.trim()), "control: {what}: {control}");
        let out = confined(&attack, root, Some(sandbox.clone())).await;
        assert_eq!(out.stdout.trim(), "EPERM", "{what}: {out:?}");
    }
    let unix = python("socket.socketpair(socket.AF_UNIX)");
    assert_eq!(confined(&unix, root, Some(sandbox)).await.stdout.trim(), "ok", "AF_UNIX");
}

/// A command that may write where the supervisor program lies replaces it;
/// the next commands are still started by the program that was there when
/// the `Supervisor` was made (a sealed copy in memory). The control, a
/// supervisor started from the file, runs the replacement.
#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_supervisor_file_changes_nothing() {
    for sealed in [false, true] {
        let dir = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
        let program = dir.path().join("supervisor");
        serverfs_test_support::copy_program(
            env!("CARGO_BIN_EXE_serverfs-exec-supervisor"),
            &program,
        );
        let marker = dir.path().join("escaped");
        let supervisor = if sealed {
            serverfs_exec::Supervisor::sealed(&program, Vec::<String>::new()).unwrap()
        } else {
            serverfs_exec::Supervisor::new(&program, Vec::<String>::new())
        };
        let replace = format!(
            "printf '#!/bin/sh\\ntouch {marker}\\n' > new && chmod +x new && mv new {program}",
            marker = marker.display(),
            program = program.display()
        );
        let mut results = Vec::new();
        for command in [replace.as_str(), "echo fine", "echo fine"] {
            let mut s = spec(command, dir.path());
            s.supervisor = supervisor.clone();
            results.push(run(s, &CancellationToken::new(), None).await);
        }
        assert_eq!(results[0].as_ref().unwrap().exit_code, Some(0), "{results:?}");
        if sealed {
            assert!(!marker.exists(), "the replacement ran");
            for r in &results[1..] {
                assert_eq!(r.as_ref().unwrap().stdout, "fine\n", "{results:?}");
            }
        } else {
            assert!(marker.exists(), "control: the replaced file is what runs");
        }
    }
}

/// Where seccomp cannot be used (here: a thread whose own filter refuses
/// the `seccomp` call, as a service manager's `SystemCallFilter` may), the
/// start-up probe says so; elsewhere it passes. The probe's thread is a
/// child of the calling one and so inherits its filter.
#[test]
fn the_start_up_probe_fails_where_seccomp_is_refused() {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    serverfs_exec::probe_confine(None).expect("seccomp works here");
    let mut network_off = SandboxConfig::new("/");
    network_off.network = serverfs_exec::Network::Off;
    serverfs_exec::probe_confine(Some(&network_off)).expect("seccomp works here");
    let refused = std::thread::spawn(|| {
        let filter = SeccompFilter::new(
            [(libc::SYS_seccomp, vec![])].into_iter().collect(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            TargetArch::try_from(std::env::consts::ARCH).unwrap(),
        )
        .unwrap();
        let program = BpfProgram::try_from(filter).unwrap();
        seccompiler::apply_filter(&program).unwrap();
        serverfs_exec::probe_confine(None)
    })
    .join()
    .unwrap();
    let e = refused.expect_err("the probe passed where seccomp is refused").to_string();
    assert!(e.contains("Operation not permitted") || e.contains("EPERM"), "{e}");
}

/// As root each command has IPC of its own: a SysV segment one command
/// leaves behind is not there for the next (its namespace went with it).
/// Without the layer the segment outlives its command and the next one
/// sees it, as plain processes do (the control).
#[tokio::test(flavor = "multi_thread")]
async fn a_commands_ipc_objects_are_its_own_as_root() {
    if !is_root() {
        eprintln!("not root: IPC namespaces need CAP_SYS_ADMIN; commands share the user's");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let make = "ipcmk -M 4096 | awk '{print $NF}'";
    // (ipcs exits 0 either way; it says "not found".)
    let look = |id: &str| {
        format!("ipcs -m -i {id} 2>&1 | grep -q 'not found' && echo unseen || echo seen")
    };

    let id = plain(make, root).trim().to_owned();
    let seen = plain(&look(&id), root);
    plain(&format!("ipcrm -m {id}"), root);
    assert_eq!(seen.trim(), "seen", "control");

    let made = confined(make, root, None).await;
    let id = made.stdout.trim().to_owned();
    assert!(id.parse::<u32>().is_ok(), "{made:?}");
    let next = confined(&look(&id), root, None).await;
    if next.stdout.trim() == "seen" {
        // The layer failed: the segment is the machine's; leave none behind
        // (otherwise the id is another namespace's, never to be removed here).
        plain(&format!("ipcrm -m {id}"), root);
    }
    assert_eq!(next.stdout.trim(), "unseen", "{next:?}");
}

/// `--command-capabilities`: a root server's commands keep exactly the
/// named capabilities (here CAP_MKNOD: a device node can be made), and
/// nothing else (CAP_SYS_ADMIN: no hostname). Without it, none (the
/// first test).
#[tokio::test(flavor = "multi_thread")]
async fn named_capabilities_are_kept_and_no_other() {
    if !is_root() {
        eprintln!("not root: no capabilities to keep");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keep = serverfs_exec::KeptCapabilities::parse(&["cap_mknod"]).unwrap();
    assert_eq!(keep.names(), ["CAP_MKNOD"]);
    let cancel = CancellationToken::new();
    let with = |command: &str| {
        let mut s = spec(command, dir.path());
        s.supervisor = s.supervisor.clone().keeping(keep);
        run(s, &cancel, None)
    };
    let mknod = "mknod \"$TMPDIR/blk\" b 7 0 && echo ok || echo refused";
    assert_eq!(with(mknod).await.unwrap().stdout.trim(), "ok");
    let hostname = "unshare -u hostname serverfs-test && echo ok || echo refused";
    assert_eq!(with(hostname).await.unwrap().stdout.trim(), "refused");
    let caps = with("grep ^CapEff /proc/self/status").await.unwrap();
    assert_eq!(caps.stdout.trim(), "CapEff:\t0000000008000000", "CAP_MKNOD is bit 27");
}

#[test]
fn capability_names_are_checked() {
    use serverfs_exec::KeptCapabilities;
    assert!(KeptCapabilities::parse(&["CAP_NET_BIND_SERVICE", " chown", ""]).is_ok());
    let e = KeptCapabilities::parse(&["CAP_NOPE"]).unwrap_err().to_string();
    assert!(e.starts_with("'CAP_NOPE' is not a capability"), "{e}");
    assert!(KeptCapabilities::parse::<&str>(&[]).unwrap().is_empty());
}
