//! Black-box escape tests for the resolver, each run against both resolve
//! modes (openat2 and the component walk), on a real filesystem.

use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serverfs_core::entries::{PageRequest, list_directory, stat_entry};
use serverfs_core::text::{FIRST_LINE, read_page};
use serverfs_core::{
    Deadline, EntryKind, ErrorCode, FsError, Policy, ResolveMode, Sandbox, WorkdirSpec,
};

const FIRST_PAGE: PageRequest<'static> = PageRequest { after: None, offset: 0, limit: 500 };

/// Two workdirs side by side (`w/01`, `w/01-x`, as prefix-named siblings) and
/// a secret outside both.
struct Fixture {
    _dir: tempfile::TempDir,
    sandbox: Sandbox,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn fixture(mode: ResolveMode) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = root.join("01");
    let b = root.join("01-x");
    write(&a.join("README.md"), "hello\n");
    write(&a.join("docs/guide.md"), "guide\n");
    write(&a.join(".hidden"), "hidden\n");
    write(&a.join(".config/app.toml"), "x=1\n");
    write(&a.join("secret.env"), "TOKEN=1\n");
    write(&a.join(".env"), "TOKEN=1\n");
    write(&a.join("keys/Server.KEY"), "k\n");
    write(&a.join("keys/ID_RSA"), "k\n");
    write(&b.join("private.txt"), "other workdir\n");
    write(&root.join("outside.txt"), "outside\n");
    symlink("README.md", a.join("link-file")).unwrap();
    symlink("docs", a.join("link-dir")).unwrap();
    symlink("/etc", a.join("link-etc")).unwrap();
    symlink(&b, a.join("link-other")).unwrap();
    symlink("missing-target", a.join("link-broken")).unwrap();
    symlink("/proc/self/environ", a.join("link-environ")).unwrap();
    symlink("../outside.txt", a.join("link-up")).unwrap();
    nix_mkfifo(&a.join("fifo"));
    let _socket = UnixListener::bind(a.join("socket")).unwrap();
    let specs = vec![
        WorkdirSpec { alias: "a".into(), description: None, host_path: a, origin: "a".into() },
        WorkdirSpec { alias: "b".into(), description: None, host_path: b, origin: "b".into() },
    ];
    let sandbox = Sandbox::open(specs, Policy::new(false, &[]).unwrap()).unwrap().with_mode(mode);
    Fixture { _dir: dir, sandbox }
}

fn nix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

impl Fixture {
    fn read(&self, path: &str) -> Result<String, FsError> {
        let loc = self.sandbox.locate("a", path)?;
        let (file, _) = self.sandbox.open_file(&loc)?;
        read_page(&file, &loc, FIRST_LINE, 100, 1 << 20, &Deadline::never()).map(|p| p.content)
    }
    fn stat(&self, path: &str) -> Result<EntryKind, FsError> {
        let loc = self.sandbox.locate("a", path)?;
        stat_entry(&self.sandbox, &loc).map(|i| i.kind)
    }
    fn list(&self, path: &str) -> Result<Vec<String>, FsError> {
        let loc = self.sandbox.locate("a", path)?;
        list_directory(&self.sandbox, &loc, FIRST_PAGE, &Deadline::never())
            .map(|l| l.entries.into_iter().map(|e| e.name).collect())
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, FsError>) -> ErrorCode {
    r.unwrap_err().code()
}

/// Runs the body once per resolve mode.
macro_rules! both_modes {
    ($name:ident, |$f:ident| $body:block) => {
        mod $name {
            use super::*;
            #[test]
            fn openat2() {
                let $f = fixture(ResolveMode::Openat2);
                $body
            }
            #[test]
            fn component_walk() {
                let $f = fixture(ResolveMode::ComponentWalk);
                $body
            }
        }
    };
}

both_modes!(normal_paths, |f| {
    assert_eq!(f.read("README.md").unwrap(), "hello\n");
    assert_eq!(f.read("docs/../README.md").unwrap(), "hello\n");
    assert_eq!(f.read("./docs/guide.md").unwrap(), "guide\n");
    // `link-dir/..` is normalised lexically and never touches the link
    assert_eq!(f.read("link-dir/../README.md").unwrap(), "hello\n");
    assert_eq!(f.stat("").unwrap(), EntryKind::Directory);
});

both_modes!(traversal, |f| {
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

both_modes!(odd_syntax, |f| {
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

both_modes!(symlinks_are_never_followed, |f| {
    for p in [
        "link-file",
        "link-dir/guide.md",
        "link-etc/passwd",
        "link-other/private.txt",
        "link-broken",
        "link-environ",
        "link-up",
        "link-etc/",
    ] {
        assert_eq!(code(f.read(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    for p in ["link-dir", "link-etc", "link-other"] {
        assert_eq!(code(f.list(p)), ErrorCode::SymlinkNotAllowed, "{p}");
    }
    // the link itself can be stat'ed, never through it
    assert_eq!(f.stat("link-etc").unwrap(), EntryKind::Symlink);
    assert_eq!(f.stat("link-broken").unwrap(), EntryKind::Symlink);
    assert_eq!(code(f.stat("link-etc/passwd")), ErrorCode::SymlinkNotAllowed);
    assert_eq!(code(f.stat("link-dir/guide.md")), ErrorCode::SymlinkNotAllowed);
});

both_modes!(hidden_and_denied, |f| {
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
    for gone in [".hidden", ".config", "secret.env", ".env"] {
        assert!(!root.contains(&gone.to_owned()), "{gone} listed");
    }
    assert!(f.list("keys").unwrap().is_empty());
    assert!(root.contains(&"link-etc".to_owned()));
});

both_modes!(special_files_never_block, |f| {
    let started = Instant::now();
    assert_eq!(code(f.read("fifo")), ErrorCode::UnsupportedFileType);
    assert_eq!(code(f.read("socket")), ErrorCode::UnsupportedFileType);
    assert_eq!(code(f.list("fifo")), ErrorCode::NotADirectory);
    assert_eq!(f.stat("fifo").unwrap(), EntryKind::Special);
    assert_eq!(f.stat("socket").unwrap(), EntryKind::Special);
    assert!(started.elapsed() < Duration::from_secs(5));
});

both_modes!(kinds_and_missing, |f| {
    assert_eq!(code(f.read("docs")), ErrorCode::NotAFile);
    assert_eq!(code(f.list("README.md")), ErrorCode::NotADirectory);
    assert_eq!(code(f.read("missing.txt")), ErrorCode::PathNotFound);
    assert_eq!(code(f.read("README.md/child")), ErrorCode::PathNotFound);
    assert_eq!(code(f.list("nope")), ErrorCode::PathNotFound);
    assert_eq!(code(f.sandbox.locate("A", "")), ErrorCode::WorkdirNotFound);
    assert_eq!(code(f.sandbox.locate("nope", "")), ErrorCode::WorkdirNotFound);
});

both_modes!(errors_never_name_host_paths, |f| {
    let host = f._dir.path().to_string_lossy().into_owned();
    for p in
        ["missing.txt", "link-etc/passwd", "../x", "fifo", "docs", ".env", ".hidden", "README.md/x"]
    {
        let e = f.read(p).unwrap_err();
        assert!(!e.to_string().contains(&host) && !e.to_string().contains("/workdirs"), "{e}");
        assert!(e.to_string().starts_with(e.code().as_str()));
    }
});

/// One thread swaps a directory with a symlink to /etc as fast as it can
/// while reads, stats and listings run through it: nothing may ever come
/// from /etc.
fn race(mode: ResolveMode) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir_all(root.join("real")).unwrap();
    std::fs::write(root.join("real/passwd"), "safe\n").unwrap();
    std::fs::write(root.join("real/hostname"), "safe\n").unwrap();
    std::fs::create_dir(root.join("swap")).unwrap();
    std::fs::write(root.join("swap/passwd"), "safe\n").unwrap();
    std::fs::write(root.join("swap/hostname"), "safe\n").unwrap();
    symlink("/etc", root.join("evil")).unwrap();
    let specs = vec![WorkdirSpec {
        alias: "w".into(),
        description: None,
        host_path: root.clone(),
        origin: "w".into(),
    }];
    let sandbox = Sandbox::open(specs, Policy::new(false, &[]).unwrap()).unwrap().with_mode(mode);

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let root = root.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // RENAME_EXCHANGE swaps the directory and the symlink atomically
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    root.join("swap"),
                    rustix::fs::CWD,
                    root.join("evil"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let mut ok_reads = 0;
    for _ in 0..20_000 {
        for name in ["swap/passwd", "evil/passwd", "swap/hostname"] {
            let Ok(loc) = sandbox.locate("w", name) else { continue };
            if let Ok((file, _)) = sandbox.open_file(&loc) {
                let content = read_page(&file, &loc, FIRST_LINE, 10, 4096, &Deadline::never())
                    .map(|p| p.content)
                    .unwrap_or_default();
                assert!(content.is_empty() || content == "safe\n", "escaped: {content:?}");
                ok_reads += 1;
            }
        }
        for d in ["swap", "evil"] {
            if let Ok(loc) = sandbox.locate("w", d)
                && let Ok(listing) = list_directory(&sandbox, &loc, FIRST_PAGE, &Deadline::never())
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
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 1000, "the swapper ran only {swaps} times");
    assert!(ok_reads > 0, "no read ever succeeded: the test did not exercise the race");
}

#[test]
fn race_directory_swapped_for_symlink_openat2() {
    race(ResolveMode::Openat2);
}

#[test]
fn race_directory_swapped_for_symlink_component_walk() {
    race(ResolveMode::ComponentWalk);
}

/// A regular file and a FIFO swap names (`RENAME_EXCHANGE`) while files
/// are opened by that name. The FIFO has a writer blocked in `open`, which
/// any reader's open would release: the resolver classifies an `O_PATH`
/// handle and re-opens *that* inode, so the writer must stay blocked.
fn fifo_swap_race(mode: ResolveMode) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("target"), "safe\n").unwrap();
    nix_mkfifo(&root.join("fifo"));
    // A second name for the FIFO that never moves, for the writer.
    std::fs::hard_link(root.join("fifo"), root.join("anchor")).unwrap();
    let specs = vec![WorkdirSpec {
        alias: "w".into(),
        description: None,
        host_path: root.clone(),
        origin: "w".into(),
    }];
    let sandbox = Sandbox::open(specs, Policy::new(false, &[]).unwrap()).unwrap().with_mode(mode);
    assert!(sandbox.reopens_in_place(), "this test needs procfs");

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
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let root = root.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    root.join("target"),
                    rustix::fs::CWD,
                    root.join("fifo"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut files, mut fifos) = (0u64, 0u64);
    for _ in 0..20_000 {
        let loc = sandbox.locate("w", "target").unwrap();
        match sandbox.open_file(&loc) {
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
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
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

#[test]
fn race_file_swapped_for_fifo_openat2() {
    fifo_swap_race(ResolveMode::Openat2);
}

#[test]
fn race_file_swapped_for_fifo_component_walk() {
    fifo_swap_race(ResolveMode::ComponentWalk);
}
