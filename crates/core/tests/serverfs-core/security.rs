//! Black-box escape tests for the resolver, on a real filesystem. The
//! escape matrix runs every case four times — both resolve modes (openat2
//! and the component walk) × both symlink rules (`Never` and
//! `FollowWithinRoot`); the cases only one rule can pass run in both modes
//! under that rule.

use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serverfs_core::entries::{PageRequest, list_directory};
use serverfs_core::text::{FIRST_LINE, read_page};
use serverfs_core::{
    Deadline, EntryKind, ErrorCode, FsError, Policy, ResolveMode, Root, RootOptions, SymlinkRule,
};

use crate::support;

const FIRST_PAGE: PageRequest<'static> = PageRequest { after: None, offset: 0, limit: 500 };

/// The root `w/01` beside a prefix-named sibling `w/01-x`, and a secret
/// outside both.
struct Fixture {
    _dir: tempfile::TempDir,
    root: Root,
    rule: SymlinkRule,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Links followed to reach `hops/h00`: one more than the resolver allows.
const TOO_MANY_HOPS: usize = 41;

fn fixture(mode: ResolveMode, rule: SymlinkRule) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = root.join("01");
    let b = root.join("01-x");
    write(&a.join("README.md"), "hello\n");
    write(&a.join("docs/guide.md"), "guide\n");
    write(&a.join(".hidden"), "hidden\n");
    write(&a.join(".config/app.toml"), "x=1\n");
    write(&a.join("secret.env"), "TOKEN=1\n");
    write(&a.join("secret.pem"), "PEM\n");
    write(&a.join(".env"), "TOKEN=1\n");
    write(&a.join("keys/Server.KEY"), "k\n");
    write(&a.join("keys/ID_RSA"), "k\n");
    write(&b.join("private.txt"), "other workdir\n");
    write(&root.join("outside.txt"), "outside\n");
    // Never followed under `Never`; under `FollowWithinRoot` the first
    // group is followed, the rest refused.
    symlink("README.md", a.join("link-file")).unwrap();
    symlink("docs", a.join("link-dir")).unwrap();
    symlink("link-file", a.join("chain")).unwrap();
    symlink("../README.md", a.join("docs/back")).unwrap();
    symlink(".", a.join("link-self")).unwrap();
    symlink("/etc", a.join("link-etc")).unwrap();
    symlink(&b, a.join("link-other")).unwrap();
    symlink("/proc/self/environ", a.join("link-environ")).unwrap();
    symlink("../outside.txt", a.join("link-up")).unwrap();
    symlink("../../outside.txt", a.join("docs/up2")).unwrap();
    symlink("../01-x/private.txt", a.join("link-sibling")).unwrap();
    symlink(".env", a.join("link-env")).unwrap();
    symlink("keys/ID_RSA", a.join("link-rsa")).unwrap();
    symlink("secret.pem", a.join("link-pem")).unwrap();
    symlink("link-env", a.join("chain-env")).unwrap();
    symlink(".config/app.toml", a.join("link-hidden")).unwrap();
    symlink("missing-target", a.join("link-broken")).unwrap();
    symlink("loop-b", a.join("loop-a")).unwrap();
    symlink("loop-a", a.join("loop-b")).unwrap();
    // hops/h00 → h01 → … → h40 → ../README.md: 41 links from h00, 40 from h01.
    std::fs::create_dir(a.join("hops")).unwrap();
    for i in 0..TOO_MANY_HOPS {
        let target = if i + 1 == TOO_MANY_HOPS {
            "../README.md".to_owned()
        } else {
            format!("h{:02}", i + 1)
        };
        symlink(target, a.join(format!("hops/h{i:02}"))).unwrap();
    }
    nix_mkfifo(&a.join("fifo"));
    let _socket = UnixListener::bind(a.join("socket")).unwrap();
    Fixture { root: support::root(&a, mode, rule), _dir: dir, rule }
}

/// Every link of the fixture that leads outside the root, to an absolute
/// target, or to a denied or hidden path: none may ever be read through.
const REFUSED_LINKS: &[&str] = &[
    "link-etc/passwd",
    "link-etc/",
    "link-other/private.txt",
    "link-environ",
    "link-up",
    "docs/up2",
    "link-sibling",
    "link-env",
    "link-rsa",
    "link-pem",
    "chain-env",
    "link-hidden",
];

fn nix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

impl Fixture {
    fn read(&self, path: &str) -> Result<String, FsError> {
        let loc = self.root.locate(path)?;
        let (file, _) = self.root.open_file(&loc)?;
        read_page(&file, &loc, FIRST_LINE, 100, 1 << 20, &Deadline::never()).map(|p| p.content)
    }
    fn stat(&self, path: &str) -> Result<EntryKind, FsError> {
        let loc = self.root.locate(path)?;
        self.root.inspect(&loc).map(|meta| meta.kind)
    }
    fn list(&self, path: &str) -> Result<Vec<String>, FsError> {
        let loc = self.root.locate(path)?;
        list_directory(&self.root, &loc, FIRST_PAGE, &Deadline::never())
            .map(|l| l.entries.into_iter().map(|e| e.name).collect())
    }
    fn follows(&self) -> bool {
        self.rule == SymlinkRule::FollowWithinRoot
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, FsError>) -> ErrorCode {
    r.unwrap_err().code()
}

/// One test per resolve mode for each listed symlink rule
/// (`name::Rule::openat2`, `name::Rule::component_walk`), all running the
/// same body on a fresh fixture.
macro_rules! resolver_test {
    ($name:ident, [$($rule:ident),+], |$f:ident| $body:block) => {
        mod $name {
            use super::*;
            fn case($f: &Fixture) $body
            $(
                #[allow(non_snake_case)]
                mod $rule {
                    use super::super::*;
                    #[test]
                    fn openat2() {
                        super::case(&fixture(ResolveMode::Openat2, SymlinkRule::$rule));
                    }
                    #[test]
                    fn component_walk() {
                        super::case(&fixture(ResolveMode::ComponentWalk, SymlinkRule::$rule));
                    }
                }
            )+
        }
    };
    ($name:ident, |$f:ident| $body:block) => {
        resolver_test!($name, [Never, FollowWithinRoot], |$f| $body);
    };
}

// ------------------------------------------------- the matrix: 4 × each

resolver_test!(normal_paths, |f| {
    assert_eq!(f.read("README.md").unwrap(), "hello\n");
    assert_eq!(f.read("docs/../README.md").unwrap(), "hello\n");
    assert_eq!(f.read("./docs/guide.md").unwrap(), "guide\n");
    // `link-dir/..` is normalised lexically and never touches the link
    assert_eq!(f.read("link-dir/../README.md").unwrap(), "hello\n");
    assert_eq!(f.stat("").unwrap(), EntryKind::Directory);
});

resolver_test!(traversal, |f| {
    for p in [
        "..",
        "../",
        "../../",
        "foo/../../../etc/passwd",
        "../01-x/private.txt",
        "docs/../../outside.txt",
    ] {
        assert_eq!(code(f.read(p)), ErrorCode::PathOutsideWorkdir, "{p}");
        assert_eq!(code(f.stat(p)), ErrorCode::PathOutsideWorkdir, "{p}");
        assert_eq!(code(f.list(p)), ErrorCode::PathOutsideWorkdir, "{p}");
    }
    assert_eq!(code(f.read("/etc/passwd")), ErrorCode::PathOutsideWorkdir);
});

resolver_test!(odd_syntax, |f| {
    for p in [
        "a\0b",
        "C:\\Windows\\win.ini",
        "C:/Windows",
        "\\\\server\\share\\x",
        "docs\\guide.md",
        "..\\..\\etc",
    ] {
        assert_eq!(code(f.read(p)), ErrorCode::InvalidArgument, "{p:?}");
    }
});

resolver_test!(links_out_or_to_secrets_are_never_read_through, |f| {
    for p in REFUSED_LINKS {
        let e = f.read(p).unwrap_err();
        assert!(
            matches!(
                e.code(),
                ErrorCode::SymlinkNotAllowed
                    | ErrorCode::PathOutsideWorkdir
                    | ErrorCode::DeniedPath
                    | ErrorCode::HiddenPathNotAllowed
            ),
            "{p}: {e}"
        );
        if !f.follows() {
            assert_eq!(e.code(), ErrorCode::SymlinkNotAllowed, "{p}");
        }
    }
    for p in ["link-etc", "link-other"] {
        assert_eq!(code(f.list(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    // A final link is inspected as itself under both rules; its target is
    // never revealed.
    for p in ["link-etc", "link-broken", "link-file", "link-env", "loop-a"] {
        assert_eq!(f.stat(p).unwrap(), EntryKind::Symlink, "{p}");
    }
    assert_eq!(code(f.stat("link-etc/passwd")), ErrorCode::SymlinkNotAllowed);
});

resolver_test!(hidden_and_denied, |f| {
    assert_eq!(code(f.read(".hidden")), ErrorCode::HiddenPathNotAllowed);
    assert_eq!(code(f.read(".config/app.toml")), ErrorCode::HiddenPathNotAllowed);
    assert_eq!(code(f.list(".config")), ErrorCode::HiddenPathNotAllowed);
    assert_eq!(code(f.stat(".hidden")), ErrorCode::HiddenPathNotAllowed);
    for p in [
        "secret.env",
        ".env",
        "keys/Server.KEY",
        "keys/ID_RSA",
        "nonexistent/.ssh/id_rsa",
        "missing.pem",
    ] {
        assert_eq!(code(f.read(p)), ErrorCode::DeniedPath, "{p}");
        assert_eq!(code(f.stat(p)), ErrorCode::DeniedPath, "{p}");
    }
    let root = f.list("").unwrap();
    for gone in [".hidden", ".config", "secret.env", ".env", "secret.pem"] {
        assert!(!root.contains(&gone.to_owned()), "{gone} listed");
    }
    assert!(f.list("keys").unwrap().is_empty());
    assert!(root.contains(&"link-etc".to_owned()));
});

resolver_test!(special_files_never_block, |f| {
    let started = Instant::now();
    assert_eq!(code(f.read("fifo")), ErrorCode::UnsupportedFileType);
    assert_eq!(code(f.read("socket")), ErrorCode::UnsupportedFileType);
    assert_eq!(code(f.list("fifo")), ErrorCode::NotADirectory);
    assert_eq!(f.stat("fifo").unwrap(), EntryKind::Special);
    assert_eq!(f.stat("socket").unwrap(), EntryKind::Special);
    assert!(started.elapsed() < Duration::from_secs(5));
});

resolver_test!(kinds_and_missing, |f| {
    assert_eq!(code(f.read("docs")), ErrorCode::NotAFile);
    assert_eq!(code(f.list("README.md")), ErrorCode::NotADirectory);
    assert_eq!(code(f.read("missing.txt")), ErrorCode::PathNotFound);
    // A file where a parent must be: ENOTDIR, the one mapping's NOT_A_DIRECTORY.
    assert_eq!(code(f.read("README.md/child")), ErrorCode::NotADirectory);
    assert_eq!(code(f.list("README.md/child")), ErrorCode::NotADirectory);
    assert_eq!(code(f.list("nope")), ErrorCode::PathNotFound);
});

resolver_test!(errors_never_name_host_paths, |f| {
    let host = f._dir.path().to_string_lossy().into_owned();
    let mut paths = vec![
        "missing.txt",
        "link-etc/passwd",
        "../x",
        "fifo",
        "docs",
        ".env",
        ".hidden",
        "README.md/x",
        "link-broken",
        "loop-a",
        "hops/h00",
    ];
    paths.extend(REFUSED_LINKS);
    for p in paths {
        let e = f.read(p).unwrap_err();
        assert!(!e.to_string().contains(&host) && !e.to_string().contains("/workdirs"), "{e}");
        assert!(!e.to_string().contains("/etc") && !e.to_string().contains("/proc"), "{e}");
        assert!(e.to_string().starts_with(e.code().as_str()));
    }
});

// `open_parent`, the write seam, never follows a link in the parent,
// whatever the rule, and reports a final link as itself.
resolver_test!(open_parent_never_follows, |f| {
    let parent = |p: &str| f.root.locate(p).and_then(|loc| f.root.open_parent(&loc));
    for p in ["link-dir/guide.md", "link-etc/passwd", "link-self/README.md", "hops/h00/x"] {
        assert_eq!(code(parent(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    for p in ["link-etc", "docs/back", "link-broken", "link-env/../link-file"] {
        let (dir, name) = parent(p).unwrap();
        assert_eq!(name.as_str(), p.rsplit('/').next().unwrap());
        assert_eq!(dir.meta(&name).unwrap().unwrap().kind, EntryKind::Symlink, "{p}");
    }
    let (dir, name) = parent("docs/guide.md").unwrap();
    assert_eq!(name.as_str(), "guide.md");
    let meta = dir.meta(&name).unwrap().unwrap();
    assert_eq!((meta.kind, meta.size), (EntryKind::File, 6));
    // The handle is the directory itself, usable for `*at` calls with its name.
    let fd = rustix::fs::openat(
        &dir,
        name.as_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    assert_eq!(std::io::read_to_string(std::fs::File::from(fd)).unwrap(), "guide\n");
    let (dir, name) = parent("docs/new.txt").unwrap();
    assert_eq!(dir.meta(&name).unwrap(), None);
    let (dir, name) = parent("README.md").unwrap();
    assert_eq!(dir.meta(&name).unwrap().unwrap().kind, EntryKind::File);
    // The root has no parent.
    for p in ["", ".", "docs/.."] {
        assert_eq!(code(parent(p)), ErrorCode::InvalidArgument, "{p:?}");
    }
    // `..` and absolute paths are refused before any lookup, and the whole
    // path, final name included, passes the policy.
    for (p, expected) in [
        ("../x", ErrorCode::PathOutsideWorkdir),
        ("docs/../../x", ErrorCode::PathOutsideWorkdir),
        ("/etc/passwd", ErrorCode::PathOutsideWorkdir),
        ("docs/.env", ErrorCode::DeniedPath),
        ("keys/id_rsa", ErrorCode::DeniedPath),
        (".config/new", ErrorCode::HiddenPathNotAllowed),
        ("missing/new.txt", ErrorCode::PathNotFound),
        ("README.md/x", ErrorCode::NotADirectory),
    ] {
        assert_eq!(code(parent(p)), expected, "{p}");
    }
});

// ------------------------------------------------------- Never only

resolver_test!(symlinks_are_never_followed, [Never], |f| {
    for p in [
        "link-file",
        "link-dir/guide.md",
        "chain",
        "docs/back",
        "link-self/README.md",
        "link-broken",
        "loop-a",
        "hops/h01",
    ] {
        assert_eq!(code(f.read(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    for p in ["link-dir", "link-self"] {
        assert_eq!(code(f.list(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    assert_eq!(code(f.stat("link-dir/guide.md")), ErrorCode::SymlinkNotAllowed);
});

// -------------------------------------------- FollowWithinRoot only

resolver_test!(links_inside_are_followed, [FollowWithinRoot], |f| {
    assert_eq!(f.read("link-file").unwrap(), "hello\n");
    assert_eq!(f.read("link-dir/guide.md").unwrap(), "guide\n");
    assert_eq!(f.read("chain").unwrap(), "hello\n");
    // Relative to the link's own directory.
    assert_eq!(f.read("docs/back").unwrap(), "hello\n");
    assert_eq!(f.read("link-self/link-self/README.md").unwrap(), "hello\n");
    assert_eq!(f.list("link-dir").unwrap(), ["back", "guide.md", "up2"]);
    assert_eq!(f.list("link-self").unwrap(), f.list("").unwrap());
    // Links before the final component are followed; the final one is
    // inspected as itself.
    assert_eq!(f.stat("link-dir/guide.md").unwrap(), EntryKind::File);
    assert_eq!(f.stat("link-dir/back").unwrap(), EntryKind::Symlink);
    // 40 links is the most one resolution follows.
    assert_eq!(f.read("hops/h01").unwrap(), "hello\n");
    assert_eq!(code(f.list("link-file")), ErrorCode::NotADirectory);
    assert_eq!(code(f.read("link-dir")), ErrorCode::NotAFile);
});

resolver_test!(links_that_leave_are_refused, [FollowWithinRoot], |f| {
    for p in ["link-up", "docs/up2", "link-sibling", "link-dir/up2"] {
        assert_eq!(code(f.read(p)), ErrorCode::PathOutsideWorkdir, "{p}");
    }
    // Absolute targets are refused outright: /etc, another workdir, and
    // the /proc magic links behind them are never reached.
    for p in ["link-etc/passwd", "link-other/private.txt", "link-environ"] {
        let e = f.read(p).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SymlinkNotAllowed, "{p}");
        assert!(e.message().contains("absolute target"), "{e}");
    }
    assert_eq!(code(f.list("link-etc")), ErrorCode::SymlinkNotAllowed);
    assert_eq!(code(f.list("link-up")), ErrorCode::PathOutsideWorkdir);
});

resolver_test!(policy_is_checked_on_every_hop, [FollowWithinRoot], |f| {
    for p in ["link-env", "link-rsa", "link-pem", "chain-env"] {
        let e = f.read(p).unwrap_err();
        assert_eq!(e.code(), ErrorCode::DeniedPath, "{p}");
        // Named by the client's path; the target is not revealed.
        assert!(e.message().starts_with(&format!("a:/{p} ")), "{e}");
    }
    assert_eq!(code(f.read("link-hidden")), ErrorCode::HiddenPathNotAllowed);
});

resolver_test!(dangling_links_loops_and_hop_limit, [FollowWithinRoot], |f| {
    assert_eq!(code(f.read("link-broken")), ErrorCode::PathNotFound);
    assert_eq!(code(f.list("link-broken")), ErrorCode::PathNotFound);
    for p in ["loop-a", "loop-b/x", "hops/h00"] {
        let e = f.read(p).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SymlinkNotAllowed, "{p}");
        assert!(e.message().contains("too many levels"), "{e}");
    }
});

/// A working-tree policy (hidden allowed, `.git` denied, as serverfs-dev
/// has it): a link into `.git` is refused as `.git` itself is.
fn link_into_git(mode: ResolveMode) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(&r.join(".git/config"), "[core]\n");
    write(&r.join(".github/ci.yml"), "on: push\n");
    symlink(".git/config", r.join("notes")).unwrap();
    symlink(".git", r.join("gitdir")).unwrap();
    symlink(".github/ci.yml", r.join("ci")).unwrap();
    let policy = Policy::new(true, &[".git/**".to_owned()]).unwrap();
    let options =
        RootOptions::new("dev", policy).symlinks(SymlinkRule::FollowWithinRoot).resolve_mode(mode);
    let root = Root::open(r, options).unwrap();
    let read = |p: &str| -> Result<String, FsError> {
        let loc = root.locate(p)?;
        let (file, _) = root.open_file(&loc)?;
        read_page(&file, &loc, FIRST_LINE, 10, 4096, &Deadline::never()).map(|p| p.content)
    };
    for p in [".git/config", "notes", "gitdir/config"] {
        assert_eq!(code(read(p)), ErrorCode::DeniedPath, "{p}");
    }
    let loc = root.locate("gitdir").unwrap();
    let listed = list_directory(&root, &loc, FIRST_PAGE, &Deadline::never());
    assert_eq!(code(listed), ErrorCode::DeniedPath);
    assert_eq!(read("ci").unwrap(), "on: push\n");
}

#[test]
fn link_into_git_openat2() {
    link_into_git(ResolveMode::Openat2);
}

#[test]
fn link_into_git_component_walk() {
    link_into_git(ResolveMode::ComponentWalk);
}

// ------------------------------------------------------------- races

/// A thread that swaps pairs of names below a directory with
/// `RENAME_EXCHANGE` (atomically, so every lookup meets one or the other)
/// until stopped: the race every swap test runs against.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Swapper {
    /// Starts swapping each `(a, b)` of `pairs` below `dir`, in a loop.
    fn start(dir: &std::path::Path, pairs: &[(&str, &str)]) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pairs: Vec<_> = pairs.iter().map(|(a, b)| (dir.join(a), dir.join(b))).collect();
        let running = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !running.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        a,
                        rustix::fs::CWD,
                        b,
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
                rounds += 1;
            }
            rounds
        });
        Self { stop, thread }
    }

    /// Stops the thread; how many rounds of swaps it made.
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// One test per resolve mode × symlink rule, each calling `$run(mode, rule)`.
macro_rules! four_ways {
    ($name:ident, $run:ident) => {
        mod $name {
            use super::*;
            #[test]
            fn openat2_never() {
                $run(ResolveMode::Openat2, SymlinkRule::Never);
            }
            #[test]
            fn component_walk_never() {
                $run(ResolveMode::ComponentWalk, SymlinkRule::Never);
            }
            #[test]
            fn openat2_follow() {
                $run(ResolveMode::Openat2, SymlinkRule::FollowWithinRoot);
            }
            #[test]
            fn component_walk_follow() {
                $run(ResolveMode::ComponentWalk, SymlinkRule::FollowWithinRoot);
            }
        }
    };
}

/// One thread swaps two directories with symlinks to /etc (one absolute,
/// one relative and climbing) as fast as it can while reads, stats and
/// listings run through them, and through a link to a safe directory:
/// nothing may ever come from /etc.
fn race(mode: ResolveMode, rule: SymlinkRule) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    for d in ["real", "swap", "swap2"] {
        write(&root.join(d).join("passwd"), "safe\n");
        write(&root.join(d).join("hostname"), "safe\n");
    }
    symlink("/etc", root.join("evil")).unwrap();
    symlink("../".repeat(32) + "etc", root.join("evil2")).unwrap();
    symlink("real", root.join("inner")).unwrap();
    let opened = support::root(&root, mode, rule);

    // RENAME_EXCHANGE swaps a directory and a symlink atomically.
    let swapper = Swapper::start(&root, &[("swap", "evil"), ("swap2", "evil2")]);
    let (mut ok_reads, mut inner_reads) = (0, 0);
    for _ in 0..10_000 {
        for name in ["swap/passwd", "evil/passwd", "swap2/passwd", "evil2/passwd", "inner/hostname"]
        {
            let Ok(loc) = opened.locate(name) else { continue };
            if let Ok((file, _)) = opened.open_file(&loc) {
                let content = read_page(&file, &loc, FIRST_LINE, 10, 4096, &Deadline::never())
                    .map(|p| p.content)
                    .unwrap_or_default();
                assert!(content.is_empty() || content == "safe\n", "escaped: {content:?}");
                ok_reads += 1;
                inner_reads += usize::from(name.starts_with("inner/"));
            }
        }
        for d in ["swap", "evil", "swap2", "evil2", "inner"] {
            if let Ok(loc) = opened.locate(d)
                && let Ok(listing) = list_directory(&opened, &loc, FIRST_PAGE, &Deadline::never())
            {
                let names: Vec<_> = listing.entries.iter().map(|e| e.name.as_str()).collect();
                assert!(
                    names.iter().all(|n| ["passwd", "hostname"].contains(n)),
                    "escaped: {names:?}"
                );
                assert!(names.len() <= 2, "escaped: {names:?}");
            }
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 1000, "the swapper ran only {swaps} times");
    assert!(ok_reads > 0, "no read ever succeeded: the test did not exercise the race");
    if rule == SymlinkRule::FollowWithinRoot {
        assert_eq!(inner_reads, 10_000, "a link inside was not followed every time");
    }
}

four_ways!(race_directory_swapped_for_symlink, race);

/// A regular file and a FIFO swap names (`RENAME_EXCHANGE`) while files
/// are opened by that name. The FIFO has a writer blocked in `open`, which
/// any reader's open would release: the resolver classifies an `O_PATH`
/// handle and re-opens *that* inode, so the writer must stay blocked.
fn fifo_swap_race(mode: ResolveMode, rule: SymlinkRule) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("target"), "safe\n").unwrap();
    nix_mkfifo(&root.join("fifo"));
    // A second name for the FIFO that never moves, for the writer.
    std::fs::hard_link(root.join("fifo"), root.join("anchor")).unwrap();
    let opened = support::root(&root, mode, rule);
    assert!(opened.reopens_in_place(), "this test needs procfs");

    let released = Arc::new(AtomicBool::new(false));
    let writer = {
        let released = Arc::clone(&released);
        let anchor = root.join("anchor");
        std::thread::spawn(move || {
            let opened = std::fs::OpenOptions::new().write(true).open(anchor);
            released.store(true, Ordering::SeqCst);
            opened.is_ok()
        })
    };
    let swapper = Swapper::start(&root, &[("target", "fifo")]);
    let (mut files, mut fifos) = (0u64, 0u64);
    for _ in 0..20_000 {
        let loc = opened.locate("target").unwrap();
        match opened.open_file(&loc) {
            Ok((file, _)) => {
                let page =
                    read_page(&file, &loc, FIRST_LINE, 10, 4096, &Deadline::never()).unwrap();
                assert_eq!(page.content, "safe\n");
                files += 1;
            }
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::UnsupportedFileType, "{e}");
                fifos += 1;
            }
        }
        assert!(!released.load(Ordering::SeqCst), "a FIFO was opened for reading");
    }
    swapper.stop();
    assert!(files > 0 && fifos > 0, "the race was not exercised ({files} files, {fifos} FIFOs)");
    assert!(!released.load(Ordering::SeqCst), "a FIFO was opened for reading");
    // Release the writer ourselves.
    let _reader = rustix::fs::open(
        root.join("anchor"),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    assert!(writer.join().unwrap());
}

four_ways!(race_file_swapped_for_fifo, fifo_swap_race);
