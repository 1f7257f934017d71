//! The syntax warning of apply_patch and write_file through the real
//! writer on a temporary root: a write that breaks a file says where and
//! stays applied; old errors and unknown languages get no warning; a dry
//! run warns and writes nothing.

use serverfs_core::{Deadline, ToText};
use serverfs_write::{WriteFileArgs, WriteMode};

use crate::support::fixture;

const CLEAN: &str = "def f(x):\n    y = x + 1\n    return y\n";

fn update(path: &str, hunk: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {path}\n@@\n{hunk}*** End Patch")
}

/// A hunk whose context matches exactly and whose `+` line is a level too
/// deep: the case.
const TOO_DEEP: &str = " def f(x):\n     y = x + 1\n-    return y\n+        return y\n";

#[test]
fn a_patch_that_breaks_python_says_where_and_stays_applied() {
    let f = fixture();
    f.put("pkg/m.py", CLEAN.as_bytes(), 0o644);
    let report = f.writer.apply_patch(&update("pkg/m.py", TOO_DEEP), false, &Deadline::never());
    let report = report.unwrap();
    assert!(report.applied);
    assert_eq!(f.read("pkg/m.py"), b"def f(x):\n    y = x + 1\n        return y\n");
    let warning = report.files[0].syntax.as_ref().expect("no syntax warning");
    assert_eq!(warning.language, "Python");
    let e = &warning.errors[0];
    assert_eq!((e.line, e.column, e.error.as_str()), (3, 9, "unexpected indent"));
    assert_eq!(e.text, "        return y");

    let mut text = String::new();
    report.to_text(None, &mut text);
    assert!(
        text.contains(
            "syntax error: pkg/m.py:3:9: unexpected indent (Python; new with this edit, which is applied)\n  3 |         return y\n"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["files"][0]["syntax"]["errors"][0]["line"], 3, "{json}");
}

#[test]
fn a_dry_run_warns_and_writes_nothing() {
    let f = fixture();
    f.put("m.py", CLEAN.as_bytes(), 0o644);
    let report = f.writer.apply_patch(&update("m.py", TOO_DEEP), true, &Deadline::never()).unwrap();
    assert!(report.files[0].syntax.is_some());
    assert_eq!(f.read("m.py"), CLEAN.as_bytes());
    let mut text = String::new();
    report.to_text(None, &mut text);
    assert!(text.contains("(Python; new with this edit)\n"), "{text}");
}

#[test]
fn clean_edits_old_errors_and_other_languages_get_no_warning() {
    let f = fixture();
    let deadline = Deadline::never();
    f.put("m.py", CLEAN.as_bytes(), 0o644);
    let clean = " def f(x):\n-    y = x + 1\n+    y = x + 2\n";
    let report = f.writer.apply_patch(&update("m.py", clean), false, &deadline).unwrap();
    assert!(report.files[0].syntax.is_none());
    let mut text = String::new();
    report.to_text(None, &mut text);
    assert!(!text.contains("syntax"), "{text}");

    // Already broken (line 1), edited elsewhere, lines shifted: not blamed.
    f.put("old.py", b"def g(:\n    pass\nx = 1\n", 0o644);
    let shift = "*** Begin Patch\n*** Update File: old.py\n@@\n-def g(:\n+import os\n+\n+def g(:\n*** End Patch";
    let report = f.writer.apply_patch(shift, false, &deadline).unwrap();
    assert!(report.files[0].syntax.is_none(), "{:?}", report.files[0].syntax);

    // Not a language the check knows: whatever the content.
    let add = "*** Begin Patch\n*** Add File: notes.txt\n+def f(:\n*** End Patch";
    let report = f.writer.apply_patch(add, false, &deadline).unwrap();
    assert!(report.files[0].syntax.is_none());

    // An added file has no old errors: all of its errors are new.
    let add = "*** Begin Patch\n*** Add File: new.json\n+{\"a\": 1,,}\n*** End Patch";
    let report = f.writer.apply_patch(add, false, &deadline).unwrap();
    assert_eq!(report.files[0].syntax.as_ref().unwrap().language, "JSON");
}

#[test]
fn a_move_is_checked_under_its_new_name() {
    let f = fixture();
    f.put("script", b"x = (1,)\n", 0o644);
    let patch = "*** Begin Patch\n*** Update File: script\n*** Move to: script.py\n@@\n-x = (1,)\n+x = (1,\n*** End Patch";
    let report = f.writer.apply_patch(patch, false, &Deadline::never()).unwrap();
    assert_eq!(report.files[0].syntax.as_ref().expect("no warning").language, "Python");
    let mut text = String::new();
    report.to_text(None, &mut text);
    assert!(text.contains("syntax error: script.py:"), "{text}");
}

fn write(path: &str, content: &str, mode: WriteMode) -> WriteFileArgs {
    WriteFileArgs {
        path: path.to_owned(),
        content: Some(content.to_owned()),
        content_base64: None,
        mode,
    }
}

#[test]
fn write_file_warns_about_new_errors_only() {
    let f = fixture();
    // A new file: every error is new.
    let result = f.writer.write_file_tool(write("a.rs", "fn main() {\n", WriteMode::Create));
    let warning = result.unwrap().syntax.expect("no warning for a new broken file");
    assert_eq!(warning.language, "Rust");

    // Overwritten with the same error and a clean line more: not blamed.
    let same = "// header\nfn main() {\n";
    let result = f.writer.write_file_tool(write("a.rs", same, WriteMode::Overwrite)).unwrap();
    assert!(result.syntax.is_none(), "{:?}", result.syntax);

    // A clean file overwritten with a broken one: the text names it.
    f.put("c.yaml", b"a: 1\n", 0o644);
    let result =
        f.writer.write_file_tool(write("c.yaml", "a: [1, 2\n", WriteMode::Overwrite)).unwrap();
    assert!(result.syntax.is_some());
    assert_eq!(f.read("c.yaml"), b"a: [1, 2\n");
    let mut text = String::new();
    result.to_text(None, &mut text);
    assert!(text.contains("\nsyntax error: c.yaml:1:"), "{text}");
}

#[test]
fn consecutive_edits_of_a_file_never_use_a_stale_parse() {
    let f = fixture();
    let deadline = Deadline::never();
    f.put("m.py", CLEAN.as_bytes(), 0o644);
    let first = " def f(x):\n-    y = x + 1\n+    y = x + 2\n";
    let report = f.writer.apply_patch(&update("m.py", first), false, &deadline).unwrap();
    assert!(report.files[0].syntax.is_none());

    // Changed behind the writer's back, with an error on line 1: the parse
    // kept from the patch above is of other bytes and must not be used,
    // else this old error would be blamed on the next patch.
    f.put("m.py", b"x = = 1\ndef f(x):\n    y = x + 2\n    return y\n", 0o644);
    let second = "     y = x + 2\n-    return y\n+    return y * 2\n";
    let report = f.writer.apply_patch(&update("m.py", second), false, &deadline).unwrap();
    assert!(report.files[0].syntax.is_none(), "{:?}", report.files[0].syntax);

    // The next patch breaks line 4 (reparsed from the kept parse): only
    // that is reported.
    let third = "     y = x + 2\n-    return y * 2\n+        return y * 2\n";
    let report = f.writer.apply_patch(&update("m.py", third), false, &deadline).unwrap();
    let errors = &report.files[0].syntax.as_ref().expect("not reported").errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].line, errors[0].error.as_str()), (4, "unexpected indent"));
}
