//! The text a model reads of the results serverfs-dev itself defines (the
//! shared read tools' is in [`serverfs_tools::text`], which also builds
//! every answer; commands, patches and links render beside their types in
//! their crates): a read is the lines under a one-line header, the rest a
//! line or two. A read cut short says so and where to go on.

use std::fmt::Write as _;

use serverfs_core::ToText;
use serverfs_core::render::shown_path;

use crate::commands::{ShellList, ShellOpened, ShellWritten};
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

#[cfg(test)]
mod tests {
    use super::*;

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
            r.rendered(None),
            "src/a.rs: lines 3 to 4 of 9; cut at 16,000 characters, continue with start_line=5\nc\nd\n"
        );
    }
}
