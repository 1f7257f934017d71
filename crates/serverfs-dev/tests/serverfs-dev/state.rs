//! The state directory against a command, on the real binary:
//! a state dir (or rendezvous) a command can reach is refused at start; a
//! command that locks everything it can open there freezes no writer of
//! the root (through the real bash tool, in the real sandbox); and what it
//! holds never keeps a torn patch unsettled at the next start.
//!
//! A frozen writer fails the test at a generous deadline instead of
//! hanging it.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Project, RawStdio};
use serde_json::{Value, json};

/// How long a writer may take before it counts as frozen.
const FROZEN: Duration = Duration::from_secs(60);

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

/// Runs `f` in a thread; its result, or a panic naming `what` once
/// [`FROZEN`] has passed.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(FROZEN).unwrap_or_else(|_| panic!("{what}: frozen for {FROZEN:?}"))
}

/// A bash script that opens every file and directory below `dirs` for
/// reading (and, with `write`, files for writing), `flock`s each
/// descriptor it got, keeps them all, and prints one line per attempt
/// (`LOCKED-R path`, `NO-R path`…), then `READY`.
fn lock_everything(dirs: &[&Path], write: bool) -> String {
    let dirs: Vec<String> = dirs.iter().map(|d| format!("'{}'", d.display())).collect();
    let write = if write {
        r#"if [ -f "$f" ]; then if exec {w}>>"$f"; then if flock -n -x $w; then echo "LOCKED-W $f"; else echo "BUSY-W $f"; fi; else echo "NO-W $f"; fi; fi"#
    } else {
        ""
    };
    format!(
        r#"for f in $(find {}); do
if exec {{r}}<"$f"; then if flock -n -x $r; then echo "LOCKED-R $f"; else echo "BUSY-R $f"; fi; else echo "NO-R $f"; fi
{write}
done 2>/dev/null; echo READY
"#,
        dirs.join(" ")
    )
}

fn is_root() -> bool {
    euid() == 0
}

/// Every place a command could reach the writer's state: the state dir
/// and the root's directory in the rendezvous of `uid`'s servers.
fn state_places(p: &Project, uid: u32) -> [std::path::PathBuf; 2] {
    let root = std::fs::metadata(p.root()).unwrap();
    let key = format!("{:x}.{:x}", root.dev(), root.ino());
    [p.state(), Path::new(&format!("/var/tmp/serverfs-roots.{uid}")).join(key)]
}

#[test]
fn a_state_dir_commands_can_reach_is_refused_at_start() {
    let p = Project::new();
    let under_tmp = tempfile::tempdir_in("/tmp").unwrap();
    let reached = common::private_dir();
    let refused = |args: &[&str], env: &[(&str, &Path)], state: &Path, named: &str| {
        let out = p
            .command_with_state(state)
            .args(args)
            .envs(env.iter().copied())
            .arg("--stdio")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let line = stderr.lines().last().unwrap();
        assert!(line.starts_with("serverfs-dev: config error: "), "{line}");
        assert!(line.contains(named), "{args:?}: {line}");
        for host in [under_tmp.path(), reached.path()] {
            assert!(!stderr.contains(&*host.to_string_lossy()), "host path shown: {stderr}");
        }
        assert!(!state.exists(), "{args:?}: created anyway");
    };
    let state = |dir: &Path| dir.join("state");
    refused(
        &[],
        &[],
        &state(under_tmp.path()),
        "SERVERFS_STATE_DIR (--state-dir): it is below /tmp",
    );
    let writable = reached.path().to_str().unwrap();
    refused(
        &["--command-writable", writable],
        &[],
        &state(reached.path()),
        "SERVERFS_STATE_DIR (--state-dir): it is below a --command-writable path",
    );
    refused(
        &["--command-readable", writable],
        &[],
        &state(reached.path()),
        "SERVERFS_STATE_DIR (--state-dir): it is below a --command-readable path",
    );
    refused(
        &[],
        &[("TMPDIR", reached.path())],
        &state(reached.path()),
        "SERVERFS_STATE_DIR (--state-dir): it is below the commands' TMPDIR parent",
    );
    // The rendezvous (each root's commit lock) comes from neither HOME nor
    // XDG_STATE_HOME: below /tmp they change nothing with --state-dir.
    let out = p
        .command()
        .env("XDG_STATE_HOME", under_tmp.path())
        .env("HOME", under_tmp.path())
        .arg("--stdio")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The rendezvous made command-writable: refused, naming it.
    let out = p
        .command()
        .args(["--command-writable", "/var/tmp", "--stdio"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the servers' rendezvous directory /var/tmp/serverfs-roots.")
            && stderr.contains("/var/tmp is below a --command-writable path"),
        "{stderr}"
    );
}

/// A command in a shell session (the real sandbox; as `nobody` when the
/// test runs as root, so the command holds no capability) opens and locks
/// whatever it can in the state dir and the rendezvous and keeps it; the
/// root's commit lock and presence file are out of its reach, and both its
/// own server and a second server with another state dir keep writing.
#[test]
fn a_command_cannot_freeze_the_writers_of_its_root() {
    let p = Project::new();
    let state2 = p.private.path().join("state2");
    let start = |cmd: Command| {
        let mut cmd = if is_root() { p.as_nobody(&cmd) } else { cmd };
        cmd.stderr(Stdio::null());
        RawStdio::spawn(cmd)
    };
    let mut a = start(p.command());
    let mut b = start(p.command_with_state(&state2));
    for (server, path) in [(&mut a, "a0.txt"), (&mut b, "b0.txt")] {
        let answer = server.call(call(2, "write_file", json!({"path": path, "content": "x"})));
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }

    let opened = a.call(call(3, "shell_open", json!({})));
    let session = opened["result"]["structuredContent"]["session_id"].clone();
    let [state, meet] = state_places(&p, if is_root() { 65534 } else { euid() });
    // Metadata first: the lock made readable, the state dir closed to its
    // server (the sandbox's read-only view refuses both, whoever owns them).
    let lock = meet.join("commit.lock");
    let script = format!(
        "chmod 644 '{}'; echo chmod-lock=$?; chmod 0 '{}'; echo chmod-state=$?\n{}",
        lock.display(),
        state.display(),
        lock_everything(&[&state, &state2, &meet], true)
    );
    let answer = a.call(call(4, "shell_write", json!({"session_id": session, "input": script})));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (mut output, mut offset, mut id) = (String::new(), 0, 5);
    let deadline = Instant::now() + FROZEN;
    while !output.contains("READY") {
        assert!(Instant::now() < deadline, "the command never got ready: {output}");
        let args = json!({"session_id": session, "offset": offset, "wait_ms": 2000});
        let read = a.call(call(id, "shell_read", args));
        id += 1;
        output.push_str(read["result"]["structuredContent"]["output"].as_str().unwrap());
        offset = read["result"]["structuredContent"]["next_offset"].as_u64().unwrap();
    }
    for file in ["commit.lock", "present"] {
        let lines: Vec<&str> =
            output.lines().filter(|l| l.ends_with(&format!("/{file}"))).collect();
        assert!(
            lines.contains(&&*format!("NO-R {}", meet.join(file).display()))
                && lines.iter().all(|l| l.starts_with("NO-")),
            "the command reached {file}: {lines:?}\n{output}"
        );
    }
    assert!(output.contains("chmod-lock=1\n") && output.contains("chmod-state=1\n"), "{output}");
    assert_eq!(std::fs::metadata(&lock).unwrap().mode() & 0o777, 0o200);
    eprintln!("the command, holding what it could:\n{output}");
    // The test can fail: the command did lock what it could open.
    assert!(output.lines().any(|l| l.starts_with("LOCKED-R")), "{output}");

    // Both servers still write, while the command holds all it got.
    let (a, b) = within("writers while a command holds locks", move || {
        for (server, path) in [(&mut a, "a1.txt"), (&mut b, "b1.txt")] {
            let answer = server.call(call(90, "write_file", json!({"path": path, "content": "y"})));
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        (a, b)
    });
    assert_eq!(p.read("a1.txt"), "y");
    assert_eq!(p.read("b1.txt"), "y");
    a.finish();
    b.finish();
}

fn euid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// A server is SIGKILLed inside a multi-file commit; a process of the same
/// user (without capabilities, as a command is) then opens and locks
/// everything it can in the state dir and the rendezvous and keeps it; the next
/// start still settles the torn patch, wholly before or after, at once.
#[test]
fn a_held_lock_never_keeps_a_torn_patch_unsettled() {
    const FILES: usize = 12;
    let p = Project::new();
    let text = |n: usize| -> String { (0..3000).map(|i| format!("k{n} line {i}\n")).collect() };
    let mut patch = String::from("*** Begin Patch\n");
    for n in 0..FILES {
        patch.push_str(&format!(
            "*** Update File: k/f{n}.txt\n@@\n-k{n} line 1500\n+k{n} line 1500 PATCHED\n"
        ));
    }
    patch.push_str("*** End Patch\n");
    let journal = p.state().join("journal");
    let journals = || -> Vec<String> {
        std::fs::read_dir(&journal).map_or(Vec::new(), |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
    };
    // Killed inside the commit: its journal outlives it (a commit that
    // ended first is run again).
    let mut tries = 0;
    loop {
        for n in 0..FILES {
            p.write(&format!("k/f{n}.txt"), &text(n));
        }
        let mut server = RawStdio::start(&p);
        server.send(call(2, "apply_patch", json!({"patch": patch})));
        let started = Instant::now();
        while !journals().iter().any(|j| j.contains("\"prepared\"")) {
            assert!(started.elapsed() < FROZEN, "the commit never began");
            if server.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::yield_now();
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        if !journals().is_empty() {
            break;
        }
        tries += 1;
        assert!(tries < 50, "no kill landed inside a commit");
    }

    let [state, meet] = state_places(&p, euid());
    let mut holder = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set=-all", "--inh-caps=-all", "--", "bash", "-c"]);
        c
    } else {
        let mut c = Command::new("bash");
        c.arg("-c");
        c
    };
    // It keeps what it holds until killed (also when the test fails).
    let script = lock_everything(&[&state, &meet], false) + "exec sleep 600\n";
    let mut holder =
        Holder(holder.arg(script).stdout(Stdio::piped()).stdin(Stdio::null()).spawn().unwrap());
    let mut output = String::new();
    for line in BufReader::new(holder.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        output.push_str(&line);
        output.push('\n');
        if line == "READY" {
            break;
        }
    }
    assert!(output.lines().any(|l| l.starts_with("LOCKED-R")), "{output}");

    let mut restart = p.command();
    let log = within("the restart", move || {
        let out = restart.arg("--stdio").stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    });
    drop(holder);
    assert!(log.contains("\"event\":\"patch_recovered\""), "not settled: {log}\n{output}");
    let patched: Vec<bool> =
        (0..FILES).map(|n| p.read(&format!("k/f{n}.txt")).contains("PATCHED")).collect();
    assert!(patched.iter().all(|x| *x == patched[0]), "torn: {patched:?}");
    assert!(journals().is_empty(), "a journal was left");
}

/// A child killed and reaped when dropped.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
