//! What a model reads of a command's results ([`ToText`]): a command is its
//! output and one status line; a session read its new output and where to
//! go on; every way an answer is cut short (a timeout, `output_truncated`,
//! `more`, `dropped`) is said in the text.

use std::fmt::Write as _;

use serverfs_core::ToText;
use serverfs_core::render::{end_line, exit_status, status_line};

use crate::output::ReadOutput;
use crate::run::Outcome;
use crate::session::SessionInfo;

impl ToText for Outcome {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        out.push_str(&self.stdout);
        if !self.stderr.is_empty() {
            end_line(out);
            out.push_str("[stderr]\n");
            out.push_str(&self.stderr);
        }
        for line in &self.network {
            end_line(out);
            out.push_str(line);
        }
        for git_dir in &self.repositories_created {
            end_line(out);
            let _ = write!(
                out,
                "git: this command created the repository {git_dir}; its hooks and config are the command's: review them before running git there"
            );
        }
        let mut status = vec![match (&self.session_id, self.next_offset) {
            (Some(id), Some(offset)) if self.running => format!(
                "still running as session {id}; read more with shell_read(session_id={id}, offset={offset})"
            ),
            _ => exit_status(self.exit_code, self.signal.as_deref(), true),
        }];
        if self.timed_out {
            status.push("timed out: the command and everything it started were killed".into());
        }
        if self.output_truncated {
            status.push("output truncated to the first 16,000 characters of each stream".into());
        }
        status_line(out, &status);
    }
}

impl ToText for ReadOutput {
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

impl ToText for SessionInfo {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let state = exit_status(self.exit_code, self.signal.as_deref(), self.exited);
        let _ = writeln!(
            out,
            "{}: {state}, {} bytes of output, idle {} s",
            self.session_id,
            self.end_offset,
            self.idle.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(stdout: &str, stderr: &str, exit_code: Option<i32>) -> Outcome {
        Outcome {
            exit_code,
            signal: exit_code.is_none().then(|| "SIGKILL".to_owned()),
            stdout: stdout.into(),
            stderr: stderr.into(),
            timed_out: exit_code.is_none(),
            output_truncated: false,
            ..Outcome::default()
        }
    }

    #[test]
    fn a_command_is_its_output_and_one_status_line() {
        assert_eq!(bash("hi\n", "", Some(0)).rendered(None), "hi\n[exit code 0]\n");
        assert_eq!(
            bash("a", "oops\n", Some(2)).rendered(None),
            "a\n[stderr]\noops\n[exit code 2]\n"
        );
        assert_eq!(
            bash("", "", None).rendered(None),
            "[killed by SIGKILL; timed out: the command and everything it started were killed]\n"
        );
        let yielded = Outcome {
            running: true,
            session_id: Some("ab12".into()),
            next_offset: Some(6),
            ..bash("first\n", "", None)
        };
        let yielded = Outcome { signal: None, timed_out: false, ..yielded };
        assert_eq!(
            yielded.rendered(None),
            "first\n[still running as session ab12; read more with shell_read(session_id=ab12, offset=6)]\n"
        );
    }
}
