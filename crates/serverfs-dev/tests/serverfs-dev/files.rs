//! serverfs-dev end to end: the real binary, the real rmcp client, over
//! stdio and HTTP — read, write, read back, and every refusal with nothing
//! written.

use crate::common;

use std::os::unix::fs::{PermissionsExt, symlink};

use common::{Client, HttpServer, Project, call, error_code, ok};
use serde_json::json;

async fn read_write_read_back(p: &Project, client: &Client) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for tool in [
        "read_file",
        "write_file",
        "list_directory",
        "find_files",
        "search_text",
        "read_text_file",
        "stat_file",
    ] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let v = ok(client, "read_file", json!({"path": "src/lib.rs", "start_line": 2, "end_line": 2}))
        .await;
    assert_eq!(v["content"], "    1\n");
    assert_eq!(v["total_lines"], 3);
    let v =
        ok(client, "write_file", json!({"path": "new/deep/file.txt", "content": "hello\n"})).await;
    assert_eq!(v["size"], 6);
    assert_eq!(v["sha256"], "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
    assert_eq!(p.read("new/deep/file.txt"), "hello\n");
    let v = ok(client, "read_file", json!({"path": "new/deep/file.txt"})).await;
    assert_eq!(v["content"], "hello\n");
    // Hidden files are normal work; .git and credentials are not.
    let v = ok(client, "list_directory", json!({"path": ""})).await;
    let listed: Vec<&str> =
        v["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert!(listed.contains(&".gitignore"), "{listed:?}");
    assert!(!listed.contains(&".git") && !listed.contains(&".env"), "{listed:?}");
}

#[tokio::test]
async fn stdio_read_write_read_back() {
    let p = Project::new();
    let client = p.stdio_client().await;
    read_write_read_back(&p, &client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_read_write_read_back() {
    let p = Project::new();
    let server = HttpServer::start(&p);
    let client = server.client().await;
    read_write_read_back(&p, &client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn write_file_modes_and_content_forms() {
    let p = Project::new();
    let client = p.stdio_client().await;
    let host = p.dir.path();
    assert_eq!(
        error_code(&client, "write_file", json!({"path": "src/lib.rs", "content": "x"}), host)
            .await,
        "ALREADY_EXISTS"
    );
    assert_eq!(p.read("src/lib.rs"), "fn one() -> u32 {\n    1\n}\n");
    std::fs::set_permissions(p.path("src/lib.rs"), std::fs::Permissions::from_mode(0o750)).unwrap();
    ok(
        &client,
        "write_file",
        json!({"path": "src/lib.rs", "content": "fn two() {}\n", "mode": "overwrite"}),
    )
    .await;
    assert_eq!(p.read("src/lib.rs"), "fn two() {}\n");
    let mode = std::fs::metadata(p.path("src/lib.rs")).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    ok(&client, "write_file", json!({"path": "bin.dat", "content_base64": "AAEC/w=="})).await;
    assert_eq!(std::fs::read(p.path("bin.dat")).unwrap(), [0, 1, 2, 255]);
    // A strict client sends null for the one it does not use.
    let strict = json!({"path": "n.txt", "content": "t", "content_base64": null, "mode": null});
    ok(&client, "write_file", strict).await;
    assert_eq!(p.read("n.txt"), "t");
    // Others send "" for it: beside the other field, "" is not given.
    let strict = json!({"path": "e1.txt", "content": "t", "content_base64": ""});
    ok(&client, "write_file", strict).await;
    assert_eq!(p.read("e1.txt"), "t");
    let strict = json!({"path": "e2.dat", "content": "", "content_base64": "AAEC/w=="});
    ok(&client, "write_file", strict).await;
    assert_eq!(std::fs::read(p.path("e2.dat")).unwrap(), [0, 1, 2, 255]);
    // An empty file is still writable, either way.
    for (name, args) in [
        ("e3", json!({"content": ""})),
        ("e4", json!({"content_base64": ""})),
        ("e5", json!({"content": "", "content_base64": ""})),
        ("e6", json!({"content": "", "content_base64": null})),
    ] {
        let mut args = args;
        args["path"] = json!(name);
        ok(&client, "write_file", args).await;
        assert_eq!(std::fs::read(p.path(name)).unwrap(), b"", "{name}");
    }
    let both = json!({"path": "x", "content": "a", "content_base64": "YQ=="});
    let (is_error, text) = call(&client, "write_file", both).await;
    assert!(is_error);
    assert!(
        text.as_str().unwrap().starts_with("INVALID_ARGUMENT: content, content_base64: "),
        "{text}"
    );
    for bad in [
        json!({"path": "x", "content": "a", "content_base64": "YQ=="}),
        json!({"path": "x"}),
        json!({"path": "x", "content_base64": "not base64!"}),
        json!({"path": "x", "content": "a", "mode": "append"}),
    ] {
        assert_eq!(error_code(&client, "write_file", bad, host).await, "INVALID_ARGUMENT");
    }
    assert!(!p.path("x").exists());
    let big = "a".repeat(262_145);
    let (is_error, text) =
        call(&client, "write_file", json!({"path": "big", "content": big})).await;
    let text = text.as_str().unwrap_or_default();
    // A write code, and a way on: the setting and the tools that can.
    assert!(is_error && text.starts_with("WRITE_LIMIT_EXCEEDED: the content is 262145 bytes"));
    for named in ["--max-file-bytes", "bash", "file_link"] {
        assert!(text.contains(named), "{named}: {text}");
    }
    assert!(!p.path("big").exists());
    client.cancel().await.unwrap();
}

/// Every escape the file tools must refuse, with nothing created anywhere.
#[tokio::test]
async fn escapes_are_refused_and_nothing_is_written() {
    let p = Project::new();
    symlink(p.dir.path().join("outside"), p.path("out_dir")).unwrap();
    symlink(p.dir.path().join("outside/secret.txt"), p.path("out_file")).unwrap();
    symlink(p.dir.path().join("outside/planted.txt"), p.path("dangling")).unwrap();
    symlink("src/lib.rs", p.path("inner_link")).unwrap();
    let client = p.stdio_client().await;
    let host = p.dir.path();
    let cases = [
        ("read_file", json!({"path": "../outside/secret.txt"}), "PATH_OUTSIDE_WORKDIR"),
        ("read_file", json!({"path": "/etc/passwd"}), "PATH_OUTSIDE_WORKDIR"),
        ("read_file", json!({"path": "out_file"}), "SYMLINK_NOT_ALLOWED"),
        ("read_file", json!({"path": "out_dir/secret.txt"}), "SYMLINK_NOT_ALLOWED"),
        ("read_file", json!({"path": ".env"}), "DENIED_PATH"),
        ("read_file", json!({"path": ".git/config"}), "DENIED_PATH"),
        ("list_directory", json!({"path": ".git"}), "DENIED_PATH"),
        (
            "write_file",
            json!({"path": "../outside/planted.txt", "content": "x"}),
            "PATH_OUTSIDE_WORKDIR",
        ),
        ("write_file", json!({"path": "dangling", "content": "x"}), "SYMLINK_NOT_ALLOWED"),
        (
            "write_file",
            json!({"path": "dangling", "content": "x", "mode": "overwrite"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "write_file",
            json!({"path": "out_file", "content": "x", "mode": "overwrite"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "write_file",
            json!({"path": "inner_link", "content": "x", "mode": "overwrite"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "write_file",
            json!({"path": "out_dir/planted.txt", "content": "x"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        (
            "write_file",
            json!({"path": "out_dir/new/planted.txt", "content": "x"}),
            "SYMLINK_NOT_ALLOWED",
        ),
        ("write_file", json!({"path": ".git/hooks/pre-commit", "content": "x"}), "DENIED_PATH"),
        ("write_file", json!({"path": "sub/.git/config", "content": "x"}), "DENIED_PATH"),
        ("write_file", json!({"path": ".env", "content": "x", "mode": "overwrite"}), "DENIED_PATH"),
        ("write_file", json!({"path": "src", "content": "x", "mode": "overwrite"}), "NOT_A_FILE"),
    ];
    for (tool, args, code) in cases {
        assert_eq!(error_code(&client, tool, args.clone(), host).await, code, "{tool} {args}");
    }
    // A link inside the root may be read through (policy re-checked).
    let v = ok(&client, "read_file", json!({"path": "inner_link"})).await;
    assert_eq!(v["content"], "fn one() -> u32 {\n    1\n}\n");
    assert!(!p.dir.path().join("outside/planted.txt").exists());
    assert!(!p.path("sub").exists() && !p.path("out_dir/new").exists());
    assert_eq!(
        std::fs::read_to_string(p.dir.path().join("outside/secret.txt")).unwrap(),
        "outside\n"
    );
    assert_eq!(p.read(".env"), "SECRET=1\n");
    assert_eq!(p.read("src/lib.rs"), "fn one() -> u32 {\n    1\n}\n");
    let (_, v) = call(&client, "read_file", json!({"path": "src/lib.rs", "start_line": 9})).await;
    assert!(v.as_str().unwrap().starts_with("INVALID_ARGUMENT"), "{v}");
    client.cancel().await.unwrap();
}

#[test]
fn a_network_listen_without_authentication_is_refused_at_start() {
    let p = Project::new();
    let out = p.command().args(["--listen", "0.0.0.0:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
}

#[test]
fn a_state_dir_inside_the_root_is_refused_at_start() {
    let p = Project::new();
    let out = std::process::Command::new(common::BIN)
        .arg("--root")
        .arg(p.root())
        .arg("--state-dir")
        .arg(p.path("state"))
        .arg("--stdio")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!p.path("state/journal").exists());
}

/// Tool descriptions state the configured file cap, not a default: a
/// client reading `tools/list` of a server started with a larger
/// `--max-file-bytes` sees that size, and no placeholder is left.
#[tokio::test]
async fn descriptions_state_the_configured_file_cap() {
    let p = Project::new();
    let mut cmd = tokio::process::Command::from(p.command());
    cmd.args(["--stdio", "--max-file-bytes", "1048576"]).stderr(std::process::Stdio::null());
    let client = common::serve(cmd).await;
    let tools = client.list_all_tools().await.unwrap();
    let description = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).expect(name);
        tool.description.as_deref().unwrap_or_default().to_owned()
    };
    assert!(description("read_file").contains("(up to 1 MiB)"), "{}", description("read_file"));
    assert!(description("write_file").contains("(at most 1 MiB)"), "{}", description("write_file"));
    for tool in &tools {
        let text = tool.description.as_deref().unwrap_or_default();
        assert!(!text.contains("256 KiB") && !text.contains('%'), "{}: {text}", tool.name);
    }
    client.cancel().await.unwrap();
}
