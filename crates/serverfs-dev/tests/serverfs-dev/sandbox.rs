//! The command sandbox and the survivor guarantee, end to end: the real
//! binary over stdio, as root and as `nobody` (through `setpriv` when the
//! test runs as root).

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ALICE, BOB, Client, Project, call, ok};
use serde_json::json;

/// The forged-status attack (see the exec crate's tests).
const FORGE: &str = include_str!("../../../exec/tests/forge.py");

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n")
}

fn tag() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("{}{}", std::process::id(), nanos.subsec_nanos())
}

/// A process of the command (not the supervisor, whose argv holds the
/// command text) holds `needle`.
fn wait_running(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = serverfs_test_support::pids_with(needle).into_iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !String::from_utf8_lossy(&c).contains("--serverfs-exec="))
        });
        if running {
            return;
        }
        assert!(Instant::now() < deadline, "never started: {needle}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_none(needle: &str) {
    let left = serverfs_test_support::pids_with(needle);
    assert!(left.is_empty(), "survivors of {needle}: {left:?}");
}

/// A stdio client of the server with `args`, as `nobody` when `nobody`.
async fn start(p: &Project, nobody: bool, args: &[&str]) -> Client {
    let mut cmd =
        if nobody { p.command_as_nobody() } else { tokio::process::Command::from(p.command()) };
    cmd.arg("--stdio").args(args).stderr(Stdio::null());
    common::serve(cmd).await
}

fn attack(t: &str) -> String {
    format!("setsid sleep 300.{t} & /usr/bin/python3 -c '{FORGE}' $PPID; sleep 301.{t}")
}

/// Unsandboxed (the attack may reach the supervisor: as root it forges the
/// line, as nobody the non-dumpable supervisor refuses the copy but the
/// kill lands): the call never reports the forged exit 0 and nothing
/// survives, after `bash` and after `shell_close`.
async fn forged_status_leaves_no_survivor(nobody: bool) {
    let p = Project::new();
    let client = start(&p, nobody, &["--sandbox", "off"]).await;
    let t = tag();
    let (is_error, v) = call(&client, "bash", json!({"command": attack(&t)})).await;
    assert!(is_error, "{v}");
    assert!(v.as_str().unwrap().starts_with("INTERNAL_ERROR"), "{v}");
    assert_none(&t);

    let t = tag();
    let id = ok(&client, "shell_open", json!({})).await["session_id"].as_str().unwrap().to_owned();
    ok(&client, "shell_write", json!({"session_id": id, "input": format!("{}\n", attack(&t))}))
        .await;
    let v = loop {
        let v = ok(&client, "shell_read", json!({"session_id": id, "wait_ms": 5000})).await;
        if v["exited"] == true {
            break v;
        }
    };
    assert_eq!(v["exit_code"], json!(null), "forged status believed: {v}");
    ok(&client, "shell_close", json!({"session_id": id})).await;
    assert_none(&t);

    // Sandboxed: the attack does not even reach the supervisor.
    drop(client);
    let client = start(&p, nobody, &[]).await;
    let t = tag();
    let v = ok(&client, "bash", json!({"command": attack(&t), "timeout_seconds": 3})).await;
    let out = v["stdout"].as_str().unwrap();
    assert!(out.contains("pidfd_getfd failed") && out.contains("kill failed"), "{v}");
    assert_eq!(v["timed_out"], true, "{v}");
    assert_none(&t);
    let t = tag();
    let id = ok(&client, "shell_open", json!({})).await["session_id"].as_str().unwrap().to_owned();
    ok(&client, "shell_write", json!({"session_id": id, "input": format!("{}\n", attack(&t))}))
        .await;
    wait_running(&format!("301.{t}"));
    ok(&client, "shell_close", json!({"session_id": id})).await;
    assert_none(&t);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn forged_status_as_the_server_s_user() {
    forged_status_leaves_no_survivor(false).await;
}

#[tokio::test]
async fn forged_status_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    forged_status_leaves_no_survivor(true).await;
}

#[tokio::test]
async fn writes_outside_the_root_are_refused_inside_work() {
    let p = Project::new();
    // Outside the root and outside /tmp (where commands may write), even
    // when the checkout itself is below /tmp.
    let elsewhere = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
    let victim = elsewhere.path().join("victim");
    let command = format!(
        "echo x > {v}; echo r=$?; echo y > inside; echo t > \"$TMPDIR/t\" && echo tmp=ok",
        v = victim.display()
    );
    // Negative control: --sandbox off writes outside.
    let client = start(&p, false, &["--sandbox", "off"]).await;
    let v = ok(&client, "bash", json!({"command": command})).await;
    assert!(v["stdout"].as_str().unwrap().contains("r=0"), "{v}");
    assert!(victim.exists());
    std::fs::remove_file(&victim).unwrap();
    client.cancel().await.unwrap();

    let client = start(&p, false, &[]).await;
    let v = ok(&client, "bash", json!({"command": command})).await;
    let out = v["stdout"].as_str().unwrap();
    assert!(out.contains("r=1") && out.contains("tmp=ok"), "{v}");
    // Landlock says EACCES; the read-only view, where the kernel lets the
    // supervisor make it (here), says EROFS first.
    let stderr = v["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("Read-only file system") || stderr.contains("Permission denied"),
        "{v}"
    );
    assert!(!victim.exists());
    assert_eq!(p.read("inside"), "y\n");
    client.cancel().await.unwrap();
}

/// What the sandbox's own view of the file system takes away (see the exec
/// crate's mounts module), as the server's user (root here) and as
/// `nobody` (a user namespace): metadata of a file outside the root that
/// the command's user owns (mode, times, extended attributes), another
/// session's `TMPDIR`, POSIX shared memory and SysV objects, and (as
/// root) its processes in `/proc` and the sysctls root may write. The
/// negative control is the same server with `--sandbox off`, where each
/// attack lands.
async fn outside_metadata_and_other_sessions_are_out_of_reach(nobody: bool) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let p = Project::new();
    let outside = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = outside.path().join("victim");
    let t = tag();
    let metadata = format!(
        "v={v}; chmod 600 $v; echo chmod=$?; touch -m -d 2001-01-01 $v; echo touch=$?; \
         python3 -c 'import os; os.setxattr(\"'$v'\", \"user.t\", b\"1\")'; echo xattr=$?",
        v = victim.display()
    );
    for sandbox in [false, true] {
        std::fs::write(&victim, "v").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        if nobody {
            std::os::unix::fs::chown(&victim, Some(65534), Some(65534)).unwrap();
        }
        let args: &[&str] = if sandbox { &[] } else { &["--sandbox", "off"] };
        let client = start(&p, nobody, args).await;
        let v = ok(&client, "bash", json!({"command": metadata})).await;
        let out = v["stdout"].as_str().unwrap();
        let meta = std::fs::metadata(&victim).unwrap();
        // The same through `..` from the working directory (a command
        // handed to the supervisor started ahead, which got its directory
        // from the server's mounts): the view's mounts all the way up.
        let relative =
            format!("chmod 640 \"$(realpath --relative-to=. {})\"; echo rel=$?", victim.display());
        let r = ok(&client, "bash", json!({"command": relative})).await;
        assert_eq!(r["stdout"], if sandbox { "rel=1\n" } else { "rel=0\n" }, "{r}");
        let mode = std::fs::metadata(&victim).unwrap().mode() & 0o777;
        assert_eq!(mode, if sandbox { 0o644 } else { 0o640 }, "{r}");
        if !nobody {
            // Root without capabilities may write root's 0644 sysctls (the
            // kernel checks the uid there): the same value back, harmless.
            let sysctl = "/proc/sys/kernel/printk_ratelimit";
            let same =
                format!("cat {sysctl} > $TMPDIR/v && cat $TMPDIR/v > {sysctl} && echo wrote");
            let w = ok(&client, "bash", json!({"command": same})).await;
            let wrote = w["stdout"] == "wrote\n";
            assert_eq!(wrote, !sandbox, "sandbox {sandbox}: {w}");
        }
        if sandbox {
            // And no capability, also where the user namespace gave the
            // supervisor some (as nobody).
            let caps =
                "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | tr -d '0\\t' | sort -u";
            let c = ok(&client, "bash", json!({"command": caps})).await;
            assert_eq!(c["stdout"], "CapAmb:\nCapBnd:\nCapEff:\nCapInh:\nCapPrm:\n", "{c}");
            // So each privileged attack is refused (controls as root: the
            // exec crate's confine tests).
            let privileged = "mknod \"$TMPDIR/b\" b 7 0 && echo mknod; \
                unshare -u hostname serverfs-test && echo hostname; \
                mount -t tmpfs serverfs-test \"$TMPDIR\" && echo mount; \
                cp /bin/true \"$TMPDIR/t\"; setcap cap_net_raw+ep \"$TMPDIR/t\" && echo setcap; \
                python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)' \
                  2> /dev/null && echo raw; echo done";
            let a = ok(&client, "bash", json!({"command": privileged})).await;
            assert_eq!(a["stdout"], "done\n", "{a}");
            assert_eq!(out, "chmod=1\ntouch=1\nxattr=1\n", "{v}");
            assert!(v["stderr"].as_str().unwrap().contains("Read-only file system"), "{v}");
            assert_eq!(meta.mode() & 0o777, 0o644);
            assert!(meta.mtime() > 1_000_000_000 + 365 * 86_400 * 10, "mtime changed");
        } else {
            assert_eq!(out, "chmod=0\ntouch=0\nxattr=0\n", "control: {v}");
            assert_eq!(meta.mode() & 0o777, 0o600, "control");
        }

        // A session leaves a file in its TMPDIR, a POSIX shared memory
        // object and (as nobody) a SysV segment; another call looks.
        let id =
            ok(&client, "shell_open", json!({})).await["session_id"].as_str().unwrap().to_owned();
        let setup = format!(
            "sleep 600.{t} & echo secret > \"$TMPDIR/s\"; echo shm > /dev/shm/sfs-{t} && echo shm-made; \
             echo \"tmpdir=$TMPDIR\"; echo \"ipc=$(ipcmk -M 4096 | tr -dc 0-9)\"\n"
        );
        ok(&client, "shell_write", json!({"session_id": id, "input": setup})).await;
        let mut said = String::new();
        while !said.contains("ipc=") || !said.ends_with('\n') {
            let v = ok(&client, "shell_read", json!({"session_id": id, "wait_ms": 5000})).await;
            said.push_str(v["output"].as_str().unwrap());
            assert_ne!(v["exited"], true, "{said}");
        }
        let value = |key: &str| {
            said.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_default().to_owned()
        };
        let (tmpdir, ipc) = (value("tmpdir="), value("ipc="));
        assert!(!tmpdir.is_empty() && !ipc.is_empty() && said.contains("shm-made"), "{said}");
        let look = format!(
            "cat {tmpdir}/s; ls \"$(dirname \"$TMPDIR\")\" | wc -l; cat /dev/shm/sfs-{t}; \
             grep -qs '60[0][.]{t}' /proc/[0-9]*/cmdline && echo proc-seen || echo proc-unseen; \
             ipcs -m | awk '{{print $2}}' | grep -qx {ipc} && echo ipc-seen || echo ipc-unseen"
        );
        let v = ok(&client, "bash", json!({"command": look})).await;
        let out = v["stdout"].as_str().unwrap();
        if sandbox {
            assert!(!out.contains("secret") && !out.contains("shm"), "{v}");
            // Only its own TMPDIR is in the directory of them.
            assert!(out.starts_with("1\n"), "{v}");
            if nobody {
                // Without root /proc is the host's; IPC is its own.
                assert!(out.ends_with("proc-seen\nipc-unseen\n"), "{v}");
            } else {
                assert!(out.ends_with("proc-unseen\nipc-unseen\n"), "{v}");
            }
        } else {
            assert!(out.contains("secret") && out.contains("shm"), "control: {v}");
            assert!(out.contains("proc-seen\n"), "control: {v}");
            if nobody {
                assert!(out.ends_with("ipc-seen\n"), "control: {v}");
            }
            let clean = format!("rm -f /dev/shm/sfs-{t}; ipcrm -m {ipc}");
            ok(&client, "bash", json!({"command": clean})).await;
        }
        ok(&client, "shell_close", json!({"session_id": id})).await;
        client.cancel().await.unwrap();
        // A server that ends cleanly removes its directory of TMPDIRs
        // (`serverfs-cmd-<its pid>-<random>`).
        let parent = std::path::Path::new(&tmpdir).parent().unwrap().to_owned();
        let name = parent.file_name().unwrap().to_str().unwrap();
        let server = name.strip_prefix("serverfs-cmd-").unwrap().split('-').next().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::path::Path::new(&format!("/proc/{server}")).exists() {
            assert!(Instant::now() < deadline, "the server never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!parent.exists(), "{} left behind", parent.display());
    }
    assert!(!std::path::Path::new(&format!("/dev/shm/sfs-{t}")).exists());
}

#[tokio::test]
async fn outside_metadata_and_other_sessions_as_the_server_s_user() {
    outside_metadata_and_other_sessions_are_out_of_reach(false).await;
}

#[tokio::test]
async fn outside_metadata_and_other_sessions_as_nobody() {
    if !is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    outside_metadata_and_other_sessions_are_out_of_reach(true).await;
}

/// The server's start-up log line about the sandbox (stdin closed at once,
/// so it exits after starting), and its exit status.
fn start_up(p: &Project, args: &[&str], env: &[(&str, &str)]) -> (String, bool) {
    let out = p
        .command()
        .arg("--stdio")
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (String::from_utf8_lossy(&out.stderr).into_owned(), out.status.success())
}

#[test]
fn the_start_up_log_says_which_protections_are_active() {
    let p = Project::new();
    let (log, ok) = start_up(&p, &[], &[]);
    assert!(ok, "{log}");
    assert!(log.contains("\"event\":\"sandbox\"") && log.contains("landlock ABI"), "{log}");
    assert!(log.contains("signals/abstract sockets scoped"), "{log}");
    // This kernel gives commands a view of their own (tested above).
    assert!(
        log.contains("\"event\":\"sandbox_view\"") && log.contains("own mount namespace"),
        "{log}"
    );
    let (log, _) = start_up(&p, &["--command-network", "off"], &[]);
    assert!(log.contains("tcp denied"), "{log}");
    let (log, ok) = start_up(&p, &["--sandbox", "off"], &[]);
    assert!(ok && log.contains("off (--sandbox off)") && !log.contains("sandbox_view"), "{log}");
    // An older kernel (simulated): what is missing is said.
    let (log, ok) =
        start_up(&p, &["--command-network", "off"], &[("SERVERFS_SANDBOX_MAX_ABI", "3")]);
    assert!(ok && log.contains("landlock ABI 3") && log.contains("tcp allowed"), "{log}");
    assert!(log.contains("not scoped"), "{log}");
    // No Landlock at all (simulated): refused, naming the way out.
    let (log, ok) = start_up(&p, &[], &[("SERVERFS_SANDBOX_MAX_ABI", "0")]);
    assert!(!ok && log.contains("--sandbox off"), "{log}");
    // A writable path that does not exist is refused too, by its setting.
    let (log, ok) = start_up(&p, &["--command-writable", "/does/not/exist"], &[]);
    assert!(
        !ok && log
            .contains("SERVERFS_COMMAND_WRITABLE (--command-writable): the path does not exist"),
        "{log}"
    );
}

/// Runs `program` in a new session whose controlling terminal is the pty
/// at `tty`, as a program started from a shell in that terminal.
fn in_terminal_session(tty: &str, program: &std::process::Command) -> std::process::Command {
    let mut wrapped = std::process::Command::new("python3");
    wrapped
        .arg("-c")
        .arg("import os, sys; os.setsid(); os.close(os.open(sys.argv[1], os.O_RDWR)); os.execvp(sys.argv[2], sys.argv[2:])")
        .arg(tty)
        .arg(program.get_program())
        .args(program.get_args());
    for (key, value) in program.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    wrapped
}

/// Terminal injection: the server runs in a session whose controlling
/// terminal is a pty this test holds (as when started from a shell), and a
/// command pushes a line into it with `TIOCSTI`, through `/dev/tty` and
/// through the pty's own path. Nothing reaches the pty's reader: the
/// command has no controlling terminal (its supervisor's own session),
/// and the filter (and the kernel, for a terminal not the caller's)
/// refuses the ioctl. The control, a plain process in such a session,
/// types a line the reader reads.
#[tokio::test]
async fn a_command_cannot_type_into_the_servers_terminal() {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let tty = ptsname(&master, Vec::new()).unwrap().into_string().unwrap();
    // The pty's reader: its slave side, as the shell in it reads.
    let reader =
        rustix::fs::open(&tty, OFlags::RDWR | OFlags::NOCTTY | OFlags::NONBLOCK, Mode::empty())
            .unwrap();
    // Everything waiting (a canonical-mode read gives one line).
    let typed = || {
        let mut all = String::new();
        let mut buf = [0u8; 256];
        loop {
            match rustix::io::read(&reader, &mut buf) {
                Ok(n) if n > 0 => all.push_str(&String::from_utf8_lossy(&buf[..n])),
                Ok(_) | Err(rustix::io::Errno::AGAIN) => return all,
                Err(e) => panic!("reading the pty: {e}"),
            }
        }
    };
    let attack = format!(
        "python3 -c 'import errno, fcntl, os, termios\nfor t in (\"/dev/tty\", \"{tty}\"):\n    try:\n        fd = os.open(t, os.O_RDWR | os.O_NOCTTY)\n        for c in b\"echo serverfs-typed\\n\":\n            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n        print(t, \"typed\")\n    except OSError as e:\n        print(t, errno.errorcode[e.errno])'"
    );

    let mut plain = std::process::Command::new("bash");
    plain.args(["-c", &attack]);
    let out = in_terminal_session(&tty, &plain).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    // On kernels with dev.tty.legacy_tiocsti=0 the ioctl is gone for all.
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti");
    if legacy.is_ok_and(|v| v.trim() == "0") {
        eprintln!("dev.tty.legacy_tiocsti=0: no control possible; the control said {said}");
    } else {
        assert!(said.starts_with("/dev/tty typed\n"), "control: {said}");
        assert!(typed().contains("echo serverfs-typed"), "control: nothing reached the reader");
    }

    let p = Project::new();
    let mut server = in_terminal_session(&tty, &p.command());
    server.arg("--stdio").stderr(Stdio::null());
    let client = common::serve(tokio::process::Command::from(server)).await;
    let v = ok(&client, "bash", json!({"command": attack})).await;
    // The pty is not even there: the view has a /dev/pts of its own.
    assert_eq!(v["stdout"], format!("/dev/tty ENXIO\n{tty} ENOENT\n"), "{v}");
    assert_eq!(typed(), "", "a command typed into the server's terminal");
    client.cancel().await.unwrap();
}

/// Descriptors the server was started with (a launcher that leaves a file
/// outside and a pty master open, without close-on-exec) reach no command:
/// the server marks them close-on-exec at start (checked in its fdinfo, as
/// root), and each supervisor again before its command. Control: a plain
/// program started by the same launcher writes through them.
#[test]
fn descriptors_the_server_was_started_with_reach_no_command() {
    const LAUNCHER: &str = "import os, sys\n\
        f = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n\
        master, slave = os.openpty()\n\
        for fd in (f, master, slave):\n    os.set_inheritable(fd, True)\n\
        os.execvp(sys.argv[2], sys.argv[2:])\n";
    // What a program the command starts holds, above fds 0-2, of the
    // launcher's (bash's own saved descriptors are not inherited ones).
    const PROBE: &str = "find /proc/self/fd -mindepth 1 -printf '%f %l\\n' | grep -E 'inherited|ptmx|/dev/pts' | grep -vE '^[012] '; echo done";
    let p = Project::new();
    let outside = p.dir.path().join("outside/inherited.txt");
    std::fs::write(&outside, "").unwrap();
    let launch = |program: &std::ffi::OsStr| {
        let mut cmd = std::process::Command::new("python3");
        cmd.args(["-c", LAUNCHER]).arg(&outside).arg(program);
        cmd
    };
    let control = launch("bash".as_ref()).args(["-c", PROBE]).output().unwrap();
    let control = String::from_utf8_lossy(&control.stdout);
    assert!(control.lines().count() >= 4, "control: {control}");

    let server = p.command();
    let mut cmd = launch(server.get_program());
    cmd.args(server.get_args()).stderr(Stdio::null());
    for (key, value) in server.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let mut raw = common::RawStdio::spawn(cmd);
    if is_root() {
        let pid = raw.child.id();
        let mut inherited = 0;
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            if target == outside
                || target.starts_with("/dev/pts")
                || target == std::path::Path::new("/dev/ptmx")
            {
                let n = entry.file_name();
                let info =
                    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", n.to_string_lossy()))
                        .unwrap();
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap().trim();
                let flags = u32::from_str_radix(flags, 8).unwrap();
                assert_ne!(
                    flags & 0o2000000,
                    0,
                    "fd {n:?} -> {target:?} is inheritable in the server"
                );
                inherited += 1;
            }
        }
        assert!(inherited >= 3, "the launcher's descriptors are not in the server");
    }
    let answer = raw.call(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": PROBE}}}));
    let stdout = answer["result"]["structuredContent"]["stdout"].as_str().unwrap_or_default();
    assert_eq!(stdout, "done\n", "{answer}");
    raw.finish();
}

/// The operator's git in `dir` (isolated from the machine's git config;
/// any owner accepted: the repository may be nobody's).
fn operator_git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "safe.directory=*"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

/// A repository with one commit at `dir`.
fn repository(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("file.txt"), "one\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.email", "agent@example.org"],
        &["config", "user.name", "agent"],
        &["add", "-A"],
        &["commit", "-qm", "one"],
    ] {
        let out = operator_git(dir, args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

/// A command plants code for the operator's git in the project's
/// repository and in a nested one: a hook, `core.fsmonitor`,
/// `core.hooksPath`, a `!` alias, a `.git` swapped for its own. After it,
/// the operator's git (status, commit, the alias) runs none of it, while
/// the agent's own git work (commit, branch, stash, checkout) went through
/// in the same run. Negative control: with `--sandbox off` each plant
/// lands and the operator's git runs it.
async fn git_leaves_nothing_for_the_operator(nobody: bool) {
    for sandbox in [false, true] {
        let p = Project::new();
        std::fs::remove_dir_all(p.path(".git")).unwrap();
        repository(&p.root());
        repository(&p.path("vendor/dep"));
        let marker = p.root().parent().unwrap().join("outside/ran");
        if nobody {
            let chown = std::process::Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(p.root())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let m = marker.display();
        let plant = format!(
            "mkdir -p evil && printf '#!/bin/sh\\ntouch {m}\\n' > evil/pre-commit && chmod +x evil/pre-commit
             for g in .git vendor/dep/.git; do
               cp evil/pre-commit $g/hooks/pre-commit; echo hook=$?
               git --git-dir=$g config core.fsmonitor 'touch {m}; false'; echo fsmonitor=$?
               git --git-dir=$g config alias.st '!touch {m}'; echo alias=$?
             done
             git config core.hooksPath evil; echo hooksPath=$?
             cp -r .git .git-copy && mv .git .git-moved && mv .git-copy .git; echo swap=$?
             true"
        );
        let args: &[&str] = if sandbox { &[] } else { &["--sandbox", "off"] };
        let client = start(&p, nobody, args).await;
        let planted = ok(&client, "bash", json!({"command": plant})).await;
        let work = "echo two >> file.txt && git add -A && git commit -qm two && \
                    git checkout -qb topic && echo three >> file.txt && git stash -q && \
                    git stash pop -q && git commit -qam three && git checkout -q main && \
                    git merge -q --no-edit topic && echo agent-ok";
        let (_, worked) = call(&client, "bash", json!({"command": work})).await;
        client.cancel().await.unwrap();

        for dir in [p.root(), p.path("vendor/dep")] {
            operator_git(&dir, &["status", "--short"]);
            operator_git(&dir, &["commit", "-q", "--allow-empty", "-m", "operator"]);
            operator_git(&dir, &["st"]);
        }
        assert_eq!(marker.exists(), !sandbox, "sandbox {sandbox}: {planted}");
        if sandbox {
            // (Unsandboxed, the planted hooks already ran in the agent's commit.)
            assert_eq!(worked["stdout"], "agent-ok\n", "{worked}");
            let out = planted["stdout"].as_str().unwrap();
            assert!(!out.contains("=0"), "a plant went through: {planted}");
            let log = operator_git(&p.root(), &["log", "--format=%s"]);
            assert_eq!(String::from_utf8_lossy(&log.stdout), "operator\nthree\ntwo\none\n");
        }
    }
}

/// A repository a command creates (`git init`, `git clone`) had hooks and
/// config the command could write before any later command's view pinned
/// them: the answer names it (text and `repositories_created`), and so
/// does the call's audit line; a command that creates none names none.
/// Control, by hand: without the supervisor's second look, nothing is
/// named.
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_a_command_creates_is_named() {
    let p = Project::new();
    let mut server =
        serverfs_test_support::listen(p.command_for_alice_and_bob(), Duration::from_secs(60));
    let url = format!("http://{}/mcp", server.addr);
    let alice = common::http_client(&url, ALICE).await;
    let plant = "git init -q sub && printf '#!/bin/sh\\necho pwned\\n' > sub/.git/hooks/post-checkout \
                 && git clone -q sub vendor/copy 2>/dev/null; echo done";
    let made = ok(&alice, "bash", json!({ "command": plant })).await;
    assert_eq!(made["stdout"], "done\n", "{made}");
    assert_eq!(made["repositories_created"], json!(["sub/.git", "vendor/copy/.git"]), "{made}");
    let none = ok(&alice, "bash", json!({"command": "git -C sub status --short; true"})).await;
    assert!(none.get("repositories_created").is_none(), "{none}");
    let text =
        alice
            .call_tool(rmcp::model::CallToolRequestParams::new("bash").with_arguments(
                json!({"command": "git init -q other"}).as_object().unwrap().clone(),
            ))
            .await
            .unwrap();
    let text = serde_json::to_value(&text.content).unwrap()[0]["text"].as_str().unwrap().to_owned();
    assert!(
        text.contains("git: this command created the repository other/.git; its hooks and config are the command's"),
        "{text}"
    );
    alice.cancel().await.unwrap();
    let mut audited = Vec::new();
    while audited.len() < 3 {
        let line = server.log.next().expect("the server's log ends early").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["event"] == "command" {
            audited.push(v);
        }
    }
    assert_eq!(audited[0]["repositories_created"], r#"["sub/.git", "vendor/copy/.git"]"#);
    assert!(audited[1].get("repositories_created").is_none(), "{}", audited[1]);
    assert_eq!(audited[2]["repositories_created"], r#"["other/.git"]"#);
}

#[tokio::test]
async fn git_leaves_nothing_for_the_operator_as_the_server_s_user() {
    git_leaves_nothing_for_the_operator(false).await;
}

#[tokio::test]
async fn git_leaves_nothing_for_the_operator_as_nobody() {
    if is_root() {
        git_leaves_nothing_for_the_operator(true).await;
    }
}

/// A client over HTTP holding `token`.
/// A command moves the directory holding the root away and leaves a
/// symbolic link to a directory of its choosing where it was. The server
/// opened the root at start and keeps it; its later commands must not get
/// the link's target as their writable root: each is refused (the root is
/// not the directory it was at the server's start) or confined as before.
/// The control: a command that writes there directly, without the swap,
/// is refused by Landlock (the target is outside the root). And a restart
/// refuses the root (control, by hand: without the state dir's record of
/// the root, the restarted server served the link's target).
async fn a_swapped_root_gives_commands_nothing(nobody: bool) {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let parent = p.root().parent().unwrap().to_path_buf();
    let moved = parent.with_extension("moved");
    let victim = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
    let target = victim.path().join("project");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(victim.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o777)).unwrap();
    let write = |n: usize| format!("echo x > {}/pwned-{n}; echo wrote=$?", p.root().display());
    let swap = format!(
        "mv {parent} {moved} && ln -s {victim} {parent} && echo swapped",
        parent = parent.display(),
        moved = moved.display(),
        victim = victim.path().display()
    );

    // Made now: as nobody it opens up the root's directories, which the
    // swap takes away.
    let mut restart = if nobody { p.as_nobody(&p.command()) } else { p.command() };
    let mut server = None;
    let clients = if nobody {
        std::os::unix::fs::chown(&parent, Some(65534), Some(65534)).unwrap();
        vec![start(&p, true, &[]).await]
    } else {
        let http = server.insert(common::HttpServer::start_with(p.command_for_alice_and_bob()));
        vec![common::http_client(&http.url, ALICE).await, common::http_client(&http.url, BOB).await]
    };
    let v = ok(&clients[0], "bash", json!({"command": write(0)})).await;
    assert_eq!(v["stdout"], "wrote=0\n", "before the swap the root is writable: {v}");
    let v = ok(&clients[0], "bash", json!({"command": swap})).await;
    assert_eq!(v["stdout"], "swapped\n", "{v}");
    let mut answers = Vec::new();
    for n in 1..=6 {
        let client = &clients[n % clients.len()];
        answers.push(call(client, "bash", json!({"command": write(n)})).await);
    }
    for client in clients {
        client.cancel().await.unwrap();
    }
    drop(server);
    // A restart (a stdio server's next session) serves no more than the
    // running server did: the root now leads into the link's target.
    let restarted = restart.arg("--stdio").stdin(Stdio::null()).output().unwrap();
    // Undo the swap before any assertion: the moved directory must not be
    // left behind.
    std::fs::remove_file(&parent).unwrap();
    std::fs::rename(&moved, &parent).unwrap();
    let said = String::from_utf8_lossy(&restarted.stderr);
    assert_eq!(restarted.status.code(), Some(2), "a restart served the swapped root: {said}");
    assert!(said.contains("SERVERFS_ROOT") && said.contains("now leads to"), "{said}");
    nothing_went_through(&target, &answers);
}

/// After a swap: nothing landed in `target`, and each of `answers` (a
/// `write(n)` command's) was refused or denied.
fn nothing_went_through(target: &std::path::Path, answers: &[(bool, serde_json::Value)]) {
    let written: Vec<_> = std::fs::read_dir(target).unwrap().flatten().map(|e| e.path()).collect();
    assert!(written.is_empty(), "commands wrote through the swapped path: {written:?} {answers:?}");
    for (is_error, v) in answers {
        let refused = *is_error && v.as_str().is_some_and(|t| t.contains("command was not run"));
        let denied = !is_error && v["stdout"] == "wrote=1\n";
        assert!(refused || denied, "{v} {answers:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swapped_root_gives_commands_nothing_as_the_server_s_user() {
    a_swapped_root_gives_commands_nothing(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swapped_root_gives_commands_nothing_as_nobody() {
    if is_root() {
        a_swapped_root_gives_commands_nothing(true).await;
    }
}

/// The same swap one level above a `--command-writable` path: the path lies
/// in `/tmp/<dir>/outer/w`, where commands may rename `outer` and leave a
/// symbolic link to a directory of their choosing in its place. Later
/// commands must not write into the link's target through the path: each
/// is refused (the path is not the directory it was at the server's start)
/// or denied. Before the swap the path is writable (the control).
async fn a_swapped_writable_path_gives_commands_nothing(nobody: bool) {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let base = tempfile::tempdir().unwrap();
    let outer = base.path().join("outer");
    let writable = outer.join("w");
    let victim = serverfs_test_support::dir_outside_tmp(env!("CARGO_TARGET_TMPDIR"));
    let target = victim.path().join("w");
    for dir in [&writable, &target] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for dir in [base.path(), &outer, &writable, victim.path(), &target] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let write = |n: usize| format!("echo x > {}/pwned-{n}; echo wrote=$?", writable.display());
    let moved = base.path().join("outer.moved");
    let swap = format!(
        "mv {outer} {moved} && ln -s {victim} {outer} && echo swapped",
        outer = outer.display(),
        moved = moved.display(),
        victim = victim.path().display()
    );
    let client = start(&p, nobody, &["--command-writable", writable.to_str().unwrap()]).await;
    let v = ok(&client, "bash", json!({"command": write(0)})).await;
    assert_eq!(v["stdout"], "wrote=0\n", "before the swap the path is writable: {v}");
    let v = ok(&client, "bash", json!({"command": swap})).await;
    assert_eq!(v["stdout"], "swapped\n", "{v}");
    let mut answers = Vec::new();
    for n in 1..=4 {
        answers.push(call(&client, "bash", json!({"command": write(n)})).await);
    }
    client.cancel().await.unwrap();
    nothing_went_through(&target, &answers);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swapped_writable_path_gives_commands_nothing_as_the_server_s_user() {
    a_swapped_writable_path_gives_commands_nothing(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swapped_writable_path_gives_commands_nothing_as_nobody() {
    if is_root() {
        a_swapped_writable_path_gives_commands_nothing(true).await;
    }
}

/// A command makes no namespace (user, mount, network, pid, via unshare
/// or clone; clone3 is unknown to it, so libc falls back to clone), while
/// threads and child processes work as always. The control: with
/// `--command-namespaces on` a user namespace is made.
async fn commands_make_no_namespace_unless_allowed(nobody: bool) {
    let p = Project::new();
    let probe = "for ns in -U -m -n '-p -f' '-U -m'; do unshare $ns true 2>/dev/null; echo \"$ns=$?\"; done; \
                 python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join()'; \
                 (true &); wait; echo child=$?";
    let client = start(&p, nobody, &[]).await;
    let v = ok(&client, "bash", json!({"command": probe})).await;
    assert_eq!(v["stdout"], "-U=1\n-m=1\n-n=1\n-p -f=1\n-U -m=1\nthread\nchild=0\n", "{v}");
    client.cancel().await.unwrap();
    let client = start(&p, nobody, &["--command-namespaces", "on"]).await;
    let v = ok(&client, "bash", json!({"command": "unshare -U true; echo user=$?"})).await;
    assert_eq!(v["stdout"], "user=0\n", "{v}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn commands_make_no_namespace_as_the_server_s_user() {
    commands_make_no_namespace_unless_allowed(false).await;
}

#[tokio::test]
async fn commands_make_no_namespace_as_nobody() {
    if is_root() {
        commands_make_no_namespace_unless_allowed(true).await;
    }
}

/// Another server's commands' `TMPDIR`s (same user, another root) are out
/// of a command's reach: one server's command leaves a file in its
/// `TMPDIR` and keeps running; a command of a second server started after
/// it finds that directory empty, and its parent's name is not
/// `serverfs-cmd-<pid>` alone (a random part follows: nobody makes it
/// first). Control, by hand: without the covering of other servers'
/// directories the second command read the file.
async fn another_server_s_tmpdirs_are_out_of_reach(nobody: bool) {
    let (a, b) = (Project::new(), Project::new());
    let first = start(&a, nobody, &[]).await;
    let t = tag();
    let running = ok(
        &first,
        "bash",
        json!({"command": format!("echo \"$TMPDIR\"; echo secret > \"$TMPDIR/s\"; sleep 600.{t}"),
               "yield_after_seconds": 1}),
    )
    .await;
    assert_eq!(running["running"], true, "{running}");
    let tmpdir = running["stdout"].as_str().unwrap().trim().to_owned();
    let parent = std::path::Path::new(&tmpdir).parent().unwrap().to_owned();
    let name = parent.file_name().unwrap().to_str().unwrap().to_owned();
    let random = name.strip_prefix("serverfs-cmd-").and_then(|r| r.split_once('-')).map(|(_, r)| r);
    assert!(random.is_some_and(|r| r.len() == 16), "{name}");
    assert_eq!(std::fs::read_to_string(format!("{tmpdir}/s")).unwrap(), "secret\n");

    let second = start(&b, nobody, &[]).await;
    let probe = format!(
        "cat '{tmpdir}/s' 2>/dev/null || echo unread; ls -A '{}' | wc -l; \
         echo planted > '{tmpdir}/p' 2>/dev/null || echo unplanted",
        parent.display()
    );
    let looked = ok(&second, "bash", json!({ "command": probe })).await;
    assert_eq!(looked["stdout"], "unread\n0\nunplanted\n", "{looked}");
    assert!(!std::path::Path::new(&format!("{tmpdir}/p")).exists());
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
    assert_none(&t);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_server_s_tmpdirs_are_out_of_reach_as_the_server_s_user() {
    another_server_s_tmpdirs_are_out_of_reach(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_server_s_tmpdirs_are_out_of_reach_as_nobody() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the nobody variant needs setpriv as root; skipped");
        return;
    }
    another_server_s_tmpdirs_are_out_of_reach(true).await;
}

/// Unmounts (lazily) what is mounted at any of its paths when dropped.
struct Unmount(Vec<std::path::PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::process::Command::new("umount").arg("-l").arg(path).status();
        }
    }
}

/// The rename race above a mount below the root (issue 34): a tmpfs
/// mounted at `a/m` below the root (writable on the host, not a
/// `--command-writable` path, so read-only in every command's view),
/// while a command renames `a` to `b` and back as fast as it can; 40
/// later commands try to write into the mount at either name: none does
/// (each finds it read-only, or is refused). Before the view found mounts
/// by their mount id, it remounted them by their mountinfo path and
/// skipped a path gone meanwhile (`ENOENT`): 5 of 12 wrote (run by hand).
/// The control: with `--sandbox off` the same write lands. Mounting needs
/// root: nothing is run otherwise.
async fn a_rename_race_above_a_mount_leaves_it_read_only(nobody: bool) {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let root = p.root();
    std::fs::create_dir_all(root.join("a/m")).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "mode=1777,size=1m", "serverfs-race"])
        .arg(root.join("a/m"))
        .status()
        .unwrap();
    assert!(mounted.success());
    let _unmount = Unmount(vec![root.join("a/m"), root.join("b/m")]);
    std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let write = |n: usize| {
        format!(
            "for t in $(seq 100); do for d in a b; do \
             echo x 2>/dev/null > $d/m/w{n} && {{ echo wrote; exit 0; }}; done; done; echo refused"
        )
    };
    let client = start(&p, nobody, &["--sandbox", "off"]).await;
    let v = ok(&client, "bash", json!({"command": write(0)})).await;
    assert_eq!(v["stdout"], "wrote\n", "control: {v}");
    std::fs::remove_file(root.join("a/m/w0")).unwrap();
    client.cancel().await.unwrap();

    let rename = "touch renaming; python3 -c 'import os\n\
                  while not os.path.exists(\"stop\"):\n    \
                  os.rename(\"a\", \"b\"); os.rename(\"b\", \"a\")'; echo stopped";
    let client = start(&p, nobody, &[]).await;
    let renamer = ok(&client, "bash", json!({"command": rename}));
    let writers = async {
        // The renaming command is running (it made the file) before the
        // first write starts.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !root.join("renaming").exists() {
            assert!(Instant::now() < deadline, "the renaming command never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut answers = Vec::new();
        for n in 1..=40 {
            answers.push(call(&client, "bash", json!({"command": write(n)})).await);
        }
        std::fs::write(root.join("stop"), "").unwrap();
        answers
    };
    let (renamed, answers) = tokio::join!(renamer, writers);
    assert_eq!(renamed["stdout"], "stopped\n", "{renamed}");
    client.cancel().await.unwrap();
    let written: Vec<_> =
        std::fs::read_dir(root.join("a/m")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(written.is_empty(), "commands wrote into the mount: {written:?} {answers:?}");
    for (is_error, v) in &answers {
        let refused = *is_error && v.as_str().is_some_and(|t| t.contains("command was not run"));
        assert!(refused || v["stdout"] == "refused\n", "{v} {answers:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_race_above_a_mount_leaves_it_read_only_as_the_server_s_user() {
    if is_root() {
        a_rename_race_above_a_mount_leaves_it_read_only(false).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_race_above_a_mount_leaves_it_read_only_as_nobody() {
    if is_root() {
        a_rename_race_above_a_mount_leaves_it_read_only(true).await;
    }
}

/// Terminals (issue 34): a pty this test holds, as the user's terminal is
/// (its slave the server's user's), is not there for a command to open and
/// write on (`ENOENT`: the view's `/dev/pts` is an instance of its own),
/// and nothing reaches the test's side of it; yet the command opens a pty
/// of its own, and `script` runs in one. The control: with `--sandbox off`
/// the command writes on the test's pty.
async fn a_command_writes_on_no_terminal_it_did_not_open(nobody: bool) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let tty = ptsname(&master, Vec::new()).unwrap().into_string().unwrap();
    if nobody {
        std::os::unix::fs::chown(&tty, Some(65534), Some(65534)).unwrap();
    }
    rustix::io::ioctl_fionbio(&master, true).unwrap();
    let received = || {
        let mut all = String::new();
        let mut buf = [0u8; 256];
        while let Ok(n @ 1..) = rustix::io::read(&master, &mut buf) {
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        all
    };
    let attack = format!(
        "python3 -c 'import errno, os\n\
         try:\n    \
             fd = os.open(\"{tty}\", os.O_WRONLY | os.O_NOCTTY)\n    \
             os.write(fd, b\"serverfs-wrote\\n\")\n    \
             print(\"written\")\n\
         except OSError as e:\n    \
             print(errno.errorcode[e.errno])\n\
         m, s = os.openpty()\n\
         os.write(m, b\"ping\\n\")\n\
         print(\"own\", os.read(s, 64))'; script -qc 'echo in-script' /dev/null | tr -d '\\r'"
    );
    let p = Project::new();
    let client = start(&p, nobody, &["--sandbox", "off"]).await;
    let v = ok(&client, "bash", json!({"command": attack})).await;
    client.cancel().await.unwrap();
    assert!(v["stdout"].as_str().unwrap().starts_with("written\n"), "control: {v}");
    assert!(received().contains("serverfs-wrote"), "control: nothing reached the pty");

    let client = start(&p, nobody, &[]).await;
    let v = ok(&client, "bash", json!({"command": attack})).await;
    client.cancel().await.unwrap();
    assert_eq!(v["stdout"], "ENOENT\nown b'ping\\n'\nin-script\n", "{v}");
    assert_eq!(received(), "", "a command wrote on the test's terminal");
}

#[tokio::test]
async fn a_command_writes_on_no_terminal_it_did_not_open_as_the_server_s_user() {
    a_command_writes_on_no_terminal_it_did_not_open(false).await;
}

#[tokio::test]
async fn a_command_writes_on_no_terminal_it_did_not_open_as_nobody() {
    if is_root() {
        a_command_writes_on_no_terminal_it_did_not_open(true).await;
    }
}
