//! The crash test of apply_patch: a large multi-file patch (updates, adds,
//! deletes, moves) is applied by the real server, which is SIGKILLed inside
//! its commit; the server is started again on the same state directory
//! (recovery runs before it serves), and the whole tree must then equal the
//! tree before the patch or the tree after it — byte for byte, with no
//! writer leftovers and no journal left.
//!
//! No clock decides when to kill: the kill follows events. Each kill aims
//! at one of the journal's states, drawn from the seed (intent: the commit
//! has begun; prepared: every new file is durable; committed: the commit
//! point has passed), and comes once the journal in the state directory
//! shows it, after a few scans of the tree. Each kill is proven to have
//! landed inside the commit: with the server dead, its journal is still
//! there (an unfinished transaction), the restart reports settling it, and
//! the tree is after the patch exactly when that journal said committed. A
//! commit that ended before its kill (the journal already gone) does not
//! count and is run again.
//!
//! `SERVERFS_CRASH_ITERATIONS` sets the number of kills (default 12, what
//! CI runs; the 100+-kill runs are done by hand). The random seed is
//! printed so a failure can be replayed with `SERVERFS_CRASH_SEED`.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Scans of the tree between the journal's appearance and the kill: at
/// most this many (uniform from the seed).
const MAX_SCANS: u64 = 2;

/// Commits that may end before their kill, in all, before the test gives up
/// on reaching the inside of one.
const MAX_MISSED: usize = 200;

use common::{Project, RawStdio};
use serde_json::json;

type Tree = BTreeMap<String, Vec<u8>>;

const UPDATES: usize = 40;
const ADDS: usize = 10;
const DELETES: usize = 6;
const MOVES: usize = 6;

/// ~200 KiB of numbered lines.
fn file_text(n: usize) -> String {
    (0..6000).map(|i| format!("file {n} line {i}: some text to patch\n")).collect()
}

fn seed_tree(p: &Project) {
    let _ = std::fs::remove_dir_all(p.root());
    std::fs::create_dir_all(p.path("src")).unwrap();
    for n in 0..UPDATES + DELETES + MOVES {
        std::fs::write(p.path(&format!("src/f{n:02}.txt")), file_text(n)).unwrap();
    }
}

/// A one-file patch commits at its one rename (no backup, no `prepared`):
/// SIGKILLed inside it, the server's restart leaves the file before or
/// after, says which (`patch_recovered` with `Completed` exactly when the
/// tree is after), and leaves nothing behind.
#[test]
fn a_sigkill_inside_a_one_file_patch_leaves_it_before_or_after() {
    let iterations: usize =
        std::env::var("SERVERFS_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let seed = std::env::var("SERVERFS_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64
            | 1,
    );
    eprintln!("one-file crash test: {iterations} kills, SERVERFS_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let p = Project::new();
    let patch = "*** Begin Patch\n*** Update File: src/f00.txt\n@@\n file 0 line 2999: some text to patch\n-file 0 line 3000: some text to patch\n+file 0 line 3000: PATCHED\n*** End Patch\n";
    let (before, after) = before_and_after(&p, patch);
    let journal_dir = p.state().join("journal");
    let journal_there = || {
        std::fs::read_dir(&journal_dir)
            .is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".json")))
    };
    // A commit of a few fsyncs is often over before it is seen: misses are
    // expected, and only bounded.
    let max_missed = MAX_MISSED.max(20 * iterations);
    let (mut saw_before, mut saw_after, mut missed, mut i) = (0, 0, 0, 0);
    while i < iterations {
        seed_tree(&p);
        let mut server = start_patching(&p, patch, false);
        let started = Instant::now();
        // The journal lives for a few fsyncs only: a busy machine may not
        // run this loop while it does; then the patch is seen applied.
        let patched = || {
            std::fs::read(p.path("src/f00.txt"))
                .is_ok_and(|b| b.windows(7).any(|w| w == b"PATCHED"))
        };
        while !journal_there() && !patched() {
            assert!(started.elapsed() < Duration::from_secs(120), "the commit never began");
            assert!(server.child.try_wait().unwrap().is_none(), "the server ended first");
            std::thread::yield_now();
        }
        for _ in 0..rng.next() % (MAX_SCANS + 1) {
            scan_live(&p.root().join("src"));
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        if !journal_there() {
            missed += 1;
            assert!(missed <= max_missed, "{missed} commits ended before their kill");
            restart_and_recover(&p);
            continue;
        }
        let log = restart_log(&p);
        assert!(log.contains("\"event\":\"patch_recovered\""), "kill {i}: nothing settled: {log}");
        let completed = log.contains("Completed");
        let tree = snapshot(&p.root());
        if tree == before {
            assert!(!completed, "kill {i}: reported completed, yet before (seed {seed}): {log}");
            saw_before += 1;
        } else {
            assert!(tree == after, "kill {i}: neither before nor after (seed {seed})");
            assert!(completed, "kill {i}: after, yet reported rolled back (seed {seed}): {log}");
            saw_after += 1;
        }
        assert!(tree.keys().all(|k| !k.contains(".serverfs-")), "kill {i}: writer leftovers");
        assert!(!journal_there(), "kill {i}: a journal was left");
        i += 1;
    }
    eprintln!(
        "one-file crash test: {iterations} kills inside a commit → {saw_before} before, \
         {saw_after} after; {missed} commits ended before their kill (not counted)"
    );
}

fn the_patch() -> String {
    let mut patch = String::from("*** Begin Patch\n");
    for n in 0..UPDATES {
        patch.push_str(&format!(
            "*** Update File: src/f{n:02}.txt\n@@\n file {n} line 2999: some text to patch\n-file {n} line 3000: some text to patch\n+file {n} line 3000: PATCHED\n file {n} line 3001: some text to patch\n"
        ));
    }
    for n in 0..ADDS {
        patch.push_str(&format!("*** Add File: added/a{n:02}.txt\n"));
        for i in 0..2000 {
            patch.push_str(&format!("+added {n} line {i}\n"));
        }
    }
    for n in UPDATES..UPDATES + DELETES {
        patch.push_str(&format!("*** Delete File: src/f{n:02}.txt\n"));
    }
    for n in UPDATES + DELETES..UPDATES + DELETES + MOVES {
        patch.push_str(&format!(
            "*** Update File: src/f{n:02}.txt\n*** Move to: moved/m{n:02}.txt\n@@\n-file {n} line 0: some text to patch\n+file {n} line 0: MOVED\n"
        ));
    }
    patch.push_str("*** End Patch\n");
    patch
}

fn snapshot(root: &Path) -> Tree {
    let mut tree = Tree::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                // Empty directories count too: a rollback removes the ones
                // the patch created.
                tree.insert(format!("{rel}/"), Vec::new());
                stack.push(path);
            } else {
                tree.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    tree
}

/// The tree before `patch` and after it, applied by the server without a
/// kill.
fn before_and_after(p: &Project, patch: &str) -> (Tree, Tree) {
    seed_tree(p);
    let before = snapshot(&p.root());
    let mut server = start_patching(p, patch, false);
    let answer = server.next();
    assert_eq!(answer["result"]["structuredContent"]["applied"], true, "{answer}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let after = snapshot(&p.root());
    assert_ne!(before, after);
    (before, after)
}

/// A server over stdio with the apply_patch call sent.
fn start_patching(p: &Project, patch: &str, dry_run: bool) -> RawStdio {
    let mut server = RawStdio::start(p);
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "apply_patch", "arguments": {"patch": patch, "dry_run": dry_run}}}));
    server
}

/// Starts the server once on the state directory (recovery runs first) and
/// stops it after its start-up log line; whether it settled a patch.
fn restart_and_recover(p: &Project) -> bool {
    restart_log(p).contains("\"event\":\"patch_recovered\"")
}

/// [`restart_and_recover`]'s start-up log.
fn restart_log(p: &Project) -> String {
    let out = p
        .command()
        .arg("--stdio")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "restart failed: {log}");
    assert!(log.contains("\"event\":\"starting\""), "{log}");
    log
}

/// Reads every file of a tree the writer is changing meanwhile (entries
/// may vanish under it): only to let the commit advance between events.
fn scan_live(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => scan_live(&entry.path()),
            _ => drop(std::fs::read(entry.path())),
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn a_sigkill_at_any_moment_leaves_the_tree_before_or_after() {
    let iterations: usize =
        std::env::var("SERVERFS_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let seed = std::env::var("SERVERFS_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
                | 1
        });
    eprintln!("crash test: {iterations} kills, SERVERFS_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let p = Project::new();
    let patch = the_patch();

    // The two acceptable trees.
    let (before, after) = before_and_after(&p, &patch);

    // The journal texts in the state directory (a transaction's journal is
    // replaced whole at each state change, so a read sees one state).
    let journal_texts = |p: &Project| -> Vec<String> {
        std::fs::read_dir(p.state().join("journal")).map_or(Vec::new(), |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
    };
    let journals = |p: &Project| journal_texts(p).len();
    let committed = |texts: &[String]| texts.iter().any(|t| t.contains("\"committed\""));
    // Where each kill aims: the commit has begun (intent), every new file is
    // durable (prepared), or the commit point has passed (committed).
    const STATES: [&str; 3] = ["", "\"prepared\"", "\"committed\""];
    let (mut saw_before, mut saw_after, mut missed, mut i) = (0, 0, 0, 0);
    while i < iterations {
        seed_tree(&p);
        let mut server = start_patching(&p, &patch, false);
        // The commit has reached the state aimed at.
        let aim = STATES[(rng.next() % 3) as usize];
        let started = Instant::now();
        while !journal_texts(&p).iter().any(|t| t.contains(aim)) {
            assert!(started.elapsed() < Duration::from_secs(120), "the commit never began");
            assert!(server.child.try_wait().unwrap().is_none(), "the server ended first");
            std::thread::yield_now();
        }
        for _ in 0..rng.next() % (MAX_SCANS + 1) {
            scan_live(&p.root());
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        // Inside the commit, or not counted: an unfinished transaction's
        // journal is what recovery starts from, and its state decides the
        // outcome.
        let at_death = journal_texts(&p);
        if at_death.is_empty() {
            missed += 1;
            assert!(missed <= MAX_MISSED, "{missed} commits ended before their kill");
            restart_and_recover(&p);
            continue;
        }
        assert!(restart_and_recover(&p), "kill {i}: the restart settled no patch");
        let tree = snapshot(&p.root());
        if tree == before {
            assert!(!committed(&at_death), "kill {i}: committed, yet rolled back (seed {seed})");
            saw_before += 1;
        } else if tree == after {
            assert!(committed(&at_death), "kill {i}: not committed, yet applied (seed {seed})");
            saw_after += 1;
        } else {
            let differs: Vec<&String> = tree
                .keys()
                .chain(after.keys())
                .filter(|k| tree.get(*k) != before.get(*k) && tree.get(*k) != after.get(*k))
                .take(5)
                .collect();
            panic!(
                "kill {i}: the tree is neither before nor after the patch (seed {seed}); e.g. {differs:?}"
            );
        }
        assert!(tree.keys().all(|k| !k.contains(".serverfs-")), "kill {i}: writer leftovers");
        assert_eq!(journals(&p), 0, "kill {i}: a journal was left");
        i += 1;
    }
    eprintln!(
        "crash test: {iterations} kills inside a commit → {saw_before} before, {saw_after} after; \
         {missed} commits ended before their kill (not counted)"
    );
}
