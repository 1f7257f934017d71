//! One rendezvous per root, whoever runs the server (issue 34, item 7), on
//! the real binary: servers of two users on one root never both serve —
//! the second refuses in one line, also after the first was SIGKILLed
//! mid-patch, until a server of the first user has settled its journal; a
//! server given `--state-dir` starts without a usable `HOME`; a default
//! state directory inside the root is named with where it came from and
//! the fix; a root that contains the rendezvous (`/`) says so. (Servers of
//! one user with different `HOME`s, `XDG_STATE_HOME`s and state dirs
//! racing patches under kills: see `multi`.)

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Project, RawStdio};
use serde_json::{Value, json};

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// The last line of a start that must fail with exit 2.
fn refused(mut cmd: Command) -> String {
    let out = cmd.arg("--stdio").stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr.lines().last().unwrap_or_default().to_owned()
}

/// A start that must serve (and stop cleanly at end of input).
fn serves(mut cmd: Command) {
    let out = cmd.arg("--stdio").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn write_file(server: &mut RawStdio, id: u64, path: &str) -> Value {
    server.call(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": path, "content": "x"}}}))
}

#[test]
fn a_state_dir_given_needs_no_home() {
    let p = Project::new();
    let mut unset = p.command();
    unset.env_remove("HOME").env_remove("XDG_STATE_HOME");
    let mut server = RawStdio::spawn(unset);
    assert_eq!(write_file(&mut server, 2, "no-home.txt")["result"]["isError"], false);
    server.finish();
    if is_root() {
        // As nobody, whose HOME does not exist (and could not be created).
        let state = p.private.path().join("state-nobody");
        let mut nobody = p.as_nobody(&p.command_with_state(&state));
        nobody.env("HOME", "/nonexistent").env_remove("XDG_STATE_HOME");
        let mut server = RawStdio::spawn(nobody);
        assert_eq!(write_file(&mut server, 2, "nobody.txt")["result"]["isError"], false);
        server.finish();
    } else {
        eprintln!("not root: the nobody case is not run");
    }
}

#[test]
fn a_default_state_dir_inside_the_root_is_named_with_its_origin_and_the_fix() {
    let p = Project::new();
    let root = p.root();
    // `--root ~` with the default state dir (HOME is the root).
    let default = |env: &[(&str, &Path)]| {
        let mut cmd = Command::new(common::BIN);
        cmd.arg("--root").arg(&root).env_remove("SERVERFS_TOKEN").env_remove("XDG_STATE_HOME");
        cmd.envs(env.iter().copied());
        cmd
    };
    let expected = |dir: &Path, from: &str| {
        format!(
            "serverfs-dev: config error: the default state directory {} (from {from}; set \
             SERVERFS_STATE_DIR (--state-dir) to choose another): it is below the project root, \
             which commands can reach; choose a directory outside it",
            dir.join("serverfs-dev").display()
        )
    };
    assert_eq!(refused(default(&[("HOME", &root)])), expected(&root.join(".local/state"), "HOME"));
    let inside = root.join("state");
    assert_eq!(
        refused(default(&[("HOME", &root), ("XDG_STATE_HOME", &inside)])),
        expected(&inside, "XDG_STATE_HOME")
    );
    assert!(!root.join(".local").exists() && !inside.exists(), "created anyway");
    // Accepted when the default lies elsewhere, or with --state-dir.
    serves(default(&[("HOME", &root), ("XDG_STATE_HOME", &p.xdg())]));
    let mut given = default(&[("HOME", &root)]);
    given.arg("--state-dir").arg(p.state());
    serves(given);
    // A root that contains the rendezvous can never be served: said so.
    let mut slash = Command::new(common::BIN);
    slash.args(["--root", "/", "--state-dir"]).arg(p.state()).env_remove("SERVERFS_TOKEN");
    let line = refused(slash);
    assert!(
        line.contains("rendezvous directory /var/tmp/serverfs-roots.")
            && line.contains("/var/tmp is below the project root, which commands can reach")
            && line.contains("serve a directory that does not contain it"),
        "{line}"
    );
}

/// Root's server W on the project; nobody's server N (other HOME, other
/// state dir) is refused while W serves, and after W is SIGKILLed
/// mid-patch (W's journal may hold an unfinished patch only root can
/// read); W's restart settles it (the patch whole or absent) and stops
/// cleanly; then N serves, and root's start is refused while N does.
#[test]
fn servers_of_two_users_on_one_root_never_both_serve() {
    if !is_root() {
        eprintln!("not root: two users cannot be run");
        return;
    }
    const FILES: usize = 6;
    let p = Project::new();
    let text = |n: usize| -> String { (0..3000).map(|i| format!("f{n} line {i}\n")).collect() };
    let mut patch = String::from("*** Begin Patch\n");
    for n in 0..FILES {
        patch.push_str(&format!("*** Update File: pair/f{n}.txt\n@@\n-f{n} line 1500\n+f{n} K\n"));
    }
    patch.push_str("*** End Patch\n");
    let nobody_state = p.private.path().join("state-nobody");
    let nobody = || {
        let mut cmd = p.as_nobody(&p.command_with_state(&nobody_state));
        cmd.env("HOME", "/nonexistent").env_remove("XDG_STATE_HOME");
        cmd
    };
    let serves_line = "serverfs-dev: config error: SERVERFS_ROOT (--root): a serverfs-dev of \
                       another user (uid 0) serves this root;";
    let killed_line = "serverfs-dev: config error: SERVERFS_ROOT (--root): a serverfs-dev of \
                       another user (uid 0) on this root did not stop cleanly (killed?)";
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let (mut before, mut after) = (0, 0);
    for round in 0..3 {
        for n in 0..FILES {
            p.write(&format!("pair/f{n}.txt"), &text(n));
        }
        let mut w = RawStdio::start(&p);
        let line = refused(nobody());
        assert!(line.starts_with(serves_line), "round {round}: {line}");
        w.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"patch": patch}}}));
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 30_000));
        w.child.kill().unwrap();
        w.child.wait().unwrap();
        let line = refused(nobody());
        assert!(line.starts_with(killed_line), "round {round}: {line}");
        // W's user settles it.
        serves(p.command());
        let patched: Vec<bool> =
            (0..FILES).map(|n| p.read(&format!("pair/f{n}.txt")).contains(" K\n")).collect();
        assert!(patched.iter().all(|x| *x == patched[0]), "round {round}: torn {patched:?}");
        if patched[0] {
            after += 1;
        } else {
            before += 1;
        }
    }
    // W stopped cleanly: N serves, and root's start is refused meanwhile.
    let mut n = RawStdio::spawn(nobody());
    assert_eq!(write_file(&mut n, 2, "src/by-nobody.txt")["result"]["isError"], false);
    let line = refused(p.command());
    assert!(
        line.starts_with(
            "serverfs-dev: config error: SERVERFS_ROOT (--root): a serverfs-dev of another \
             user (uid 65534) serves this root;"
        ),
        "{line}"
    );
    n.finish();
    serves(p.command());
    eprintln!(
        "two users: 3 kills of root's server → {before} before, {after} after; nobody's start \
         refused each time"
    );
}
