//! [`ToText`]: what a model reads of a tool result, and the few helpers
//! every rendering shares.
//!
//! It lives at the bottom of the graph, beside [`crate::Reported`], for the
//! same reason: every crate that defines a tool result (the read tools, the
//! writer, the command runner, file transfer) writes its text beside the
//! type, and no binary keeps a mirrored copy just to render it. How the
//! text becomes an MCP answer (and the JSON alternative) is
//! `serverfs_tools::text`.

use std::fmt::Write as _;

use crate::EntryKind;

/// A result's text for a model.
pub trait ToText {
    /// Appends the text to `out`. `workdir` is the named root the result's
    /// paths are relative to, when the server has several (serverfs-mcp);
    /// paths are then shown as `workdir:/path`.
    fn to_text(&self, workdir: Option<&str>, out: &mut String);

    /// An image the answer shows after its text (base64 data, MIME type):
    /// none but for a read of an image (serverfs-dev).
    fn image(&self) -> Option<(String, String)> {
        None
    }

    /// The text alone, as a new string.
    fn rendered(&self, workdir: Option<&str>) -> String {
        let mut out = String::new();
        self.to_text(workdir, &mut out);
        out
    }
}

/// How a path is shown: `workdir:/path` in a named root, else the path
/// (`.` for the root).
pub fn shown_path(workdir: Option<&str>, path: &str) -> String {
    match (workdir, path) {
        (Some(w), p) => format!("{w}:/{p}"),
        (None, "") => ".".to_owned(),
        (None, p) => p.to_owned(),
    }
}

/// Appends a name with the marker of its type: `/` for a directory,
/// ` (symlink)`, ` (special)`.
pub fn marked(out: &mut String, name: &str, kind: EntryKind) {
    out.push_str(name);
    out.push_str(match kind {
        EntryKind::Directory => "/",
        EntryKind::Symlink => " (symlink)",
        EntryKind::Special => " (special)",
        EntryKind::File => "",
    });
}

/// Ends `out` with a newline (unless empty), so a status line starts on
/// its own line.
pub fn end_line(out: &mut String) {
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
}

/// How a process ended, in a few words: `exit code 0`, `killed by
/// SIGKILL`, or `still running`.
pub fn exit_status(exit_code: Option<i32>, signal: Option<&str>, ended: bool) -> String {
    match (exit_code, signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {signal}"),
        (None, None) if ended => "ended without an exit code".to_owned(),
        (None, None) => "still running".to_owned(),
    }
}

/// Appends one bracketed status line (`[a; b]`), on a line of its own.
pub fn status_line(out: &mut String, parts: &[String]) {
    end_line(out);
    let _ = writeln!(out, "[{}]", parts.join("; "));
}
