//! search_text with worker threads gives, bit for bit, the answer of the
//! sequential search (one thread, one file after the other): on a generated
//! tree with matches in random places, binary files, a file with a line too
//! long to buffer, oversized files, hidden and denied names, at every limit
//! cut-off, and page by page through the cursors.
//!
//! find_files with directories read ahead by worker threads gives the
//! answer of the walk on one thread the same way — every limit, every
//! walk cap, page by page, with a subtree too deep for the kernel to open
//! (read errors) — and stops, joined, when cancelled mid-walk.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serverfs_core::{Policy, Root, RootOptions, SymlinkRule};
use serverfs_search::{
    Budget, FindOutcome, MAX_LINE_BYTES, SearchOutcome, SearchQuery, TruncatedReason, find_files,
    search_text,
};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// About 400 files in nested directories; "needle" in random lines of
/// random files, some several times.
fn generate(root: &Path, seed: u64) {
    let mut rng = Rng(seed);
    let names = ["a", "a-b", "a.b", "b", "B", "z", "_x", "m0", "m10", "m9"];
    let mut count = 0;
    let mut dirs = vec![String::new()];
    while count < 400 {
        let dir = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let name = format!("{}{}", names[rng.below(names.len() as u64) as usize], rng.below(30));
        let rel = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
        if rng.below(6) == 0 {
            if root.join(&rel).is_file() {
                continue;
            }
            fs::create_dir_all(root.join(&rel)).unwrap();
            dirs.push(rel);
            continue;
        }
        if root.join(&rel).is_dir() {
            continue;
        }
        let mut content = Vec::new();
        for line in 0..rng.below(60) {
            match rng.below(10) {
                0 => content.extend_from_slice(format!("{line} the needle here\n").as_bytes()),
                1 => content.extend_from_slice(b"NEEDLE shouted\r\n"),
                _ => content.extend_from_slice(format!("line {line} of {rel}\n").as_bytes()),
            }
        }
        match rng.below(40) {
            0 => content.push(0),
            1 => content.extend_from_slice(b"\xEF\xBB\xBFneedle with a BOM in the middle\n"),
            _ => {}
        }
        let ext = ["txt", "rs", "md"][rng.below(3) as usize];
        write(root, &format!("{rel}.{ext}"), &content);
        count += 1;
    }
    // Matches before a line too long to buffer: the worker, with room for
    // every match, cannot read the file to the end; a sequential search
    // with less room left stops before the long line.
    let mut long = b"needle 1\nneedle 2\nneedle 3\n".to_vec();
    long.extend(vec![b'x'; MAX_LINE_BYTES + 1]);
    long.extend(b"\nneedle 4\n");
    write(root, "a5/long.txt", &long);
    write(root, "a5/zz-after-long.txt", b"needle after\n");
    // Binary after many matches, hidden, denied, too large.
    let mut binary = b"needle\n".repeat(300);
    binary.push(0);
    write(root, "b7/binary.txt", &binary);
    write(root, ".hidden/x.txt", b"needle\n");
    write(root, "m1/.env", b"needle\n");
    write(root, "m1/big.txt", b"needle\n");
    // Sparse, over the size cap: never read.
    fs::File::options()
        .write(true)
        .open(root.join("m1/big.txt"))
        .unwrap()
        .set_len(MAX_FILE)
        .unwrap();
}

/// The size cap of these searches: the long-line file is below it.
const MAX_FILE: u64 = 2 * MAX_LINE_BYTES as u64;

fn open(root: &Path) -> Root {
    let options =
        RootOptions::new("w", Policy::new(false, &[]).unwrap()).symlinks(SymlinkRule::Never);
    Root::open(root, options).unwrap()
}

fn budget(workers: usize) -> Budget {
    Budget::new(1_000_000, Duration::from_secs(60), Arc::new(AtomicBool::new(false)))
        .with_workers(workers)
}

fn query<'q>(text: &'q str, limit: u64, cursor: Option<&'q str>) -> SearchQuery<'q> {
    SearchQuery {
        query: text,
        glob: None,
        case_sensitive: false,
        limit,
        max_file_bytes: MAX_FILE - 1,
        cursor,
    }
}

fn search(root: &Root, path: &str, q: &SearchQuery<'_>, b: &Budget) -> SearchOutcome {
    let start = root.locate(path).unwrap();
    search_text(root, &start, q, b).unwrap()
}

/// Every page, following `next_cursor`, with `workers` threads.
fn pages(root: &Root, q: &SearchQuery<'_>, workers: usize) -> Vec<SearchOutcome> {
    let mut out = vec![search(root, "", q, &budget(workers))];
    while let Some(cursor) = out.last().unwrap().next_cursor.clone() {
        let next = SearchQuery { cursor: Some(&cursor), ..*q };
        out.push(search(root, "", &next, &budget(workers)));
        assert!(out.len() < 10_000, "paging does not end");
    }
    out
}

#[test]
fn parallel_equals_sequential_at_every_limit() {
    for seed in [1, 0x9E37_79B9_7F4A_7C15] {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), seed);
        let root = open(dir.path());
        let whole = search(&root, "", &query("needle", 100_000, None), &budget(1));
        assert!(whole.matches.len() > 300, "{}", whole.matches.len());
        assert!(whole.skipped.binary >= 1 && whole.skipped.too_large == 1, "{:?}", whole.skipped);
        assert_eq!(whole.skipped.unreadable, 1, "the long-line file");
        let n = whole.matches.len() as u64;
        let mut limits: Vec<u64> = (1..=12).collect();
        limits.extend([29, 50, 99, 100, 101, 250, n - 1, n, n + 1]);
        for limit in limits {
            let q = query("needle", limit, None);
            let want = search(&root, "", &q, &budget(1));
            for workers in [2, 5] {
                let got = search(&root, "", &q, &budget(workers));
                assert_eq!(got, want, "seed {seed:#x}, limit {limit}, {workers} workers");
            }
        }
        // From a subdirectory, with a glob, case-sensitive.
        let q =
            SearchQuery { glob: Some("*.rs"), case_sensitive: true, ..query("needle", 7, None) };
        assert_eq!(search(&root, "a5", &q, &budget(4)), search(&root, "a5", &q, &budget(1)));
    }
}

#[test]
fn parallel_pages_equal_sequential_pages() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), 7);
    let root = open(dir.path());
    for limit in [3, 37, 100] {
        let q = query("needle", limit, None);
        let want = pages(&root, &q, 1);
        let got = pages(&root, &q, 4);
        assert_eq!(got, want, "limit {limit}");
        assert!(got.len() as u64 > 300 / limit, "limit {limit}: {} pages", got.len());
    }
}

/// The long-line file with room left for fewer matches than it holds
/// before the long line: the verdict is the sequential one (its first
/// matches, not "unreadable").
#[test]
fn a_file_cut_short_by_a_long_line_counts_as_sequentially() {
    let dir = tempfile::tempdir().unwrap();
    let mut long = b"needle 1\nneedle 2\nneedle 3\n".to_vec();
    long.extend(vec![b'x'; MAX_LINE_BYTES + 1]);
    long.extend(b"\nneedle 4\n");
    write(dir.path(), "a/1.txt", b"needle a\n");
    write(dir.path(), "a/2.txt", &long);
    write(dir.path(), "a/3.txt", b"needle c\n");
    let root = open(dir.path());
    for limit in 1..=6 {
        let q = query("needle", limit, None);
        let want = search(&root, "", &q, &budget(1));
        let got = search(&root, "", &q, &budget(3));
        assert_eq!(got, want, "limit {limit}");
        let lines: Vec<_> = got.matches.iter().map(|m| (m.path.as_str(), m.line)).collect();
        match limit {
            1 => assert_eq!(lines, [("a/1.txt", 1)]),
            2 | 3 => assert_eq!(lines.len() as u64, limit),
            _ => {
                // The file is unreadable once all of it must be read.
                assert_eq!(lines, [("a/1.txt", 1), ("a/3.txt", 1)]);
                assert_eq!(got.skipped.unreadable, 1);
            }
        }
    }
}

// ---------------------------------------------------------------- find_files

/// A chain of directories with 250-byte names, 20 deep: the paths below
/// about the 16th level are too long for the kernel to open (read errors
/// for the walk), though every level can be made relative to its parent.
fn too_deep(root: &Path, at: &str) {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    fs::create_dir_all(root.join(at)).unwrap();
    let mut dir = openat(
        rustix::fs::CWD,
        root.join(at),
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    for level in 0..20 {
        let name = format!("{level:02}{}", "d".repeat(248));
        mkdirat(&dir, &name, Mode::from_raw_mode(0o755)).unwrap();
        rustix::fs::openat(
            &dir,
            "f.rs",
            OFlags::CREATE | OFlags::WRONLY,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        dir = openat(
            &dir,
            &name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
    }
}

/// The search tree plus empty directories, a symlink to a directory
/// (listed, never descended) and the too-deep chain.
fn find_tree(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), seed);
    for empty in ["e0", "a0/e1", "z9/e2/e3"] {
        fs::create_dir_all(dir.path().join(empty)).unwrap();
    }
    std::os::unix::fs::symlink("..", dir.path().join("a0/up")).unwrap();
    too_deep(dir.path(), "m5");
    dir
}

fn find(
    root: &Root,
    path: &str,
    pattern: &str,
    limit: u64,
    cursor: Option<&str>,
    b: &Budget,
) -> FindOutcome {
    let start = root.locate(path).unwrap();
    find_files(root, &start, pattern, limit, cursor, b).unwrap()
}

/// Every page of a find, following `next_cursor`, each call under
/// `budget(call number)`.
fn find_pages(
    root: &Root,
    path: &str,
    pattern: &str,
    limit: u64,
    budget: &dyn Fn(usize) -> Budget,
) -> Vec<FindOutcome> {
    let mut out = vec![find(root, path, pattern, limit, None, &budget(0))];
    while let Some(cursor) = out.last().unwrap().next_cursor.clone() {
        out.push(find(root, path, pattern, limit, Some(&cursor), &budget(out.len())));
        assert!(out.len() < 100_000, "paging does not end");
    }
    out
}

fn capped(cap: u64, workers: usize) -> Budget {
    Budget::new(cap, Duration::from_secs(60), Arc::new(AtomicBool::new(false)))
        .with_workers(workers)
}

#[test]
fn find_parallel_equals_sequential_at_every_limit() {
    for seed in [3, 0x9E37_79B9_7F4A_7C15] {
        let dir = find_tree(seed);
        let root = open(dir.path());
        for pattern in ["*", "*.rs", "**/m*/**/*.md", "f.rs"] {
            let whole = find(&root, "", pattern, 1_000_000, None, &budget(1));
            assert_eq!(whole.truncated_reason, None);
            if pattern == "*" {
                assert!(whole.matches.len() > 450, "{}", whole.matches.len());
                // The chain's deep levels: read errors, counted.
                assert!(whole.skipped.unreadable >= 2, "{:?}", whole.skipped);
                assert!(whole.matches.iter().any(|m| m.path == "a0/up"));
                assert!(!whole.matches.iter().any(|m| m.path.starts_with("a0/up/")));
            }
            let n = whole.matches.len() as u64;
            let mut limits: Vec<u64> = (1..=12).chain([29, 50, 99, 100, 101, 250]).collect();
            limits.extend([n.saturating_sub(1), n, n + 1]);
            limits.retain(|&limit| limit >= 1);
            for limit in limits {
                let want = find(&root, "", pattern, limit, None, &budget(1));
                assert_eq!(want.matches[..], whole.matches[..want.matches.len()]);
                for workers in [2, 5] {
                    let got = find(&root, "", pattern, limit, None, &budget(workers));
                    assert_eq!(
                        got, want,
                        "seed {seed:#x}, {pattern}, limit {limit}, {workers} workers"
                    );
                }
            }
            // From a subdirectory.
            for path in ["m5", "a0"] {
                let want = find(&root, path, pattern, 13, None, &budget(1));
                assert_eq!(find(&root, path, pattern, 13, None, &budget(3)), want, "{path}");
            }
        }
    }
}

#[test]
fn find_parallel_pages_equal_sequential_pages() {
    let dir = find_tree(11);
    let root = open(dir.path());
    let whole = find(&root, "", "*", 1_000_000, None, &budget(1));
    for limit in [1, 7, 100] {
        let want = find_pages(&root, "", "*", limit, &|_| budget(1));
        let got = find_pages(&root, "", "*", limit, &|_| budget(4));
        assert_eq!(got, want, "limit {limit}");
        let all: Vec<_> = got.iter().flat_map(|o| o.matches.clone()).collect();
        assert_eq!(all, whole.matches, "limit {limit}");
    }
    // Walk caps: every page is cut by the cap, and visits exactly `cap`
    // entries (read errors among them).
    for cap in [1, 5, 64] {
        let want = find_pages(&root, "", "*", 1_000_000, &|_| capped(cap, 1));
        let got = find_pages(&root, "", "*", 1_000_000, &|_| capped(cap, 3));
        assert_eq!(got, want, "cap {cap}");
        let all: Vec<_> = got.iter().flat_map(|o| o.matches.clone()).collect();
        assert_eq!(all, whole.matches, "cap {cap}");
        let unreadable: u64 = got.iter().map(|o| o.skipped.unreadable).sum();
        assert_eq!(unreadable, whole.skipped.unreadable, "cap {cap}");
        for page in &got[..got.len() - 1] {
            assert_eq!(page.truncated_reason, Some(TruncatedReason::WalkLimitReached));
        }
        if cap == 64 {
            let visited = got[0].matches.len() as u64 + got[0].skipped.unreadable;
            assert_eq!(visited, 64, "the first page visits exactly the cap");
        }
    }
}

/// Cancelled before the first entry: nothing found, a cursor at the start,
/// and the readers it started are stopped and joined (the call returns).
/// Cancelled by another thread the moment the walk opens a directory early
/// in the tree (an inotify event, not a clock): the call returns, with a
/// prefix of the answer when it stopped, and its cursor continues exactly.
#[test]
fn find_cancelled_mid_walk_stops_and_pages_on() {
    use rustix::fs::inotify;
    let dir = tempfile::tempdir().unwrap();
    for d in 0..150 {
        for f in 0..60 {
            write(dir.path(), &format!("d{d:03}/f{f:02}.txt"), b"");
        }
    }
    let root = open(dir.path());
    let whole = find(&root, "", "*", 1_000_000, None, &budget(1));
    assert_eq!(whole.matches.len(), 150 * 61);

    let flag = Arc::new(AtomicBool::new(true));
    let b = Budget::new(1_000_000, Duration::from_secs(600), flag).with_workers(4);
    let out = find(&root, "", "*", 1_000_000, None, &b);
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchTimeout));
    assert!(out.matches.is_empty());
    let rest = find(&root, "", "*", 1_000_000, out.next_cursor.as_deref(), &budget(4));
    assert_eq!(rest.matches, whole.matches);

    for watched in ["d002", "d040"] {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&fd, dir.path().join(watched), inotify::WatchFlags::OPEN).unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                let mut buf = [std::mem::MaybeUninit::uninit(); 1024];
                inotify::Reader::new(&fd, &mut buf).next().unwrap();
                flag.store(true, Ordering::Relaxed);
            })
        };
        let b = Budget::new(1_000_000, Duration::from_secs(600), flag.clone()).with_workers(4);
        let out = find(&root, "", "*", 1_000_000, None, &b);
        setter.join().unwrap();
        assert!(flag.load(Ordering::Relaxed));
        let got = out.matches.len();
        assert_eq!(out.matches[..], whole.matches[..got], "{watched}");
        if out.truncated_reason.is_some() {
            assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchTimeout));
            let rest = find(&root, "", "*", 1_000_000, out.next_cursor.as_deref(), &budget(4));
            assert_eq!(rest.matches[..], whole.matches[got..], "{watched}");
        } else {
            assert_eq!(got, whole.matches.len());
        }
    }
}
