//! Host permissions are respected, not bypassed: a file the server's user
//! cannot read is `ACCESS_DENIED`, and nothing of it leaks.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use serde_json::json;

#[tokio::test]
async fn unreadable_file_and_directory_are_access_denied() {
    let fx = Fixture::new();
    let root = fx.root();
    std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.join("locked.txt"), "top secret\n").unwrap();
    std::fs::set_permissions(root.join("locked.txt"), std::fs::Permissions::from_mode(0o000))
        .unwrap();
    std::fs::create_dir(root.join("locked-dir")).unwrap();
    std::fs::write(root.join("locked-dir/inner.txt"), "inner\n").unwrap();
    std::fs::set_permissions(root.join("locked-dir"), std::fs::Permissions::from_mode(0o000))
        .unwrap();

    // Root ignores mode bits, so run the server as nobody when we are root.
    let server = if rustix::process::geteuid().is_root() {
        HttpServer::start_as(65534, 65534, &["--workdir", &fx.workdir_arg()])
    } else {
        HttpServer::start(&["--workdir", &fx.workdir_arg()])
    };
    let client = http_client(&server.url, rmcp::service::ClientLifecycleMode::Initialize).await;

    let (err, v) =
        call(&client, "read_text_file", json!({"workdir": "test", "path": "README.md"})).await;
    assert!(!err, "the readable file must still be served: {v}");
    for (tool, path) in [
        ("read_text_file", "locked.txt"),
        ("list_directory", "locked-dir"),
        ("read_text_file", "locked-dir/inner.txt"),
        ("stat_file", "locked-dir/inner.txt"),
    ] {
        let (is_error, text) = call(&client, tool, json!({"workdir": "test", "path": path})).await;
        assert!(is_error, "{tool} {path}");
        let text = text.as_str().unwrap();
        assert!(text.starts_with("ACCESS_DENIED: test:/"), "{tool} {path}: {text}");
        assert_no_host_path(text, &root);
    }
    let (err, v) =
        call(&client, "search_text", json!({"workdir": "test", "query": "secret"})).await;
    assert!(!err);
    assert_eq!(v["returned"], 0, "unreadable content leaked: {v}");
    // Not silently "no match": the locked file and directory are counted.
    assert_eq!(v["skipped"], json!({"unreadable": 2, "too_large": 0, "binary": 0}), "{v}");
    let (err, v) =
        call(&client, "find_files", json!({"workdir": "test", "pattern": "*.txt"})).await;
    assert!(!err);
    assert_eq!(v["skipped"]["unreadable"], 1, "{v}");
    // Named directly, they are errors.
    for (tool, args) in [
        ("search_text", json!({"workdir": "test", "path": "locked.txt", "query": "secret"})),
        ("search_text", json!({"workdir": "test", "path": "locked-dir", "query": "x"})),
        ("find_files", json!({"workdir": "test", "path": "locked-dir", "pattern": "*"})),
    ] {
        assert_eq!(error_code(&client, tool, args.clone()).await, "ACCESS_DENIED", "{args}");
    }
    client.cancel().await.unwrap();
}
