//! find_files and search_text on real trees in temporary directories: the
//! task book's find and search cases, limits, budget, and the swap race.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serverfs_core::{
    EntryKind, ErrorCode, FsError, Policy, ResolveMode, Root, RootOptions, SymlinkRule,
};
use serverfs_search::{
    Budget, FindOutcome, SearchOutcome, SearchQuery, Skipped, TruncatedReason, find_files,
    search_text,
};
use tempfile::TempDir;

struct Fx {
    dir: TempDir,
    opened: Root,
}

/// The one way these tests open a root: named `w`, built-in policy.
fn open_root(dir: &Path, mode: Option<ResolveMode>, rule: SymlinkRule) -> Root {
    let mut options = RootOptions::new("w", Policy::new(false, &[]).unwrap()).symlinks(rule);
    if let Some(mode) = mode {
        options = options.resolve_mode(mode);
    }
    Root::open(dir, options).unwrap()
}

fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn fixture(build: impl FnOnce(&Path)) -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    build(&root);
    let opened = open_root(&root, None, SymlinkRule::Never);
    Fx { dir, opened }
}

impl Fx {
    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }

    fn find_with(
        &self,
        path: &str,
        pattern: &str,
        limit: u64,
        budget: &Budget,
    ) -> Result<FindOutcome, FsError> {
        let start = self.opened.locate(path)?;
        find_files(&self.opened, &start, pattern, limit, None, budget)
    }

    fn find(&self, path: &str, pattern: &str, limit: u64) -> FindOutcome {
        self.find_with(path, pattern, limit, &budget()).unwrap()
    }

    fn search_with(
        &self,
        path: &str,
        q: &SearchQuery<'_>,
        budget: &Budget,
    ) -> Result<SearchOutcome, FsError> {
        let start = self.opened.locate(path)?;
        search_text(&self.opened, &start, q, budget)
    }

    fn search(&self, query: &str) -> SearchOutcome {
        self.search_with("", &q(query), &budget()).unwrap()
    }
}

fn budget() -> Budget {
    Budget::new(1_000_000, Duration::from_secs(60), Arc::new(AtomicBool::new(false)))
}

fn q(query: &str) -> SearchQuery<'_> {
    SearchQuery {
        query,
        glob: None,
        case_sensitive: true,
        limit: 100,
        max_file_bytes: 50 * 1024 * 1024,
        cursor: None,
    }
}

fn paths(out: &FindOutcome) -> Vec<&str> {
    out.matches.iter().map(|m| m.path.as_str()).collect()
}

fn hits(out: &SearchOutcome) -> Vec<(&str, u64)> {
    out.matches.iter().map(|m| (m.path.as_str(), m.line)).collect()
}

// ---------------------------------------------------------------- find

#[test]
fn find_py_files() {
    let fx = fixture(|r| {
        for f in ["a.py", "b.txt", "src/c.py", "src/d.pyc", "src/deep/e.py", "x.py.txt"] {
            write(r, f, "");
        }
    });
    let out = fx.find("", "*.py", 50);
    assert_eq!(paths(&out), ["a.py", "src/c.py", "src/deep/e.py"]);
    assert!(out.matches.iter().all(|m| m.kind == EntryKind::File));
    assert_eq!(out.truncated_reason, None);
}

#[test]
fn find_compose_files() {
    let fx = fixture(|r| {
        for f in [
            "docker-compose.yml",
            "compose.yaml",
            "deploy/compose.prod.yml",
            "x/docker-compose.override.yml",
            "composer.json",
        ] {
            write(r, f, "");
        }
    });
    let out = fx.find("", "*compose*.yml", 50);
    assert_eq!(
        paths(&out),
        ["deploy/compose.prod.yml", "docker-compose.yml", "x/docker-compose.override.yml"]
    );
}

#[test]
fn find_nested_paths_are_relative_to_the_workdir() {
    let fx = fixture(|r| {
        for f in ["src/lib.rs", "src/a/mod.rs", "src/a/b/deep.rs", "tests/t.rs", "lib.rs"] {
            write(r, f, "");
        }
    });
    assert_eq!(
        paths(&fx.find("src", "*.rs", 50)),
        ["src/a/b/deep.rs", "src/a/mod.rs", "src/lib.rs"]
    );
    assert_eq!(paths(&fx.find("src/a", "*.rs", 50)), ["src/a/b/deep.rs", "src/a/mod.rs"]);
    // A pattern with '/' is matched against the path relative to `path`.
    assert_eq!(paths(&fx.find("src", "a/*.rs", 50)), ["src/a/mod.rs"]);
    assert_eq!(paths(&fx.find("src", "a/**/*.rs", 50)), ["src/a/b/deep.rs", "src/a/mod.rs"]);
    assert_eq!(paths(&fx.find("", "**/b/*.rs", 50)), ["src/a/b/deep.rs"]);
    // `.` and `..` in the start are normalised first.
    assert_eq!(paths(&fx.find("tests/../src/./a", "mod.rs", 50)), ["src/a/mod.rs"]);
}

#[test]
fn find_walks_depth_first_in_byte_order() {
    let fx = fixture(|r| {
        for f in ["b", "a.txt", "B", "a/z", "a/y/x", "_"] {
            write(r, f, "");
        }
    });
    assert_eq!(paths(&fx.find("", "*", 50)), ["B", "_", "a", "a/y", "a/y/x", "a/z", "a.txt", "b"]);
}

#[test]
fn find_reports_kinds_and_never_descends_symlinks() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "match.py", "print('outside')");
    let fx = fixture(|r| {
        write(r, "real/inner.py", "");
        fs::create_dir(r.join("pydir.py")).unwrap();
        symlink(outside.path(), r.join("link")).unwrap();
        symlink("real", r.join("inside_link.py")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, r.join("pipe.py"), rustix::fs::Mode::RUSR).unwrap();
    });
    let out = fx.find("", "*.py", 50);
    let got: Vec<(&str, EntryKind)> =
        out.matches.iter().map(|m| (m.path.as_str(), m.kind)).collect();
    assert_eq!(
        got,
        [
            ("inside_link.py", EntryKind::Symlink),
            ("pipe.py", EntryKind::Special),
            ("pydir.py", EntryKind::Directory),
            ("real/inner.py", EntryKind::File),
        ]
    );
    assert_eq!(paths(&fx.find("", "link", 50)), ["link"]);
    assert!(fx.find("", "match.py", 50).matches.is_empty());
}

#[test]
fn find_skips_hidden_and_denied() {
    let fx = fixture(|r| {
        for f in [
            ".git/config.py",
            ".hidden.py",
            "a/.cache/x.py",
            "ok.py",
            "certs/server.pem",
            "id_rsa",
            "conf/.env",
            "prod.env",
        ] {
            write(r, f, "");
        }
    });
    assert_eq!(paths(&fx.find("", "*.py", 50)), ["ok.py"]);
    assert!(fx.find("", "*.pem", 50).matches.is_empty());
    assert!(fx.find("", "id_rsa", 50).matches.is_empty());
    assert!(fx.find("", "*env*", 50).matches.is_empty());
    assert_eq!(paths(&fx.find("", "*", 50)), ["a", "certs", "conf", "ok.py"]);
}

#[test]
fn find_leaves_out_non_utf8_names() {
    let fx = fixture(|r| {
        write(r, "good.txt", "");
        fs::write(r.join(OsStr::from_bytes(b"bad\xff.txt")), "").unwrap();
        fs::create_dir(r.join(OsStr::from_bytes(b"dir\xfe"))).unwrap();
        fs::write(r.join(OsStr::from_bytes(b"dir\xfe")).join("in.txt"), "").unwrap();
    });
    assert_eq!(paths(&fx.find("", "*.txt", 50)), ["good.txt"]);
}

#[test]
fn find_stops_at_limit_plus_one() {
    let fx = fixture(|r| {
        for i in 0..10 {
            write(r, &format!("d/f{i}.log"), "");
        }
    });
    let out = fx.find("", "*.log", 3);
    assert_eq!(paths(&out), ["d/f0.log", "d/f1.log", "d/f2.log"]);
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchLimitReached));
    // Exactly `limit` in the whole tree: not truncated.
    let exact = fx.find("", "*.log", 10);
    assert_eq!(exact.matches.len(), 10);
    assert_eq!(exact.truncated_reason, None);
    assert_eq!(fx.find("", "*.log", 11).truncated_reason, None);
}

#[test]
fn find_early_stop_does_not_walk_the_rest() {
    // The limit is reached inside the first directory; walking the rest
    // would hit the walk limit instead.
    let fx = fixture(|r| {
        for i in 0..5 {
            write(r, &format!("a/hit{i}.md"), "");
        }
        for i in 0..500 {
            write(r, &format!("z/other{i}.md"), "");
        }
    });
    let small = Budget::new(50, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let out = fx.find_with("", "hit*", 2, &small).unwrap();
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchLimitReached));
    assert_eq!(paths(&out), ["a/hit0.md", "a/hit1.md"]);
}

#[test]
fn find_walk_limit() {
    let fx = fixture(|r| {
        for i in 0..20 {
            write(r, &format!("f{i:02}"), "");
        }
    });
    let five = Budget::new(5, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let out = fx.find_with("", "*", 100, &five).unwrap();
    assert_eq!(out.truncated_reason, Some(TruncatedReason::WalkLimitReached));
    assert_eq!(paths(&out), ["f00", "f01", "f02", "f03", "f04"]);
    // A tree of exactly max entries is walked whole.
    let twenty = Budget::new(20, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let out = fx.find_with("", "*", 100, &twenty).unwrap();
    assert_eq!((out.matches.len(), out.truncated_reason), (20, None));
}

#[test]
fn find_argument_and_start_errors() {
    let fx = fixture(|r| {
        write(r, "file.txt", "");
        fs::create_dir(r.join("dir")).unwrap();
        symlink("dir", r.join("link")).unwrap();
    });
    let code = |path: &str, pattern: &str, limit: u64| {
        fx.find_with(path, pattern, limit, &budget()).unwrap_err().code()
    };
    assert_eq!(code("file.txt", "*", 5), ErrorCode::NotADirectory);
    assert_eq!(code("link", "*", 5), ErrorCode::SymlinkNotAllowed);
    assert_eq!(code("missing", "*", 5), ErrorCode::PathNotFound);
    assert_eq!(code("", "[", 5), ErrorCode::InvalidArgument);
    assert_eq!(code("", "a{b", 5), ErrorCode::InvalidArgument);
    assert_eq!(code("", "", 5), ErrorCode::InvalidArgument);
    assert_eq!(code("", "*", 0), ErrorCode::InvalidArgument);
    assert_eq!(code(".git", "*", 5), ErrorCode::HiddenPathNotAllowed);
    assert_eq!(code("../x", "*", 5), ErrorCode::PathOutsideWorkdir);
    // Messages never carry the host path.
    let err = fx.find_with("file.txt", "*", 5, &budget()).unwrap_err();
    assert!(!err.to_string().contains(fx.dir.path().to_str().unwrap()), "{err}");
}

// -------------------------------------------------------------- search

#[test]
fn search_finds_lines_in_walk_then_line_order() {
    let fx = fixture(|r| {
        write(r, "b.txt", "one needle\ntwo\nneedle needle three\n");
        write(r, "a/x.txt", "needle\r\n");
        write(r, "c.txt", "nothing");
    });
    let out = fx.search("needle");
    assert_eq!(hits(&out), [("a/x.txt", 1), ("b.txt", 1), ("b.txt", 3)]);
    assert_eq!(out.matches[0].text, "needle");
    assert_eq!(out.matches[2].text, "needle needle three");
    assert_eq!(out.truncated_reason, None);
}

#[test]
fn search_query_is_literal() {
    let fx = fixture(|r| {
        write(r, "re.txt", "abbbc(\na.b*c(\naxbc(\n");
    });
    let out = fx.search("a.b*c(");
    assert_eq!(hits(&out), [("re.txt", 2)]);
    assert_eq!(out.matches[0].text, "a.b*c(");
    assert_eq!(hits(&fx.search("[a-z]+")), []);
}

#[test]
fn search_case_sensitivity_is_unicode_aware() {
    let fx = fixture(|r| {
        write(r, "u.txt", "äbc\nÄBC\nabc\nSTRASSE\n");
    });
    let exact = fx.search("ÄBC");
    assert_eq!(hits(&exact), [("u.txt", 2)]);
    let mut args = q("ÄBC");
    args.case_sensitive = false;
    let folded = fx.search_with("", &args, &budget()).unwrap();
    assert_eq!(hits(&folded), [("u.txt", 1), ("u.txt", 2)]);
    assert_eq!(folded.matches[0].text, "äbc");
    // Folding is per character: `a` never matches `ä`.
    let mut args = q("Abc");
    args.case_sensitive = false;
    assert_eq!(hits(&fx.search_with("", &args, &budget()).unwrap()), [("u.txt", 3)]);
}

#[test]
fn search_chinese_content() {
    let fx = fixture(|r| {
        write(r, "zh.md", "第一行\n你好，世界！这是测试。\n");
    });
    let out = fx.search("世界");
    assert_eq!(hits(&out), [("zh.md", 2)]);
    assert_eq!(out.matches[0].text, "你好，世界！这是测试。");
}

#[test]
fn search_glob_filters_file_names() {
    let fx = fixture(|r| {
        write(r, "a.py", "TODO py");
        write(r, "b.rs", "TODO rs");
        write(r, "sub/c.py", "TODO nested py");
        write(r, "sub/deeper/d.py", "TODO deeper");
    });
    let mut args = q("TODO");
    args.glob = Some("*.py");
    assert_eq!(
        hits(&fx.search_with("", &args, &budget()).unwrap()),
        [("a.py", 1), ("sub/c.py", 1), ("sub/deeper/d.py", 1)]
    );
    args.glob = Some("sub/*.py");
    assert_eq!(hits(&fx.search_with("", &args, &budget()).unwrap()), [("sub/c.py", 1)]);
    args.glob = Some("*.py");
    assert_eq!(
        hits(&fx.search_with("sub", &args, &budget()).unwrap()),
        [("sub/c.py", 1), ("sub/deeper/d.py", 1)]
    );
    args.glob = Some("[");
    assert_eq!(
        fx.search_with("", &args, &budget()).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn search_never_reads_hidden_denied_symlinked_or_special_files() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "SECRET outside");
    let fx = fixture(|r| {
        write(r, "visible.txt", "SECRET visible");
        write(r, ".git/config", "SECRET hidden dir");
        write(r, ".hidden.txt", "SECRET hidden file");
        write(r, ".env", "SECRET=env");
        write(r, "conf/prod.env", "SECRET=prod");
        write(r, "certs/server.pem", "SECRET pem");
        write(r, "home/.ssh/config", "SECRET ssh");
        write(r, "id_rsa", "SECRET key");
        symlink(outside.path(), r.join("linkdir")).unwrap();
        symlink(outside.path().join("secret.txt"), r.join("linkfile.txt")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, r.join("pipe.txt"), rustix::fs::Mode::RUSR).unwrap();
    });
    let t = Instant::now();
    let out = fx.search("SECRET");
    assert_eq!(hits(&out), [("visible.txt", 1)]);
    // The FIFO was not opened for reading (that would block forever; the
    // bound is only a safety net for a busy machine).
    assert!(t.elapsed() < Duration::from_secs(60));
}

#[test]
fn search_skips_binary_files() {
    let fx = fixture(|r| {
        write(r, "bin.dat", b"needle\n\0\x01\x02needle\n");
        let mut late = b"needle\n".repeat(5000);
        late.extend(b"\0tail");
        write(r, "late.bin", late);
        write(r, "utf16.txt", b"\xFF\xFEn\0e\0e\0d\0l\0e\0");
        write(r, "text.txt", "needle\n");
    });
    assert_eq!(hits(&fx.search("needle")), [("text.txt", 1)]);
    // Also when the limit is reached inside the binary file, before its NUL.
    let mut args = q("needle");
    args.limit = 2;
    let out = fx.search_with("", &args, &budget()).unwrap();
    assert_eq!(hits(&out), [("text.txt", 1)]);
    assert_eq!(out.truncated_reason, None);
    assert_eq!(out.skipped, Skipped { binary: 3, ..Skipped::default() });
    // Named alone, a binary file is an error, not "no match".
    let err = fx.search_with("bin.dat", &q("needle"), &budget()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BinaryFile);
}

#[test]
fn search_limit_exact_and_plus_one() {
    let fx = fixture(|r| {
        write(r, "a.txt", "hit\nhit\n");
        write(r, "b.txt", "hit\n");
    });
    let with_limit = |limit| {
        let mut args = q("hit");
        args.limit = limit;
        fx.search_with("", &args, &budget()).unwrap()
    };
    let exact = with_limit(3);
    assert_eq!(hits(&exact), [("a.txt", 1), ("a.txt", 2), ("b.txt", 1)]);
    assert_eq!(exact.truncated_reason, None);
    let under = with_limit(2);
    assert_eq!(hits(&under), [("a.txt", 1), ("a.txt", 2)]);
    assert_eq!(under.truncated_reason, Some(TruncatedReason::SearchLimitReached));
    let one = with_limit(1);
    assert_eq!(
        (one.matches.len(), one.truncated_reason),
        (1, Some(TruncatedReason::SearchLimitReached))
    );
}

#[test]
fn search_early_stop_does_not_walk_the_rest() {
    let fx = fixture(|r| {
        write(r, "a/first.txt", "hit\n".repeat(100));
        for i in 0..300 {
            write(r, &format!("z/f{i}.txt"), "hit\n");
        }
    });
    let small = Budget::new(10, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let mut args = q("hit");
    args.limit = 50;
    let out = fx.search_with("", &args, &small).unwrap();
    assert_eq!(out.matches.len(), 50);
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchLimitReached));
}

#[test]
fn search_walk_limit() {
    let fx = fixture(|r| {
        for i in 0..30 {
            write(r, &format!("f{i:02}.txt"), if i == 29 { "hit" } else { "miss" });
        }
    });
    let small = Budget::new(10, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let out = fx.search_with("", &q("hit"), &small).unwrap();
    assert_eq!(
        (out.matches.len(), out.truncated_reason),
        (0, Some(TruncatedReason::WalkLimitReached))
    );
}

#[test]
fn search_max_file_size() {
    let fx = fixture(|r| {
        write(r, "big.txt", format!("{}\nneedle\n", "x".repeat(2000)));
        write(r, "edge.txt", format!("{}needle\n", "y".repeat(1017))); // exactly 1024 bytes
        write(r, "small.txt", "needle\n");
    });
    let mut args = q("needle");
    args.max_file_bytes = 1024;
    let out = fx.search_with("", &args, &budget()).unwrap();
    assert_eq!(hits(&out), [("edge.txt", 1), ("small.txt", 1)]);
    assert_eq!(out.skipped, Skipped { too_large: 1, ..Skipped::default() });
    // Named alone, a file over the cap is an error, not "no match".
    let err = fx.search_with("big.txt", &args, &budget()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ReadLimitExceeded);
    assert!(err.message().contains("w:/big.txt"), "{}", err.message());
}

/// The walk follows the root handle opened at start-up, not the host path:
/// a workdir path that is a symlink retargeted afterwards changes nothing.
#[test]
fn walks_follow_the_opened_root_not_the_host_path() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "real/a/needle.txt",
        "needle
",
    );
    write(
        dir.path(),
        "decoy/a/other.txt",
        "needle
",
    );
    let link = dir.path().join("workdir");
    symlink(dir.path().join("real"), &link).unwrap();
    let opened = open_root(&link, None, SymlinkRule::Never);
    fs::remove_file(&link).unwrap();
    symlink(dir.path().join("decoy"), &link).unwrap();
    let start = opened.locate("").unwrap();
    let found = find_files(&opened, &start, "*.txt", 10, None, &budget()).unwrap();
    assert_eq!(paths(&found), ["a/needle.txt"]);
    let searched = search_text(&opened, &start, &q("needle"), &budget()).unwrap();
    assert_eq!(hits(&searched), [("a/needle.txt", 1)]);
    assert_eq!(searched.skipped, Skipped::default());
    // Even with the link gone entirely.
    fs::remove_file(&link).unwrap();
    let found = find_files(&opened, &start, "*.txt", 10, None, &budget()).unwrap();
    assert_eq!(paths(&found), ["a/needle.txt"]);
}

#[test]
fn search_long_single_line_gives_short_text() {
    let fx = fixture(|r| {
        let mut line = "a".repeat(1024 * 1024);
        line.push_str("NEEDLE");
        line.push_str(&"b".repeat(1024 * 1024));
        write(r, "min.js", line);
    });
    let out = fx.search("NEEDLE");
    assert_eq!(hits(&out), [("min.js", 1)]);
    let text = &out.matches[0].text;
    assert!(text.len() <= 500, "{}", text.len());
    assert!(text.contains("NEEDLE"));
}

#[test]
fn search_is_deterministic() {
    let fx = fixture(|r| {
        for i in (0..40).rev() {
            write(r, &format!("d{}/f{i}.txt", i % 7), format!("x\nkey {i}\nkey again\n"));
        }
    });
    let first = fx.search("key");
    let second = fx.search("key");
    assert_eq!(first, second);
    assert_eq!(first.matches.len(), 80);
    let find1 = fx.find("", "*.txt", 100);
    assert_eq!(find1, fx.find("", "*.txt", 100));
}

#[test]
fn injection_strings_are_plain_data() {
    let fx = fixture(|r| {
        write(r, "notes.txt", "run $(touch /tmp/x) here\nthen ; rm -rf / oops\nand `id` too\n");
    });
    let canary = fx.dir.path().join("pwned");
    let canary_s = canary.to_str().unwrap().to_owned();
    let attacks = [
        format!("$(touch {canary_s})"),
        format!("; touch {canary_s}"),
        format!("`touch {canary_s}`"),
        "$(touch /tmp/x)".to_owned(),
        "; rm -rf /".to_owned(),
        "`id`".to_owned(),
    ];
    for attack in &attacks {
        let _ = fx.search_with("", &q(attack), &budget()).unwrap();
        let mut args = q("run");
        args.glob = Some(attack);
        let _ = fx.search_with("", &args, &budget());
        let _ = fx.find_with("", attack, 10, &budget());
    }
    assert!(!canary.exists());
    assert!(fx.root().join("notes.txt").exists());
    // And they are found literally where they occur.
    assert_eq!(hits(&fx.search("$(touch /tmp/x)")), [("notes.txt", 1)]);
    assert_eq!(hits(&fx.search("; rm -rf /")), [("notes.txt", 2)]);
    assert_eq!(hits(&fx.search("`id`")), [("notes.txt", 3)]);
}

#[test]
fn search_argument_and_start_errors() {
    let fx = fixture(|r| {
        write(r, "f.txt", "hello\n");
        fs::create_dir(r.join("dir")).unwrap();
        symlink("f.txt", r.join("link")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, r.join("pipe"), rustix::fs::Mode::RUSR).unwrap();
    });
    let code = |path: &str, args: SearchQuery<'_>| {
        fx.search_with(path, &args, &budget()).unwrap_err().code()
    };
    assert_eq!(code("", q("")), ErrorCode::InvalidArgument);
    assert_eq!(code("", q(&"x".repeat(1001))), ErrorCode::InvalidArgument);
    assert_eq!(code("", q("a\nb")), ErrorCode::InvalidArgument);
    assert_eq!(code("", SearchQuery { limit: 0, ..q("x") }), ErrorCode::InvalidArgument);
    assert_eq!(code("link", q("hello")), ErrorCode::SymlinkNotAllowed);
    assert_eq!(code("pipe", q("hello")), ErrorCode::UnsupportedFileType);
    assert_eq!(code("nope", q("hello")), ErrorCode::PathNotFound);
    assert_eq!(code(".env", q("hello")), ErrorCode::DeniedPath);
    assert!(fx.search_with("", &q(&"é".repeat(1000)), &budget()).is_ok());
    // A file as start searches that file.
    assert_eq!(hits(&fx.search_with("f.txt", &q("hello"), &budget()).unwrap()), [("f.txt", 1)]);
}

/// Many hard links to one 8 MiB text file: gigabytes to search, a few MiB
/// on disk.
fn huge_fixture() -> Fx {
    fixture(|r| {
        let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
        write(r, "base.txt", line.repeat(8 * 1024 * 1024 / line.len()));
        for i in 0..400 {
            fs::hard_link(r.join("base.txt"), r.join(format!("link{i:03}.txt"))).unwrap();
        }
    })
}

#[test]
fn search_timeout_returns_what_it_has() {
    let fx = huge_fixture();
    let short =
        Budget::new(1_000_000, Duration::from_millis(150), Arc::new(AtomicBool::new(false)));
    // The outcome is the event: a scan of gigabytes that ends with the
    // timeout's reason was stopped by it, however busy the machine.
    let out = fx.search_with("", &q("absent-needle"), &short).unwrap();
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchTimeout));
    let find = fx
        .find_with(
            "",
            "*.txt",
            100,
            &Budget::new(1_000_000, Duration::ZERO, Arc::new(AtomicBool::new(false))),
        )
        .unwrap();
    assert_eq!(find.truncated_reason, Some(TruncatedReason::SearchTimeout));
}

#[test]
fn search_timeout_inside_one_long_file() {
    let fx = fixture(|r| {
        let line = "x".repeat(1023) + "\n";
        write(r, "long.txt", line.repeat(48 * 1024)); // 48 MiB
    });
    // Scanning 48 MiB takes far longer than 1 ms, so the deadline passes
    // inside the file, which is the only entry.
    let short = Budget::new(1_000_000, Duration::from_millis(1), Arc::new(AtomicBool::new(false)));
    let out = fx
        .search_with("long.txt", &SearchQuery { max_file_bytes: 1 << 30, ..q("absent") }, &short)
        .unwrap();
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchTimeout));
}

#[test]
fn cancellation_mid_search_returns_promptly() {
    let fx = huge_fixture();
    let flag = Arc::new(AtomicBool::new(false));
    let budget = Budget::new(1_000_000, Duration::from_secs(600), flag.clone());
    // Cancelled while the search runs (it scans gigabytes: it is still
    // running whenever the flag is set); the search returns with the
    // cancellation's reason. No wall-clock window: the bound below is only
    // a safety net, far below what the whole scan would take.
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
            Instant::now()
        })
    };
    let out = fx.search_with("", &q("absent-needle"), &budget).unwrap();
    let returned = Instant::now();
    let cancelled_at = setter.join().unwrap();
    assert!(budget.is_cancelled());
    assert_eq!(out.truncated_reason, Some(TruncatedReason::SearchTimeout));
    assert!(returned >= cancelled_at, "the search ended before it was cancelled");
    assert!(
        returned.duration_since(cancelled_at) < Duration::from_secs(60),
        "{:?}",
        returned.duration_since(cancelled_at)
    );
}

// ---------------------------------------------------------------- race

/// Another thread atomically swaps directory `a` with a symlink to /etc
/// (RENAME_EXCHANGE) while find and search run: no result may name or
/// quote anything from /etc.
fn swap_race(mode: ResolveMode, rule: SymlinkRule) {
    let fx = fixture(|r| {
        write(r, "a/inside.txt", "needle inside\n");
        write(r, "a/sub/deep.txt", "needle deep\n");
        write(r, "top.txt", "needle top\n");
        symlink("/etc", r.join(".swap")).unwrap();
    });
    let opened = open_root(&fx.root(), Some(mode), rule);
    let allowed = ["a", "a/inside.txt", "a/sub", "a/sub/deep.txt", "top.txt"];
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let (stop, root, swaps) = (stop.clone(), fx.root(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    root.join("a"),
                    rustix::fs::CWD,
                    root.join(".swap"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let start = opened.locate("").unwrap();
    // Counted runs, not a time window: on a busy machine the race just
    // takes longer (the deadline is a safety net).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut runs = 0;
    while runs < 50 || swaps.load(Ordering::Relaxed) < 1000 {
        assert!(Instant::now() < deadline, "only {runs} runs, {swaps:?} swaps");
        let found = find_files(&opened, &start, "*", 100, None, &budget()).unwrap();
        for m in &found.matches {
            assert!(allowed.contains(&m.path.as_str()), "find leaked {:?}", m.path);
        }
        for query in ["needle", "root"] {
            let args = SearchQuery { limit: 100, ..q(query) };
            let out = search_text(&opened, &start, &args, &budget()).unwrap();
            for m in &out.matches {
                assert!(allowed.contains(&m.path.as_str()), "search leaked {:?}", m.path);
                assert!(m.text.starts_with("needle "), "search leaked text {:?}", m.text);
            }
        }
        runs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
}

#[test]
fn swap_race_openat2() {
    swap_race(ResolveMode::Openat2, SymlinkRule::Never);
}

#[test]
fn swap_race_component_walk() {
    swap_race(ResolveMode::ComponentWalk, SymlinkRule::Never);
}

#[test]
fn swap_race_openat2_following_links() {
    swap_race(ResolveMode::Openat2, SymlinkRule::FollowWithinRoot);
}

#[test]
fn swap_race_component_walk_following_links() {
    swap_race(ResolveMode::ComponentWalk, SymlinkRule::FollowWithinRoot);
}

/// Under `FollowWithinRoot` a search may start through a link to a
/// directory inside; links met by the walk are reported by find as links
/// and never searched, and a link to a denied file is refused by name.
#[test]
fn following_links_from_the_start_only() {
    let fx = fixture(|r| {
        write(r, "src/main.rs", "needle\n");
        write(r, ".env", "needle secret\n");
        symlink("src", r.join("code")).unwrap();
        symlink(".env", r.join("notes.txt")).unwrap();
        symlink("../.env", r.join("src/env.rs")).unwrap();
    });
    let root = open_root(&fx.root(), None, SymlinkRule::FollowWithinRoot);
    let start = root.locate("code").unwrap();
    let found = find_files(&root, &start, "*", 10, None, &budget()).unwrap();
    let kinds: Vec<_> = found.matches.iter().map(|m| (m.path.as_str(), m.kind)).collect();
    assert_eq!(kinds, [("code/env.rs", EntryKind::Symlink), ("code/main.rs", EntryKind::File)]);
    let out = search_text(&root, &start, &q("needle"), &budget()).unwrap();
    assert_eq!(hits(&out), [("code/main.rs", 1)]);
    let all = search_text(&root, &root.locate("").unwrap(), &q("needle"), &budget()).unwrap();
    assert_eq!(hits(&all), [("src/main.rs", 1)]);
    let notes = root.locate("notes.txt").unwrap();
    let err = search_text(&root, &notes, &q("needle"), &budget()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeniedPath);
}

// ---------------------------------------------------------------- cursors

/// Directory and file names whose walk order differs from the byte order
/// of whole paths (`a/…` is walked before `a-b` and `a.b`, although `-`
/// and `.` sort below `/`), plus upper case and non-ASCII.
const PAGE_DIRS: [&str; 6] = ["a", "a b", "a-b", "a.b", "ab", "B"];
const PAGE_FILES: [&str; 8] = ["a.txt", "a-b.rs", "a.bc", "a0", "abc.txt", "A.rs", "é.txt", "z0"];

/// About 2 300 entries, 3 directory levels deep, every file with a few
/// lines holding `needle`, `Needle` or neither; the `z0` files are binary
/// (a NUL after their matches), so their matches must never show.
fn paging_fixture() -> Fx {
    fn fill(root: &Path, dir: &str, depth: usize, seed: &mut u64) {
        for name in PAGE_FILES {
            let rel = if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") };
            let mut text = String::new();
            for line in 0..(*seed % 7) {
                *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                text += match (*seed >> 33) % 4 {
                    0 => "a needle here\n",
                    1 => "Needle, capitalised\n",
                    2 if line % 2 == 0 => "needle needle twice\n",
                    _ => "hay\n",
                };
            }
            *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            if name == "z0" {
                text += "\0";
            }
            write(root, &rel, text);
        }
        if depth == 0 {
            return;
        }
        for name in PAGE_DIRS {
            let rel = if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") };
            fs::create_dir(root.join(&rel)).unwrap();
            fill(root, &rel, depth - 1, seed);
        }
    }
    fixture(|r| fill(r, "", 3, &mut 7))
}

fn unlimited() -> u64 {
    1 << 40
}

/// find_files page by page with `limit` under `budget()`; the pages
/// concatenated, and how many calls it took.
fn find_pages(
    fx: &Fx,
    path: &str,
    pattern: &str,
    limit: u64,
    budget: &dyn Fn(usize) -> Budget,
) -> (Vec<String>, usize) {
    let start = fx.opened.locate(path).unwrap();
    let (mut all, mut cursor, mut calls) = (Vec::new(), None::<String>, 0);
    loop {
        let out = find_files(&fx.opened, &start, pattern, limit, cursor.as_deref(), &budget(calls))
            .unwrap();
        calls += 1;
        assert!(out.matches.len() as u64 <= limit);
        assert_eq!(out.next_cursor.is_some(), out.truncated_reason.is_some());
        all.extend(out.matches.into_iter().map(|m| m.path));
        match out.next_cursor {
            Some(next) => cursor = Some(next),
            None => return (all, calls),
        }
        assert!(calls < 100_000, "paging does not end");
    }
}

/// search_text the same way.
fn search_pages(
    fx: &Fx,
    path: &str,
    args: &SearchQuery<'_>,
    budget: &dyn Fn(usize) -> Budget,
) -> (Vec<(String, u64)>, usize) {
    let (mut all, mut cursor, mut calls) = (Vec::new(), None::<String>, 0);
    loop {
        let page = SearchQuery { cursor: cursor.as_deref(), ..*args };
        let out = fx.search_with(path, &page, &budget(calls)).unwrap();
        calls += 1;
        assert!(out.matches.len() as u64 <= args.limit);
        assert_eq!(out.next_cursor.is_some(), out.truncated_reason.is_some());
        assert!(out.matches.iter().all(|m| !m.path.ends_with("z0")), "binary files hold no match");
        all.extend(out.matches.into_iter().map(|m| (m.path, m.line)));
        match out.next_cursor {
            Some(next) => cursor = Some(next),
            None => return (all, calls),
        }
        assert!(calls < 100_000, "paging does not end");
    }
}

fn plenty(_: usize) -> Budget {
    budget()
}

#[test]
fn cursor_find_pages_concatenate_to_the_unlimited_answer() {
    let fx = paging_fixture();
    let cases: [(&str, &str, &[u64]); 4] = [
        // Every entry: 2 330 of them, so not one call each.
        ("", "*", &[3, 50]),
        ("", "*.txt", &[1, 3, 7, 50]),
        ("", "a*/**/*.rs", &[1, 3, 7, 50]),
        ("a.b", "{a,ab}", &[1, 3, 7, 50]),
    ];
    for (path, pattern, limits) in cases {
        let full = paths(&fx.find(path, pattern, unlimited()))
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        assert!(full.len() > 10, "{pattern}: {}", full.len());
        for &limit in limits {
            let (pages, calls) = find_pages(&fx, path, pattern, limit, &plenty);
            assert_eq!(pages, full, "{pattern} limit {limit}");
            assert!(calls <= full.len().div_ceil(limit as usize) + 1, "{calls} calls");
        }
    }
    // The tree stresses the order: the walk (component-wise) and the plain
    // byte order of whole paths disagree on it.
    let all: Vec<String> =
        paths(&fx.find("", "*", unlimited())).into_iter().map(str::to_owned).collect();
    let mut walk_sorted = all.clone();
    walk_sorted.sort_by(|a, b| a.split('/').cmp(b.split('/')));
    assert_eq!(all, walk_sorted);
    let mut byte_sorted = all.clone();
    byte_sorted.sort();
    assert_ne!(all, byte_sorted);
    let top: Vec<&str> = all.iter().map(String::as_str).filter(|p| !p.contains('/')).collect();
    assert_eq!(
        top,
        [
            "A.rs", "B", "a", "a b", "a-b", "a-b.rs", "a.b", "a.bc", "a.txt", "a0", "ab",
            "abc.txt", "z0", "é.txt"
        ]
    );
}

#[test]
fn cursor_search_pages_concatenate_to_the_unlimited_answer() {
    let fx = paging_fixture();
    let long: String = (0..60).map(|i| ["needle\n", "x\n", "NEEDLE needle\n"][i % 3]).collect();
    write(&fx.root(), "a/a b/a.txt", long);
    // Whole-tree cases (2 102, 945 and 3 557 matches) with larger pages,
    // every limit on a subtree and on one file.
    let cases: [(&str, SearchQuery<'_>, &[u64]); 5] = [
        ("", q("needle"), &[7, 50]),
        ("", SearchQuery { glob: Some("*.txt"), ..q("needle") }, &[3, 50]),
        ("", SearchQuery { case_sensitive: false, ..q("NEEDLE") }, &[7, 50]),
        (
            "a-b",
            SearchQuery { glob: Some("a*"), case_sensitive: false, ..q("nEEDLE") },
            &[1, 3, 7, 50],
        ),
        // One file: the cursor is a line in it.
        ("a/a b/a.txt", SearchQuery { case_sensitive: false, ..q("needle") }, &[1, 3, 7, 50]),
    ];
    for (path, args, limits) in cases {
        let full = fx.search_with(path, &SearchQuery { limit: unlimited(), ..args }, &budget());
        let full: Vec<(String, u64)> =
            full.unwrap().matches.into_iter().map(|m| (m.path, m.line)).collect();
        assert!(full.len() > 3, "{path} {args:?}: {}", full.len());
        // Several matches in one file, so pages end inside files.
        assert!(full.windows(2).any(|w| w[0].0 == w[1].0));
        for &limit in limits {
            let (pages, calls) = search_pages(&fx, path, &SearchQuery { limit, ..args }, &plenty);
            assert_eq!(pages, full, "{path} {args:?} limit {limit}");
            assert!(calls <= full.len().div_ceil(limit as usize) + 1, "{calls} calls");
        }
    }
}

#[test]
fn cursor_pages_across_the_walk_cap() {
    let fx = paging_fixture();
    // A cap of one entry per call on a subtree three levels deep, larger
    // caps on the whole tree.
    for (path, cap) in [("a-b", 1), ("", 37), ("", 500)] {
        let full_find: Vec<String> =
            paths(&fx.find(path, "*.rs", unlimited())).into_iter().map(str::to_owned).collect();
        let full_search: Vec<(String, u64)> = fx
            .search_with(path, &SearchQuery { limit: unlimited(), ..q("needle") }, &budget())
            .unwrap()
            .matches
            .into_iter()
            .map(|m| (m.path, m.line))
            .collect();
        let entries = fx.find(path, "*", unlimited()).matches.len();
        let capped =
            |_| Budget::new(cap, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
        // One entry per call still gets through: the directories above a
        // cursor are not counted again.
        let (pages, calls) = find_pages(&fx, path, "*.rs", 1000, &capped);
        assert_eq!(pages, full_find, "cap {cap}");
        assert_eq!(calls, entries.div_ceil(cap as usize), "cap {cap}");
        for limit in [7, 1000] {
            let args = SearchQuery { limit, ..q("needle") };
            let (pages, _) = search_pages(&fx, path, &args, &capped);
            assert_eq!(pages, full_search, "cap {cap} limit {limit}");
        }
    }
    // A capped page says so.
    let five = Budget::new(5, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
    let out = fx.find_with("", "*", 1000, &five).unwrap();
    assert_eq!(out.truncated_reason, Some(TruncatedReason::WalkLimitReached));
    assert_eq!(out.matches.len(), 5);
}

#[test]
fn cursor_pages_across_timeouts() {
    let fx = paging_fixture();
    let args = SearchQuery { limit: 20, ..q("needle") };
    let full = fx.search_with("", &SearchQuery { limit: unlimited(), ..args }, &budget());
    let full: Vec<(String, u64)> =
        full.unwrap().matches.into_iter().map(|m| (m.path, m.line)).collect();
    // A cancelled call stops before its first entry: no match, and a
    // cursor that continues exactly where the previous page did.
    let cancelled = |calls: usize| {
        Budget::new(1_000_000, Duration::from_secs(60), Arc::new(AtomicBool::new(calls % 2 == 1)))
    };
    let (pages, calls) = search_pages(&fx, "", &args, &cancelled);
    assert_eq!(pages, full);
    assert!(calls >= 2 * full.len().div_ceil(20) - 1);
    let (found, _) = find_pages(&fx, "", "*.txt", 7, &cancelled);
    assert_eq!(found, paths(&fx.find("", "*.txt", unlimited())));
    // Deadlines that pass anywhere (between entries, inside a file whose
    // matches were held back): still no duplicate and no gap. Every other
    // call has time enough, so paging ends.
    let short = |calls: usize| {
        let timeout = if calls.is_multiple_of(2) {
            Duration::from_micros(50 * (calls % 13) as u64)
        } else {
            Duration::from_secs(60)
        };
        Budget::new(1_000_000, timeout, Arc::new(AtomicBool::new(false)))
    };
    let (pages, _) = search_pages(&fx, "", &args, &short);
    assert_eq!(pages, full);
    let (found, _) = find_pages(&fx, "", "*.txt", 7, &short);
    assert_eq!(found, paths(&fx.find("", "*.txt", unlimited())));

    // A deadline inside one long file: its matches are held back, and the
    // cursor sends the next call back into that same file.
    let fx = fixture(|r| {
        write(r, "a.txt", "needle\n");
        write(r, "b.txt", "x\n".repeat(4_000_000) + "needle\n");
        write(r, "c.txt", "needle\n");
    });
    let quick = Budget::new(1_000_000, Duration::from_millis(1), Arc::new(AtomicBool::new(false)));
    let first = SearchQuery { limit: 1, ..q("needle") };
    let out = fx.search_with("", &first, &budget()).unwrap();
    assert_eq!(hits(&out), [("a.txt", 1)]);
    let again = SearchQuery { cursor: out.next_cursor.as_deref(), ..first };
    let stopped = fx.search_with("", &again, &quick).unwrap();
    assert_eq!(stopped.truncated_reason, Some(TruncatedReason::SearchTimeout));
    assert!(stopped.matches.is_empty());
    let resumed = SearchQuery { cursor: stopped.next_cursor.as_deref(), limit: 10, ..first };
    let out = fx.search_with("", &resumed, &budget()).unwrap();
    assert_eq!(hits(&out), [("b.txt", 4_000_001), ("c.txt", 1)]);
}

#[test]
fn cursor_resume_does_not_reopen_earlier_files() {
    let fx = paging_fixture();
    let args = SearchQuery { limit: 50, ..q("needle") };
    let first = fx.search_with("", &args, &budget()).unwrap();
    let last = first.matches.last().unwrap().path.clone();
    let next = SearchQuery { cursor: first.next_cursor.as_deref(), limit: unlimited(), ..args };
    let rest = fx.search_with("", &next, &budget()).unwrap();
    // Every earlier file turns binary: reading one again would count it.
    for m in &first.matches {
        if m.path != last {
            fs::write(fx.root().join(&m.path), "needle\0").unwrap();
        }
    }
    let again = fx.search_with("", &next, &budget()).unwrap();
    assert_eq!(again, rest);
}

#[test]
fn cursor_follows_the_tree_as_it_is_now() {
    let fx = fixture(|r| {
        for f in ["a/1.txt", "a/2.txt", "a/3.txt", "b/1.txt"] {
            write(r, f, "needle\n");
        }
    });
    let out = fx.find("", "*.txt", 2);
    assert_eq!(paths(&out), ["a/1.txt", "a/2.txt"]);
    // The entry the cursor names is gone: the next page starts after
    // where it was.
    fs::remove_file(fx.root().join("a/2.txt")).unwrap();
    let start = fx.opened.locate("").unwrap();
    let next =
        find_files(&fx.opened, &start, "*.txt", 10, out.next_cursor.as_deref(), &budget()).unwrap();
    assert_eq!(paths(&next), ["a/3.txt", "b/1.txt"]);
    assert_eq!((next.truncated_reason, next.next_cursor), (None, None));
}

#[test]
fn cursor_errors_are_invalid_arguments() {
    let fx = paging_fixture();
    let start = fx.opened.locate("").unwrap();
    let find_cursor = fx.find("", "*.txt", 3).next_cursor.unwrap();
    let search_cursor = fx
        .search_with("", &SearchQuery { limit: 3, ..q("needle") }, &budget())
        .unwrap()
        .next_cursor
        .unwrap();
    let find = |path: &str, pattern: &str, cursor: &str| {
        let start = fx.opened.locate(path).unwrap();
        find_files(&fx.opened, &start, pattern, 3, Some(cursor), &budget()).unwrap_err()
    };
    let search =
        |path: &str, args: SearchQuery<'_>| fx.search_with(path, &args, &budget()).unwrap_err();
    let errors = [
        find("", "*.txt", "garbage"),
        find("", "*.txt", ""),
        find("", "*.rs", &find_cursor),
        find("a", "*.txt", &find_cursor),
        find("", "*.txt", &search_cursor),
        search("", SearchQuery { cursor: Some(&find_cursor), ..q("needle") }),
        search("", SearchQuery { cursor: Some(&search_cursor), ..q("Needle") }),
        search("", SearchQuery { cursor: Some(&search_cursor), glob: Some("*"), ..q("needle") }),
        search(
            "",
            SearchQuery { cursor: Some(&search_cursor), case_sensitive: false, ..q("needle") },
        ),
        search("a", SearchQuery { cursor: Some(&search_cursor), ..q("needle") }),
    ];
    for err in errors {
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with("cursor: "), "{}", err.message());
    }
    // The same cursor with the same arguments (and any limit) is fine.
    let ok = find_files(&fx.opened, &start, "*.txt", 9, Some(&find_cursor), &budget()).unwrap();
    assert_eq!(ok.matches.len(), 9);
}
