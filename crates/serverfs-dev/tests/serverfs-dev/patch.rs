//! apply_patch end to end: the real binary, the real rmcp client — read →
//! patch → read back over stdio and HTTP, all-or-nothing failures, and the
//! refusals, with nothing written by any of them.

use crate::common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use common::{Client, HttpServer, Project, error_code, ok};
use serde_json::json;
use serverfs_test_support::error_text;

const SOURCE: &str = "use std::fmt;\n\nstruct Point {\n    x: i32,\n    y: i32,\n}\n\nimpl Point {\n    fn new(x: i32, y: i32) -> Self {\n        Self { x, y }\n    }\n\n    fn norm(&self) -> i32 {\n        self.x.abs() + self.y.abs()\n    }\n}\n\nfn main() {\n    let p = Point::new(1, 2);\n    println!(\"{}\", p.norm());\n}\n";

/// A typical 3-hunk edit of `src/point.rs`.
const THREE_HUNKS: &str = "*** Begin Patch\n*** Update File: src/point.rs\n@@ struct Point {\n     x: i32,\n     y: i32,\n+    z: i32,\n }\n@@ impl Point {\n-    fn new(x: i32, y: i32) -> Self {\n-        Self { x, y }\n+    fn new(x: i32, y: i32, z: i32) -> Self {\n+        Self { x, y, z }\n     }\n@@ fn main() {\n-    let p = Point::new(1, 2);\n+    let p = Point::new(1, 2, 3);\n*** End Patch\n";

async fn read_patch_read_back(p: &Project, client: &Client) {
    let before = ok(client, "read_file", json!({"path": "src/point.rs"})).await;
    assert_eq!(before["content"], SOURCE);
    let dry = ok(client, "apply_patch", json!({"patch": THREE_HUNKS, "dry_run": true})).await;
    assert_eq!(dry["applied"], false);
    assert_eq!(dry["files"][0]["operation"], "update");
    assert_eq!(dry["files"][0]["hunks"].as_array().unwrap().len(), 3);
    assert_eq!(p.read("src/point.rs"), SOURCE, "a dry run wrote");
    let done = ok(client, "apply_patch", json!({"patch": THREE_HUNKS})).await;
    assert_eq!(done["applied"], true);
    assert_eq!(done["files"][0]["hunks"][0], json!({"line": 4, "pass": "exact"}));
    let after = ok(client, "read_file", json!({"path": "src/point.rs"})).await;
    let text = after["content"].as_str().unwrap();
    assert!(text.contains("    z: i32,\n}\n"), "{text}");
    assert!(text.contains("Self { x, y, z }"), "{text}");
    assert!(text.contains("Point::new(1, 2, 3)"), "{text}");
    assert_eq!(p.read("src/point.rs"), text);
}

#[tokio::test]
async fn stdio_read_patch_read_back() {
    let p = Project::new();
    p.write("src/point.rs", SOURCE);
    let client = p.stdio_client().await;
    read_patch_read_back(&p, &client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_read_patch_read_back() {
    let p = Project::new();
    p.write("src/point.rs", SOURCE);
    let server = HttpServer::start(&p);
    let client = server.client().await;
    read_patch_read_back(&p, &client).await;
    client.cancel().await.unwrap();
}

/// Every regular file under `dir` with its bytes, and no writer leftovers.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(".serverfs-"), "writer leftover: {}", path.display());
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                files.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[tokio::test]
async fn a_failing_last_operation_leaves_every_file_as_it_was() {
    let p = Project::new();
    p.write("a.txt", "one\ntwo\n");
    p.write("b.txt", "alpha\nbeta\n");
    p.write("gone.txt", "bye\n");
    let client = p.stdio_client().await;
    let host = p.dir.path();
    let before = snapshot(&p.root());
    let last_fails = [
        ("*** Update File: b.txt\n@@\n-gamma\n+delta\n", "PATCH_CONTEXT_NOT_FOUND"),
        ("*** Add File: a.txt\n+x\n", "PATCH_CONFLICT"),
        ("*** Add File: src/lib.rs\n+x\n", "ALREADY_EXISTS"),
        ("*** Delete File: src\n", "NOT_A_FILE"),
        ("*** Update File: missing.txt\n@@\n-a\n+b\n", "PATH_NOT_FOUND"),
        ("*** Update File: b.txt\n@@\n-zzz\n+y\n", "PATCH_CONTEXT_NOT_FOUND"),
        ("*** Update File: .env\n@@\n-SECRET=1\n+SECRET=2\n", "DENIED_PATH"),
        ("*** Update File: b.txt\n*** Move to: src/lib.rs\n", "ALREADY_EXISTS"),
        ("*** Update File: b.txt\nnot a hunk line\n", "PATCH_SYNTAX"),
    ];
    for (last, code) in last_fails {
        let patch = format!(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** Add File: new/dir/c.txt\n+c\n*** Delete File: gone.txt\n{last}*** End Patch\n"
        );
        assert_eq!(
            error_code(&client, "apply_patch", json!({"patch": patch}), host).await,
            code,
            "{last}"
        );
        assert_eq!(snapshot(&p.root()), before, "{last}");
        assert!(!p.path("new").exists(), "{last}");
    }
    client.cancel().await.unwrap();
}

/// The refusals apply_patch's description no longer lists (it reads on
/// every turn) each tell, in the error, what to do instead.
#[tokio::test]
async fn each_refusal_says_what_to_do() {
    let p = Project::new();
    p.write("b.txt", "alpha\nbeta\n");
    p.write("dup.txt", "x\ny\nx\ny\n");
    let client = p.stdio_client().await;
    let before = snapshot(&p.root());
    let many: String = (0..65).map(|i| format!("*** Add File: n{i}.txt\n+x\n")).collect();
    let refused = [
        ("*** Add File: b.txt\n+x\n", "ALREADY_EXISTS", "use *** Update File"),
        ("*** Update File: b.txt\n*** Move to: src/lib.rs\n", "ALREADY_EXISTS", "another path"),
        ("*** Update File: b.txt\n*** Move to: c.txt\n@@\n alpha\n", "PATCH_SYNTAX", "remove it"),
        ("*** Update File: dup.txt\n@@\n-x\n+z\n", "PATCH_CONTEXT_AMBIGUOUS", "add context"),
        (
            "*** Update File: b.txt\n@@\n-beta\n+B\n@@\n-alpha\n+A\n",
            "PATCH_CONTEXT_NOT_FOUND",
            "file order",
        ),
        (
            "*** Update File: b.txt\n@@\n-alpha\n+A\n*** Delete File: b.txt\n",
            "PATCH_CONFLICT",
            "named once",
        ),
        (&many, "PATCH_TOO_LARGE", "split it"),
    ];
    for (operations, code, what_to_do) in refused {
        let patch = format!("*** Begin Patch\n{operations}*** End Patch\n");
        let text = error_text(&client, "apply_patch", json!({"patch": patch})).await;
        assert!(text.starts_with(&format!("{code}: ")) && text.contains(what_to_do), "{text}");
    }
    let wrapped = "cd src; apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: lib.rs\n*** End Patch\nEOF\n";
    let text = error_text(&client, "apply_patch", json!({"patch": wrapped})).await;
    assert!(
        text.starts_with("PATCH_SYNTAX: ") && text.contains("cd <dir> && apply_patch"),
        "{text}"
    );
    assert_eq!(snapshot(&p.root()), before);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn line_endings_bom_and_mode_are_kept() {
    let p = Project::new();
    std::fs::write(p.path("crlf.txt"), "\u{feff}one\r\ntwo\r\nthree\r\n").unwrap();
    std::fs::set_permissions(p.path("crlf.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let client = p.stdio_client().await;
    let patch = "*** Begin Patch\n*** Update File: crlf.txt\n@@\n one\n-two\n+2\n+2b\n three\n*** End Patch\n";
    ok(&client, "apply_patch", json!({"patch": patch})).await;
    assert_eq!(
        std::fs::read(p.path("crlf.txt")).unwrap(),
        "\u{feff}one\r\n2\r\n2b\r\nthree\r\n".as_bytes()
    );
    let mode = std::fs::metadata(p.path("crlf.txt")).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
    let moved = "*** Begin Patch\n*** Update File: crlf.txt\n*** Move to: bin/run.txt\n@@\n-three\n+3\n*** End Patch\n";
    ok(&client, "apply_patch", json!({"patch": moved})).await;
    assert!(!p.path("crlf.txt").exists());
    let mode = std::fs::metadata(p.path("bin/run.txt")).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
    assert_eq!(
        std::fs::read(p.path("bin/run.txt")).unwrap(),
        "\u{feff}one\r\n2\r\n2b\r\n3\r\n".as_bytes()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn escapes_and_links_are_refused_with_nothing_written() {
    let p = Project::new();
    symlink(p.dir.path().join("outside/secret.txt"), p.path("out_file")).unwrap();
    symlink(p.dir.path().join("outside/planted.txt"), p.path("dangling")).unwrap();
    symlink(p.dir.path().join("outside"), p.path("out_dir")).unwrap();
    symlink("src/lib.rs", p.path("inner_link")).unwrap();
    let client = p.stdio_client().await;
    let host = p.dir.path();
    let before = snapshot(&p.root());
    let cases = [
        ("*** Add File: ../outside/planted.txt\n+x\n", "PATH_OUTSIDE_WORKDIR"),
        ("*** Add File: /tmp/planted.txt\n+x\n", "PATH_OUTSIDE_WORKDIR"),
        ("*** Add File: dangling\n+x\n", "ALREADY_EXISTS"),
        ("*** Add File: out_dir/planted.txt\n+x\n", "SYMLINK_NOT_ALLOWED"),
        ("*** Update File: out_file\n@@\n-outside\n+x\n", "SYMLINK_NOT_ALLOWED"),
        ("*** Update File: inner_link\n@@\n-    1\n+    2\n", "SYMLINK_NOT_ALLOWED"),
        ("*** Delete File: inner_link\n", "SYMLINK_NOT_ALLOWED"),
        ("*** Update File: src/lib.rs\n*** Move to: out_dir/moved.rs\n", "SYMLINK_NOT_ALLOWED"),
        ("*** Add File: .git/hooks/post-checkout\n+x\n", "DENIED_PATH"),
        ("*** Delete File: .env\n", "DENIED_PATH"),
    ];
    for (op, code) in cases {
        let patch = format!("*** Begin Patch\n{op}*** End Patch\n");
        assert_eq!(
            error_code(&client, "apply_patch", json!({"patch": patch}), host).await,
            code,
            "{op}"
        );
        assert_eq!(snapshot(&p.root()), before, "{op}");
    }
    assert!(!p.dir.path().join("outside/planted.txt").exists());
    assert!(!p.dir.path().join("outside/moved.rs").exists());
    assert_eq!(
        std::fs::read_to_string(p.dir.path().join("outside/secret.txt")).unwrap(),
        "outside\n"
    );
    // Syntax errors name the patch line.
    let (_, v) = common::call(
        &client,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n"}),
    )
    .await;
    assert!(v.as_str().unwrap().starts_with("PATCH_SYNTAX: line 2"), "{v}");
    client.cancel().await.unwrap();
}

/// A tab-indented Python file patched with space-indented lines: the added
/// lines are written with tabs and the answer says so; a hunk whose
/// indentation maps onto nothing consistent is refused, nothing written.
#[tokio::test]
async fn space_indented_hunks_are_rewritten_to_a_tab_file_or_refused() {
    use rmcp::model::CallToolRequestParams;
    let p = Project::new();
    let source = "def f(x):\n\tif x:\n\t\treturn 1\n\treturn 0\n";
    p.write("src/f.py", source);
    let client = p.stdio_client().await;
    let patch = "*** Begin Patch\n*** Update File: src/f.py\n@@\n     if x:\n-        return 1\n+        y = x * 2\n+        return y\n*** End Patch\n";
    let args = json!({"patch": patch}).as_object().unwrap().clone();
    let answer = client
        .call_tool(CallToolRequestParams::new("apply_patch").with_arguments(args))
        .await
        .unwrap();
    let text = serde_json::to_value(&answer.content).unwrap()[0]["text"].clone();
    assert_eq!(
        text,
        "patch applied\nupdate src/f.py (38 -> 50 bytes), hunks at lines 2 (whitespace, re-indented to tabs)\n"
    );
    let structured = answer.structured_content.unwrap();
    assert_eq!(
        structured["files"][0]["hunks"][0],
        json!({"line": 2, "pass": "whitespace", "reindented": "tabs"})
    );
    assert_eq!(p.read("src/f.py"), "def f(x):\n\tif x:\n\t\ty = x * 2\n\t\treturn y\n\treturn 0\n");

    // `if x:` one level deeper in the file than in the patch, `y = x * 2`
    // not: no consistent mapping, and spaces would not fit a tab file.
    let before = p.read("src/f.py");
    let refused = "*** Begin Patch\n*** Update File: src/f.py\n@@\n if x:\n-\t\ty = x * 2\n+        return 3\n*** End Patch\n";
    let code = error_code(&client, "apply_patch", json!({"patch": refused}), &p.root()).await;
    assert_eq!(code, "PATCH_INDENTATION_AMBIGUOUS");
    assert_eq!(p.read("src/f.py"), before);
    client.cancel().await.unwrap();
}

/// A context line one character off is refused with the closest place,
/// the first differing character and the file's lines there, so a model
/// can fix its patch without re-reading the file.
#[tokio::test]
async fn a_near_miss_names_the_closest_line_and_character() {
    let p = Project::new();
    p.write("src/app.js", "const a = 1;\nconsole.log(\"ready\");\nconst b = 2;\n");
    let client = p.stdio_client().await;
    let patch = "*** Begin Patch\n*** Update File: src/app.js\n@@\n const a = 1;\n-console.log('ready');\n+console.log('set');\n*** End Patch\n";
    let text =
        serverfs_test_support::error_text(&client, "apply_patch", json!({"patch": patch})).await;
    assert!(text.starts_with("PATCH_CONTEXT_NOT_FOUND: "), "{text}");
    assert!(
        text.ends_with(
            "; the closest place is lines 1-2 (1 of 2 lines equal ignoring whitespace); line 2 \
             differs at column 13 (marked ‸): the file has '\"' where the patch has '\\''. The \
             file there: line 1 \"const a = 1;\", line 2 \"console.log(‸\\\"ready\\\");\"; the \
             patch: \"console.log(‸'ready');\""
        ),
        "{text}"
    );
    assert_eq!(p.read("src/app.js"), "const a = 1;\nconsole.log(\"ready\");\nconst b = 2;\n");
    client.cancel().await.unwrap();
}
