//! Edits that say when they break the code, on the real binary over stdio
//! with the real rmcp client: a patch that breaks a Python file's
//! indentation is applied and its answer names the path, line and column in
//! the text and in structuredContent; a clean edit and write_file of a
//! clean file carry no warning.

use crate::answers::answer;
use crate::common;

use common::Project;
use serde_json::json;

const CLEAN: &str = "class Shop:\n    def total(self, items):\n        s = 0\n        for i in items:\n            s += i.price\n        return s\n";

/// Context matches exactly; the `+` line is a level too deep: the first
/// line of a block may be indented at will, so Python (and the answer)
/// names the next line, which returns to no outer level.
const TOO_DEEP: &str = "*** Begin Patch\n*** Update File: shop/cart.py\n@@\n     def total(self, items):\n-        s = 0\n+            s = 0\n         for i in items:\n*** End Patch\n";

const FINE: &str = "*** Begin Patch\n*** Update File: shop/cart.py\n@@\n-        return s\n+        return round(s, 2)\n*** End Patch\n";

#[tokio::test]
async fn a_patch_that_breaks_python_indentation_says_where() {
    let p = Project::new();
    p.write("shop/cart.py", CLEAN);
    let client = p.stdio_client().await;

    let (is_error, structured, text) =
        answer(&client, "apply_patch", json!({"patch": TOO_DEEP})).await;
    assert!(!is_error, "{text}");
    assert_eq!(structured["applied"], true);
    assert!(
        p.read("shop/cart.py").contains("items):\n            s = 0\n"),
        "the edit stays applied"
    );
    assert!(
        text.contains("syntax error: shop/cart.py:4:9: unindent does not match any outer indentation level (Python; new with this edit, which is applied)\n  4 |         for i in items:\n"),
        "{text}"
    );
    let warning = &structured["files"][0]["syntax"];
    assert_eq!(warning["language"], "Python", "{structured}");
    assert_eq!(
        warning["errors"][0],
        json!({"line": 4, "column": 9, "error": "unindent does not match any outer indentation level", "text": "        for i in items:"})
    );

    // The file stays broken as it was: a clean edit elsewhere is not blamed.
    let (_, structured, text) = answer(&client, "apply_patch", json!({"patch": FINE})).await;
    assert_eq!(structured["applied"], true);
    assert!(structured["files"][0].get("syntax").is_none(), "{structured}");
    assert!(!text.contains("syntax"), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn clean_edits_and_writes_carry_no_warning() {
    let p = Project::new();
    p.write("shop/cart.py", CLEAN);
    let client = p.stdio_client().await;

    let (is_error, structured, text) =
        answer(&client, "apply_patch", json!({"patch": FINE, "dry_run": true})).await;
    assert!(!is_error, "{text}");
    assert!(structured["files"][0].get("syntax").is_none(), "{structured}");
    let (_, structured, text) = answer(&client, "apply_patch", json!({"patch": FINE})).await;
    assert!(structured["files"][0].get("syntax").is_none(), "{structured}");
    assert!(!text.contains("syntax"), "{text}");

    let args = json!({"path": "shop/util.rs", "content": "pub fn one() -> u32 {\n    1\n}\n"});
    let (_, structured, text) = answer(&client, "write_file", args).await;
    assert!(structured.get("syntax").is_none(), "{structured}");
    assert!(!text.contains("syntax"), "{text}");

    // The control: the same tool on a broken file does warn.
    let args = json!({"path": "shop/bad.rs", "content": "pub fn one() -> u32 {\n    1\n"});
    let (_, structured, text) = answer(&client, "write_file", args).await;
    assert_eq!(structured["syntax"]["language"], "Rust", "{structured}");
    assert!(text.contains("syntax error: shop/bad.rs:"), "{text}");
    client.cancel().await.unwrap();
}
