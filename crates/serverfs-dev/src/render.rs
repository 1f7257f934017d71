//! The text a model reads of serverfs-dev's own tools (the shared read
//! tools' is in [`serverfs_tools::text`], which also builds every answer):
//! a read is the lines under a one-line header, bash its output and one
//! status line, the rest a line or two. Every way an answer can be cut
//! short (`truncated`, `output_truncated`, `more`, `dropped`) and how to go
//! on is said in the text.

use std::fmt::Write as _;

use serverfs_tools::ToText;
use serverfs_tools::text::{exit_status, shown_path, status_line};

use crate::commands::{
    BashResult, ShellInfo, ShellList, ShellOpened, ShellReadResult, ShellWritten,
};
use crate::links::FileLinkResult;
use crate::patching::ApplyPatchResult;
use crate::project::{ReadFileResult, StatResult, WriteFileResult};

impl ToText for ReadFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let path = shown_path(workdir, &self.path);
        if let Some(image) = &self.image {
            let _ = writeln!(
                out,
                "{path}: {} image, {} bytes (shown below)",
                image.mime_type, image.size
            );
            return;
        }
        if self.end_line < self.start_line {
            let _ = writeln!(out, "{path}: no lines ({} lines in the file)", self.total_lines);
            return;
        }
        let _ = write!(
            out,
            "{path}: lines {} to {} of {}",
            self.start_line, self.end_line, self.total_lines
        );
        if self.truncated {
            let next = self.end_line + 1;
            let _ = write!(out, "; cut at 16,000 characters, continue with start_line={next}");
        }
        out.push('\n');
        out.push_str(&self.content);
    }
    fn image(&self) -> Option<(String, String)> {
        self.image.as_ref().map(|i| (i.data.clone(), i.mime_type.clone()))
    }
}

impl ToText for StatResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        self.stat.to_text(workdir, out);
        if let Some(sha256) = &self.sha256 {
            let _ = writeln!(out, "sha256: {sha256}");
        }
    }
}

impl ToText for WriteFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let path = shown_path(workdir, &self.path);
        let _ = writeln!(out, "wrote {path}: {} bytes, sha256 {}", self.size, self.sha256);
    }
}

impl ToText for ApplyPatchResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        out.push_str(match (self.dry_run, self.applied) {
            (true, _) => "dry run: the patch applies; nothing was written\n",
            (false, true) => "patch applied\n",
            (false, false) => "patch not applied\n",
        });
        for file in &self.files {
            let _ = write!(out, "{} {}", file.operation, file.path);
            if let Some(to) = &file.move_to {
                let _ = write!(out, " -> {to}");
            }
            match (file.bytes_before, file.bytes_after) {
                (Some(b), Some(a)) => {
                    let _ = write!(out, " ({b} -> {a} bytes)");
                }
                (None, Some(a)) => {
                    let _ = write!(out, " ({a} bytes)");
                }
                _ => {}
            }
            if !file.hunks.is_empty() {
                let hunks: Vec<String> = file
                    .hunks
                    .iter()
                    .map(|h| match h.pass.as_str() {
                        "exact" => h.line.to_string(),
                        pass => format!("{} ({pass})", h.line),
                    })
                    .collect();
                let _ = write!(out, ", hunks at lines {}", hunks.join(", "));
            }
            out.push('\n');
        }
    }
}

impl ToText for BashResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        out.push_str(&self.stdout);
        if !self.stderr.is_empty() {
            if !out.is_empty() {
                serverfs_tools::text::end_line(out);
            }
            out.push_str("[stderr]\n");
            out.push_str(&self.stderr);
        }
        let mut status = vec![exit_status(self.exit_code, self.signal.as_deref(), true)];
        if self.timed_out {
            status.push("timed out: the command and everything it started were killed".into());
        }
        if self.output_truncated {
            status.push("output truncated to the first 16,000 characters of each stream".into());
        }
        status_line(out, &status);
    }
}

impl ToText for ShellOpened {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let _ = writeln!(out, "session_id: {}", self.session_id);
    }
}

impl ToText for ShellWritten {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let _ =
            writeln!(out, "wrote {} bytes; read the output with shell_read", self.bytes_written);
    }
}

impl ToText for ShellReadResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        if self.dropped > 0 {
            let _ = writeln!(
                out,
                "[{} bytes before offset {} were dropped]",
                self.dropped, self.offset
            );
        }
        out.push_str(&self.output);
        let mut status = vec![format!("next_offset={}", self.next_offset)];
        if self.more {
            status.push("more output is waiting".into());
        }
        if self.exited {
            let how = exit_status(self.exit_code, self.signal.as_deref(), true);
            status.push(format!("the shell has ended: {how}"));
        }
        status_line(out, &status);
    }
}

impl ToText for ShellInfo {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let state = exit_status(self.exit_code, self.signal.as_deref(), self.exited);
        let _ = writeln!(
            out,
            "{}: {state}, {} bytes of output, idle {} s",
            self.session_id, self.end_offset, self.idle_seconds
        );
    }
}

impl ToText for ShellList {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        if self.sessions.is_empty() {
            out.push_str("no open sessions\n");
        }
        for s in &self.sessions {
            s.to_text(workdir, out);
        }
    }
}

impl ToText for FileLinkResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let _ = writeln!(out, "{} {}\nexpires_at: {}", self.method, self.url, self.expires_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T: ToText>(value: &T) -> String {
        let mut out = String::new();
        value.to_text(None, &mut out);
        out
    }

    fn bash(stdout: &str, stderr: &str, exit_code: Option<i32>) -> BashResult {
        BashResult {
            exit_code,
            signal: exit_code.is_none().then(|| "SIGKILL".to_owned()),
            stdout: stdout.into(),
            stderr: stderr.into(),
            timed_out: exit_code.is_none(),
            output_truncated: false,
        }
    }

    #[test]
    fn bash_is_its_output_and_one_status_line() {
        assert_eq!(text(&bash("hi\n", "", Some(0))), "hi\n[exit code 0]\n");
        assert_eq!(text(&bash("a", "oops\n", Some(2))), "a\n[stderr]\noops\n[exit code 2]\n");
        assert_eq!(
            text(&bash("", "", None)),
            "[killed by SIGKILL; timed out: the command and everything it started were killed]\n"
        );
    }

    #[test]
    fn read_file_says_where_to_continue_when_cut() {
        let r = ReadFileResult {
            path: "src/a.rs".into(),
            start_line: 3,
            end_line: 4,
            total_lines: 9,
            truncated: true,
            content: "c\nd\n".into(),
            image: None,
        };
        assert_eq!(
            text(&r),
            "src/a.rs: lines 3 to 4 of 9; cut at 16,000 characters, continue with start_line=5\nc\nd\n"
        );
    }
}
