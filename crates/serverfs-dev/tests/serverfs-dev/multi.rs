//! Several `serverfs-dev --stdio` processes on one project root and state
//! directory, as several agents run them: each process's patches of its
//! own files all succeed; two patching the same lines get one success and
//! one clear refusal; a process SIGKILLed mid-commit again and again while
//! another keeps working leaves, once settled, a tree that some serial
//! order of the committed patches explains; and two processes with two
//! different state dirs, `HOME`s and `XDG_STATE_HOME`s on one root never
//! leave a torn tree under kills (they meet in the rendezvous, found from
//! the uid alone).
//!
//! `SERVERFS_MULTI_KILLS` sets the number of kills (default 10, what CI
//! runs; longer runs are done by hand).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Project, RawStdio};
use serde_json::{Value, json};

/// Sends one apply_patch call and returns its result object (skipping
/// anything else the server sends).
fn apply(server: &mut RawStdio, id: u64, patch: &str) -> Value {
    server.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "apply_patch", "arguments": {"patch": patch}}}));
    loop {
        let message = server.next();
        if message["id"] == id {
            return message["result"].clone();
        }
    }
}

/// The error code at the start of a failed call's text, or `None`.
fn error_code(result: &Value) -> Option<String> {
    if result["isError"] != true {
        return None;
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    Some(text.split(':').next().unwrap_or_default().to_owned())
}

fn numbered(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix} line {i}\n")).collect()
}

/// Patch `k` of a file made by [`numbered`]: line `k` gets a mark.
fn mark(path: &str, prefix: &str, k: usize) -> String {
    format!(
        "*** Begin Patch\n*** Update File: {path}\n@@\n-{prefix} line {k}\n+{prefix} line {k} done\n*** End Patch\n"
    )
}

fn marked(prefix: &str, n: usize, done: usize) -> String {
    (0..n)
        .map(|i| {
            if i < done {
                format!("{prefix} line {i} done\n")
            } else {
                format!("{prefix} line {i}\n")
            }
        })
        .collect()
}

/// `processes` servers, each applying 50 patches to its own file, in
/// parallel; every patch succeeds and every file ends as expected.
fn own_files(processes: usize) {
    const PATCHES: usize = 50;
    let p = Project::new();
    for n in 0..processes {
        p.write(&format!("own/p{n}.txt"), &numbered(&format!("p{n}"), PATCHES));
    }
    let servers: Vec<RawStdio> = (0..processes).map(|_| RawStdio::start(&p)).collect();
    let workers: Vec<_> = servers
        .into_iter()
        .enumerate()
        .map(|(n, mut server)| {
            std::thread::spawn(move || {
                let (path, prefix) = (format!("own/p{n}.txt"), format!("p{n}"));
                for k in 0..PATCHES {
                    let result = apply(&mut server, 10 + k as u64, &mark(&path, &prefix, k));
                    assert_eq!(error_code(&result), None, "process {n}, patch {k}: {result}");
                }
                server.finish();
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    for n in 0..processes {
        assert_eq!(p.read(&format!("own/p{n}.txt")), marked(&format!("p{n}"), PATCHES, PATCHES));
    }
    let journal = p.state().join("journal");
    let left: Vec<String> = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") || n.contains(".owner."))
        .collect();
    assert!(left.iter().all(|n| !n.ends_with(".json")), "journals left: {left:?}");
}

#[test]
fn two_processes_each_apply_50_patches_to_their_own_files() {
    own_files(2);
}

#[test]
fn four_processes_each_apply_50_patches_to_their_own_files() {
    own_files(4);
}

#[test]
fn two_processes_patching_the_same_lines_one_wins_one_is_refused() {
    let p = Project::new();
    p.write("shared.txt", &numbered("s", 20));
    let patch = |what: &str| {
        format!(
            "*** Begin Patch\n*** Update File: shared.txt\n@@\n s line 9\n-s line 10\n+{what}\n s line 11\n*** End Patch\n"
        )
    };
    let outcome = |what: &str| numbered("s", 20).replace("s line 10\n", &format!("{what}\n"));
    for round in 0..5 {
        p.write("shared.txt", &numbered("s", 20));
        let workers: Vec<_> = ["A", "B"]
            .into_iter()
            .map(|what| {
                let mut server = RawStdio::start(&p);
                let patch = patch(what);
                std::thread::spawn(move || {
                    let result = apply(&mut server, 7, &patch);
                    server.finish();
                    (what, error_code(&result))
                })
            })
            .collect();
        let results: Vec<(&str, Option<String>)> =
            workers.into_iter().map(|w| w.join().unwrap()).collect();
        let winners: Vec<&str> =
            results.iter().filter(|(_, e)| e.is_none()).map(|(w, _)| *w).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (_, code) in &results {
            if let Some(code) = code {
                assert!(
                    code == "PATCH_CONFLICT" || code == "PATCH_CONTEXT_NOT_FOUND",
                    "round {round}: {results:?}"
                );
            }
        }
        assert_eq!(p.read("shared.txt"), outcome(winners[0]), "round {round}");
    }
}

type Tree = BTreeMap<String, Vec<u8>>;

fn snapshot(dir: &Path) -> Tree {
    let mut tree = Tree::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        assert!(entry.file_type().unwrap().is_file());
        tree.insert(
            entry.file_name().to_string_lossy().into_owned(),
            std::fs::read(entry.path()).unwrap(),
        );
    }
    tree
}

/// Process K applies one multi-file patch and is SIGKILLed at a moment
/// that moves across its commit; process W keeps applying small patches
/// to its own file meanwhile. Each new K settles what the killed one left
/// (or W's next commit already did): K's files are then wholly before or
/// wholly after the patch, and W's file holds exactly W's committed
/// patches.
#[test]
fn a_process_killed_mid_commit_while_another_works_leaves_a_serial_outcome() {
    let kills: usize =
        std::env::var("SERVERFS_MULTI_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    const FILES: usize = 12;
    const W_LINES: usize = 5000;
    let p = Project::new();
    let k_dir = p.path("k");
    let k_text = |n: usize| numbered(&format!("k{n}"), 3000);
    let seed = || {
        let _ = std::fs::remove_dir_all(&k_dir);
        for n in 0..FILES {
            p.write(&format!("k/f{n}.txt"), &k_text(n));
        }
    };
    let mut k_patch = String::from("*** Begin Patch\n");
    for n in 0..FILES {
        k_patch.push_str(&format!(
            "*** Update File: k/f{n}.txt\n@@\n-k{n} line 1500\n+k{n} line 1500 PATCHED\n"
        ));
    }
    k_patch.push_str("*** End Patch\n");
    p.write("w.txt", &numbered("w", W_LINES));

    // The two acceptable K trees, and how long one K apply takes here.
    seed();
    let before = snapshot(&k_dir);
    let mut k = RawStdio::start(&p);
    let started = Instant::now();
    assert_eq!(error_code(&apply(&mut k, 2, &k_patch)), None);
    let full = started.elapsed();
    let after = snapshot(&k_dir);
    assert_ne!(before, after);
    k.finish();
    seed();

    // W works until told to stop; it returns how many patches it applied.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut w = RawStdio::start(&p);
    let w_stop = std::sync::Arc::clone(&stop);
    let worker = std::thread::spawn(move || {
        let mut done = 0;
        while !w_stop.load(std::sync::atomic::Ordering::Relaxed) && done < W_LINES {
            let result = apply(&mut w, 100 + done as u64, &mark("w.txt", "w", done));
            assert_eq!(error_code(&result), None, "W patch {done}: {result}");
            done += 1;
        }
        w.finish();
        done
    });

    let (mut saw_before, mut saw_after) = (0, 0);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..kills {
        // A fresh K: its start settles a dead K's journal if W has not.
        let mut k = RawStdio::start(&p);
        let tree = snapshot(&k_dir);
        if tree == before {
            saw_before += usize::from(i > 0);
        } else if tree == after {
            saw_after += 1;
            seed();
        } else {
            panic!("kill {}: K's files are neither before nor after its patch", i - 1);
        }
        k.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"patch": k_patch}}}));
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let window = full.as_micros() as u64 * 3 / 2 + 1;
        std::thread::sleep(Duration::from_micros(rng % window));
        k.child.kill().unwrap();
        k.child.wait().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done = worker.join().unwrap();

    // A last start settles whatever is left.
    RawStdio::start(&p).finish();
    let tree = snapshot(&k_dir);
    assert!(tree == before || tree == after, "after the last kill");
    if tree == before {
        saw_before += 1;
    } else {
        saw_after += 1;
    }
    assert_eq!(p.read("w.txt"), marked("w", W_LINES, done), "W's committed patches");
    let journals = std::fs::read_dir(p.state().join("journal"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"));
    assert_eq!(journals.count(), 0, "a journal was left");
    assert!(
        std::fs::read_dir(&k_dir)
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with(".serverfs-")),
        "writer leftovers"
    );
    eprintln!(
        "multi-process kill test: {kills} kills of K → {saw_before} before, {saw_after} after; \
         W applied {done} patches meanwhile (full K apply {full:?})"
    );
}

/// Whether `tree`'s files all hold the same marks: `(line, who)` for each
/// `… line N who` line; a torn multi-file patch leaves a mark in some
/// files only.
fn marks(tree: &Tree) -> Vec<(usize, String)> {
    // Writer leftovers are asserted on apart.
    let files = tree.iter().filter(|(name, _)| !name.starts_with(".serverfs-"));
    let mut sets = files.map(|(name, bytes)| {
        let text = String::from_utf8_lossy(bytes);
        let set: Vec<(usize, String)> = text
            .lines()
            .filter_map(|l| {
                let mut words = l.split(' ').skip(2);
                let n = words.next()?.parse().ok()?;
                words.next().map(|who| (n, who.to_owned()))
            })
            .collect();
        (name.clone(), set)
    });
    let (first, set) = sets.next().unwrap();
    for (name, other) in sets {
        assert_eq!(other, set, "torn: {first} and {name} hold different patches");
    }
    set
}

/// Two servers on one root with two state dirs, two `HOME`s and two
/// `XDG_STATE_HOME`s (a systemd service and a desktop server of one user):
/// K (its own state dir and environment) is
/// SIGKILLed inside its commit of a patch to six files — once its journal
/// shows the state aimed at (intent, prepared, committed), after a few
/// scans of the tree — while W (the project's state dir) commits a patch
/// to the same six files (other lines), sent once K's commit has begun.
/// Then W commits once more: that settles whatever K left in K's state dir
/// (no K restarts in between), and all six files must hold the same
/// patches — K's wholly or not at all, and W's whenever W reported it
/// applied.
#[test]
fn two_servers_with_two_homes_and_state_dirs_never_leave_a_torn_tree() {
    let kills: usize =
        std::env::var("SERVERFS_MULTI_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    const FILES: usize = 6;
    let p = Project::new();
    let k_state = p.private.path().join("state-k");
    let dir = p.path("pair");
    for n in 0..FILES {
        p.write(&format!("pair/f{n}.txt"), &numbered(&format!("f{n}"), 3000));
    }
    p.write("w.txt", &numbered("w", 4 * kills + 2));
    let patch = |who: &str, line: usize| {
        let mut patch = String::from("*** Begin Patch\n");
        for n in 0..FILES {
            patch.push_str(&format!(
                "*** Update File: pair/f{n}.txt\n@@\n-f{n} line {line}\n+f{n} line {line} {who}\n"
            ));
        }
        patch + "*** End Patch\n"
    };
    let k_journals = || -> Vec<String> {
        std::fs::read_dir(k_state.join("journal")).map_or(Vec::new(), |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
    };
    let k_home = p.private.path().join("home-k");
    let start_k = || {
        let mut cmd = p.command_with_state(&k_state);
        cmd.env("HOME", &k_home).env("XDG_STATE_HOME", k_home.join("xdg"));
        cmd.stderr(std::process::Stdio::null());
        RawStdio::spawn(cmd)
    };

    let mut w = RawStdio::start(&p);
    let (mut inside, mut missed, mut k_after, mut w_applied, mut w_refused) = (0, 0, 0, 0, 0);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    const STATES: [&str; 3] = ["", "\"prepared\"", "\"committed\""];
    for i in 1..=kills {
        let mut k = start_k();
        k.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"patch": patch("K", 2 * i)}}}));
        let aim = STATES[(next() % 3) as usize];
        let started = Instant::now();
        // Until the journal shows the aim, or K's patch is wholly there
        // (the commit ended unseen: a miss, the kill then lands after it).
        let k_done = || {
            (0..FILES).all(|n| {
                std::fs::read_to_string(dir.join(format!("f{n}.txt")))
                    .is_ok_and(|t| t.contains(&format!(" line {} K\n", 2 * i)))
            })
        };
        loop {
            let journals = k_journals();
            if journals.iter().any(|t| t.contains(aim)) {
                break;
            }
            if journals.is_empty() && k_done() {
                missed += 1;
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(120), "K's commit never began");
            std::thread::yield_now();
        }
        w.send(json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"patch": patch("W", 2 * i + 1)}}}));
        // Scans of the live tree (entries may vanish): only to let the
        // commit advance between events.
        for _ in 0..next() % 3 {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                drop(std::fs::read(entry.path()));
            }
        }
        k.child.kill().unwrap();
        k.child.wait().unwrap();
        // A lower bound: W's commit may settle K's journal at once.
        inside += usize::from(!k_journals().is_empty());
        let w_result = loop {
            let message = w.next();
            if message["id"] == 1000 + i {
                break message["result"].clone();
            }
        };
        // W's next commit settles what K left, in K's state dir.
        let settle = mark("w.txt", "w", i);
        assert_eq!(error_code(&apply(&mut w, 5000 + i as u64, &settle)), None);
        assert!(k_journals().is_empty(), "kill {i}: K's journal was not settled by W");
        let set = marks(&snapshot(&dir));
        let k_mark = (2 * i, "K".to_owned());
        k_after += usize::from(set.contains(&k_mark));
        match error_code(&w_result) {
            None => {
                w_applied += 1;
                assert!(set.contains(&(2 * i + 1, "W".to_owned())), "kill {i}: W's patch lost");
            }
            Some(code) => {
                w_refused += 1;
                assert!(
                    code == "PATCH_CONFLICT" || code == "PATCH_CONTEXT_NOT_FOUND",
                    "kill {i}: {w_result}"
                );
            }
        }
        assert!(
            std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with(".serverfs-")),
            "kill {i}: writer leftovers"
        );
    }
    w.finish();
    eprintln!(
        "two state dirs: {kills} kills of K, at least {inside} inside its commit (its journal \
         there at death), {missed} after it ended unseen → K's patch after in {k_after}, \
         before in {}; W's concurrent patch applied {w_applied}, refused {w_refused}",
        kills - k_after
    );
}
