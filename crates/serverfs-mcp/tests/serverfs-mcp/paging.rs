//! End to end: find_files and search_text paged with `next_cursor` over
//! the real binary — pages concatenate to the unlimited answer (also when
//! the walk cap cuts them), and a bad or foreign cursor is
//! `INVALID_ARGUMENT`.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// About 400 entries, names that stress the walk order (`a/…` is walked
/// before `a-b` and `a.b`), two matching lines in most files.
fn tree(fx: &Fixture) {
    let root = fx.root().join("tree");
    for d1 in ["a", "a-b", "a.b", "ab", "B"] {
        for d2 in ["a", "a b", "a.b"] {
            for f in ["a.txt", "a-b.rs", "a.bc", "é.txt", "Z.rs", "z0"] {
                let p = root.join(d1).join(d2).join(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                let text = if f == "z0" {
                    "needle\n\0".to_owned()
                } else {
                    format!("needle\n{f}\nNEEDLE {d1}\n")
                };
                std::fs::write(p, text).unwrap();
            }
        }
    }
}

/// Calls `tool` with `args` page by page; the concatenated `matches`, the
/// number of calls and the truncation reasons seen.
async fn pages(client: &Client, tool: &str, args: Value) -> (Vec<Value>, usize, Vec<Value>) {
    let (mut all, mut calls, mut reasons) = (Vec::new(), 0, Vec::new());
    let mut args = args;
    loop {
        let (err, v) = call(client, tool, args.clone()).await;
        assert!(!err, "{tool} {args}: {v}");
        calls += 1;
        all.extend(v["matches"].as_array().unwrap().iter().cloned());
        assert_eq!(v["truncated"], v["next_cursor"].is_string(), "{v}");
        if v["next_cursor"].is_null() {
            return (all, calls, reasons);
        }
        reasons.push(v["truncated_reason"].clone());
        args["cursor"] = v["next_cursor"].clone();
        assert!(calls < 1000, "paging does not end");
    }
}

async fn unlimited(client: &Client, tool: &str, args: &Value) -> Vec<Value> {
    let mut args = args.clone();
    args["limit"] = json!(1000);
    let (err, v) = call(client, tool, args).await;
    assert!(!err && v["truncated"] == false, "{v}");
    v["matches"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_and_search_page_with_cursors() {
    let fx = Fixture::new();
    tree(&fx);
    // A walk cap far below the tree's size, so pages are also cut by it.
    let args = ["--workdir", &fx.workdir_arg(), "--max-search-results", "1000"];
    let capped = HttpServer::start(&[&args[..], &["--max-walk-entries", "40"]].concat());
    let plain = HttpServer::start(&args);
    let (_, lifecycle) = lifecycles().remove(0);
    let plain = http_client(&plain.url, lifecycle.clone()).await;
    let capped = http_client(&capped.url, lifecycle).await;

    let queries = [
        ("find_files", json!({"workdir": "test", "path": "tree", "pattern": "*"})),
        ("find_files", json!({"workdir": "test", "pattern": "**/a*/*"})),
        ("search_text", json!({"workdir": "test", "path": "tree", "query": "needle"})),
        (
            "search_text",
            json!({"workdir": "test", "query": "NEEDLE", "glob": "*.txt", "case_sensitive": false}),
        ),
    ];
    for (tool, args) in &queries {
        let full = unlimited(&plain, tool, args).await;
        assert!(full.len() > 40, "{tool} {args}: {}", full.len());
        for limit in [1, 7, 50] {
            let mut paged = args.clone();
            paged["limit"] = json!(limit);
            let (all, calls, reasons) = pages(&plain, tool, paged.clone()).await;
            assert_eq!(all, full, "{tool} {args} limit {limit}");
            // Exactly `limit` left is a last page, not a truncated one.
            assert_eq!(calls, full.len().div_ceil(limit));
            assert!(reasons.iter().all(|r| r == "SEARCH_LIMIT_REACHED"));
            // Through the walk cap: pages of 50 end there, and the cursor
            // carries on after the last entry visited.
            let (all, _, reasons) = pages(&capped, tool, paged).await;
            assert_eq!(all, full, "{tool} {args} limit {limit}, capped");
            if limit == 50 {
                assert!(reasons.iter().any(|r| r == "WALK_LIMIT_REACHED"), "{reasons:?}");
            }
        }
    }

    // Bad, foreign and mismatched cursors.
    let (_, v) =
        call(&plain, "find_files", json!({"workdir": "test", "pattern": "*", "limit": 2})).await;
    let find_cursor = v["next_cursor"].as_str().unwrap().to_owned();
    let (_, v) =
        call(&plain, "search_text", json!({"workdir": "test", "query": "needle", "limit": 2}))
            .await;
    let search_cursor = v["next_cursor"].as_str().unwrap().to_owned();
    let bad = [
        ("find_files", json!({"workdir": "test", "pattern": "*", "cursor": "not-a-cursor"})),
        ("find_files", json!({"workdir": "test", "pattern": "*.rs", "cursor": find_cursor})),
        (
            "find_files",
            json!({"workdir": "test", "path": "tree", "pattern": "*", "cursor": find_cursor}),
        ),
        ("find_files", json!({"workdir": "test", "pattern": "*", "cursor": search_cursor})),
        ("search_text", json!({"workdir": "test", "query": "needle", "cursor": find_cursor})),
        (
            "search_text",
            json!({"workdir": "test", "query": "needle", "case_sensitive": false, "cursor": search_cursor}),
        ),
    ];
    for (tool, args) in bad {
        let (err, text) = call(&plain, tool, args.clone()).await;
        assert!(err, "{tool} {args}: {text}");
        let text = text.as_str().unwrap();
        assert!(text.starts_with("INVALID_ARGUMENT: cursor: "), "{text}");
        assert_no_host_path(text, &fx.root());
    }
    // The same cursor with the same arguments and another limit is fine.
    let (err, v) = call(
        &plain,
        "find_files",
        json!({"workdir": "test", "pattern": "*", "limit": 3, "cursor": find_cursor}),
    )
    .await;
    assert!(!err && v["returned"] == 3, "{v}");
}
