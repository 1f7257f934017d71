//! Benchmark driver for scripts/bench-search.sh: runs one find_files or
//! search_text over a directory, calling the library directly (no server,
//! no MCP), and prints the result count — or every result with `--print`,
//! to compare against `rg`/`find` output.
//!
//! ```text
//! bench <dir> search <literal> <limit> [--print]
//! bench <dir> find <glob> <limit> [--print]
//! ```
//! Limits are the server defaults except the walk cap (10 M) and the
//! timeout (10 min), so a full scan of a large tree is not cut short.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serverfs_core::{Policy, Root, RootOptions};
use serverfs_search::{Budget, SearchQuery, find_files, search_text};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode, what, limit) = match args.as_slice() {
        [_, dir, mode, what, limit, ..] => (dir, mode.as_str(), what, limit),
        _ => {
            eprintln!("usage: bench <dir> (search <literal>|find <glob>) <limit> [--print]");
            return ExitCode::from(2);
        }
    };
    let print = args.iter().any(|a| a == "--print");
    let Ok(limit) = limit.parse::<u64>() else {
        eprintln!("bad limit");
        return ExitCode::from(2);
    };
    let options = RootOptions::new("bench", Policy::new(false, &[]).expect("built-in policy"));
    let root = match Root::open(std::path::Path::new(dir), options) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    let start = root.locate("").expect("root");
    let budget =
        Budget::new(10_000_000, Duration::from_secs(600), Arc::new(AtomicBool::new(false)));
    let mut out = std::io::stdout().lock();
    let result = match mode {
        "search" => {
            let q = SearchQuery {
                query: what,
                glob: None,
                case_sensitive: true,
                limit,
                max_file_bytes: 52_428_800, // the server's default
                cursor: None,
            };
            search_text(&root, &start, &q, &budget).map(|o| {
                if print {
                    for m in &o.matches {
                        let _ = writeln!(out, "{}:{}:{}", m.path, m.line, m.text);
                    }
                }
                (o.matches.len(), o.truncated_reason)
            })
        }
        "find" => find_files(&root, &start, what, limit, None, &budget).map(|o| {
            if print {
                for m in &o.matches {
                    let _ = writeln!(out, "{}", m.path);
                }
            }
            (o.matches.len(), o.truncated_reason)
        }),
        _ => {
            eprintln!("mode must be search or find");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok((n, reason)) => {
            eprintln!("matches={n} truncated_reason={}", reason.map_or("null", |r| r.as_str()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
