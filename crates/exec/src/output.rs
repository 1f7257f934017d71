//! A session's output: stdout and stderr merged in one buffer, read at
//! absolute byte offsets, with the end state under the same lock (so a
//! reader never misses the exit). A yielding `bash` command fills one from
//! its first byte; a shell session from its start.
//!
//! Guarantees: offsets stay absolute when old output is dropped past the
//! cap; a read never ends inside a character while the shell runs, and the
//! kept part never starts inside one.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::Reported;
use serverfs_core::error::FsError;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use crate::capped::CappedText;
use serverfs_supervisor::protocol::Ended;

/// The answer of [`crate::session::Sessions::read`], and shell_read's result as sent
/// (`ShellReadResult`; the field docs a client reads are the
/// `schemars(description)`s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ShellReadResult")]
pub struct ReadOutput {
    /// Output from `offset` to `next_offset` (lossy UTF-8; never ends in
    /// the middle of a character while the shell runs).
    #[schemars(description = "Output (stdout and stderr together) from offset to next_offset.")]
    pub output: String,
    /// Where `output` starts: the requested offset, or the buffer's start
    /// when that offset was already dropped.
    #[schemars(
        description = "Where output starts: the offset asked for, or the oldest kept byte when that was dropped."
    )]
    pub offset: u64,
    /// The offset to ask for next.
    #[schemars(description = "The offset to read from next.")]
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that were dropped
    /// from the buffer (0 normally).
    #[schemars(
        description = "Bytes between the offset asked for and offset that were dropped from the buffer."
    )]
    pub dropped: u64,
    /// More output is buffered beyond `next_offset` right now.
    #[schemars(description = "More output is already waiting beyond next_offset.")]
    pub more: bool,
    /// The shell has ended and all its output is in the buffer.
    #[schemars(
        description = "The shell has ended and all its output has been read into the buffer."
    )]
    pub exited: bool,
    /// Its exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed it, e.g. `SIGKILL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = "The signal that ended it, e.g. SIGKILL.")]
    pub signal: Option<String>,
}

impl Reported for ReadOutput {
    fn bytes_returned(&self) -> u64 {
        self.output.len() as u64
    }
}

/// The output buffer and the end state, under one lock (so a waiter never
/// misses the exit).
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    data: Vec<u8>,
    /// Absolute offset of `data[0]`.
    base: u64,
    pub(crate) exited: bool,
    pub(crate) ended: Option<Ended>,
}

impl Buffer {
    pub(crate) fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    /// The end without an incomplete character at it: where a reader that
    /// was shown everything so far goes on, so a character split across
    /// two writes is read whole later instead of as U+FFFD.
    pub(crate) fn complete_end(&self) -> u64 {
        self.base + complete_prefix(&self.data) as u64
    }

    pub(crate) fn append(&mut self, bytes: &[u8], cap: usize) {
        self.data.extend_from_slice(bytes);
        if self.data.len() > cap {
            let mut cut = self.data.len() - cap;
            // Start the kept part on a character boundary.
            while cut < self.data.len()
                && cut < self.data.len() - cap + 3
                && is_continuation(self.data[cut])
            {
                cut += 1;
            }
            self.data.drain(..cut);
            self.base += cut as u64;
        }
    }

    pub(crate) fn read(&self, offset: u64, max: usize) -> Result<ReadOutput, FsError> {
        let end = self.end();
        if offset > end {
            return Err(FsError::invalid(format!(
                "offset {offset} is past the end of the output ({end})."
            )));
        }
        let start = offset.max(self.base);
        let from = (start - self.base) as usize;
        let mut to = self.data.len().min(from.saturating_add(max));
        // Never end inside a character, unless the shell is gone and this
        // is the very end.
        if !(self.exited && to == self.data.len()) {
            to = from + complete_prefix(&self.data[from..to]);
        }
        let (exit_code, signal) = match self.ended {
            Some(e) if self.exited => (e.exit_code(), e.signal_name()),
            _ => (None, None),
        };
        Ok(ReadOutput {
            output: String::from_utf8_lossy(&self.data[from..to]).into_owned(),
            offset: start,
            next_offset: start + (to - from) as u64,
            dropped: start - offset,
            more: to < self.data.len(),
            exited: self.exited,
            exit_code,
            signal,
        })
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of `bytes` without an incomplete character at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    let n = bytes.len();
    // Find the last lead byte among the last 4 bytes.
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if is_continuation(b) {
            continue;
        }
        let need = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// What a session's driver and its readers share.
pub(crate) struct Shared {
    buffer: Mutex<Buffer>,
    changed: watch::Sender<u64>,
    /// Set once the output is a session's: whose, for its end's audit line.
    audit: Mutex<Option<SessionAudit>>,
}

/// Who a session belongs to, for the audit line of its end.
#[derive(Debug)]
pub(crate) struct SessionAudit {
    /// The owner's name: the principal (`token:<name>`, `stdio`, …).
    pub(crate) principal: String,
    /// The session id's first 8 hex digits: enough to follow a session
    /// through the log, not enough to use it (the id is a capability).
    pub(crate) session: String,
    /// `shell` or `bash` (a command that yielded).
    pub(crate) kind: &'static str,
    pub(crate) started: Instant,
}

impl Shared {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            buffer: Mutex::new(Buffer::default()),
            changed: watch::Sender::new(0),
            audit: Mutex::default(),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the readers waiting for output or the end.
    pub(crate) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees every [`Shared::bump`] from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Makes the output a session's: its end is audited from now on.
    pub(crate) fn attach(&self, audit: SessionAudit) {
        *self.audit.lock().unwrap_or_else(PoisonError::into_inner) = Some(audit);
    }

    /// Records the end (all output is in), wakes the readers, and writes
    /// the session's end line (one INFO `session_ended` naming its owner,
    /// how it ended and how long it ran) when it is a session's.
    pub(crate) fn finish(&self, ended: Option<Ended>) {
        {
            let mut b = self.lock();
            b.ended = ended;
            b.exited = true;
        }
        self.bump();
        if let Some(audit) = self.audit.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let status = ended.map_or_else(|| "supervisor failed".to_owned(), Ended::status);
            let duration_ms =
                u64::try_from(audit.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::info!(
                event = "session_ended",
                principal = audit.principal,
                session = audit.session,
                kind = audit.kind,
                status,
                duration_ms,
            );
        }
    }
}

/// The longest last line kept for progress reports, in bytes.
const MAX_LAST_LINE: usize = 200;

/// What a progress report says of a command's output so far: how many
/// lines it has written (both streams) and its last non-blank one. A line
/// ends at `\n`, at `\r\n`, or at a lone `\r`: a progress bar redraws its
/// line with `\r`, and its last state is what the report should show.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    lines: u64,
    /// The line being written (its first [`MAX_LAST_LINE`] bytes).
    partial: Vec<u8>,
    last: Vec<u8>,
    /// The last push ended with `\r`: a `\n` first in the next one ends
    /// the same line.
    after_cr: bool,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        if std::mem::take(&mut self.after_cr) && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.lines += 1;
            self.extend_partial(&rest[..end]);
            if self.partial.iter().any(|b| !b.is_ascii_whitespace()) {
                std::mem::swap(&mut self.last, &mut self.partial);
            }
            self.partial.clear();
            let ended_by_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if ended_by_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        self.extend_partial(rest);
    }

    fn extend_partial(&mut self, bytes: &[u8]) {
        let room = MAX_LAST_LINE.saturating_sub(self.partial.len());
        self.partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Lines written so far, and the last non-blank one (lossy UTF-8,
    /// control characters shown as `?`), if any.
    pub(crate) fn report(&self) -> (u64, Option<String>) {
        let last = (!self.last.is_empty()).then(|| {
            String::from_utf8_lossy(&self.last)
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect::<String>()
                .trim()
                .to_owned()
        });
        (self.lines, last)
    }
}

/// Reads a command's stream to its end into `sink` (capped; what was read
/// stays there when the drain is dropped unfinished), the merged buffer
/// `(shared, cap)` and the progress `tail`, any of them. The buffer's lock
/// is taken first, so that a snapshot under it sees both alike.
pub(crate) async fn drain(
    mut stream: impl AsyncRead + Unpin,
    sink: Option<&Mutex<CappedText>>,
    merged: Option<(&Shared, usize)>,
    tail: Option<&Mutex<Tail>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let buffer = merged.map(|(shared, cap)| {
                    let mut b = shared.lock();
                    b.append(&buf[..n], cap);
                    b
                });
                if let Some(sink) = sink {
                    sink.lock().unwrap_or_else(PoisonError::into_inner).push(&buf[..n]);
                }
                if let Some(tail) = tail {
                    tail.lock().unwrap_or_else(PoisonError::into_inner).push(&buf[..n]);
                }
                drop(buffer);
                if let Some((shared, _)) = merged {
                    shared.bump();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_counts_lines_and_keeps_the_last_non_blank_one() {
        let mut tail = Tail::default();
        assert_eq!(tail.report(), (0, None));
        tail.push(b"first\nsec");
        tail.push(b"ond\n\n   \nthird-without-newline");
        assert_eq!(tail.report(), (4, Some("second".to_owned())));
        tail.push(b"\n\x1b[31mred\x1b[0m\n");
        assert_eq!(tail.report(), (6, Some("?[31mred?[0m".to_owned())));
        tail.push(&[b'x'; 500]);
        tail.push(b"\n");
        let (lines, last) = tail.report();
        assert_eq!((lines, last.map(|l| l.len())), (7, Some(MAX_LAST_LINE)));
    }

    #[test]
    fn a_carriage_return_ends_a_line_and_crlf_ends_one_line() {
        let mut tail = Tail::default();
        tail.push(b"downloading  10%\rdownloading  55%\r");
        assert_eq!(tail.report(), (2, Some("downloading  55%".to_owned())));
        // `\r\n` split across two reads is one line end, not two.
        tail.push(b"\ndone\r");
        tail.push(b"\n");
        assert_eq!(tail.report(), (3, Some("done".to_owned())));
        tail.push(b"a\r\nb\r\n\r\nc\rd");
        assert_eq!(tail.report(), (7, Some("c".to_owned())));
    }

    #[test]
    fn complete_prefix_stops_before_incomplete_chars() {
        let e = "aé".as_bytes(); // 61 c3 a9
        assert_eq!(complete_prefix(e), 3);
        assert_eq!(complete_prefix(&e[..2]), 1);
        let crab = "🦀".as_bytes();
        assert_eq!(complete_prefix(&crab[..3]), 0);
        assert_eq!(complete_prefix(crab), 4);
        assert_eq!(complete_prefix(b""), 0);
    }

    #[test]
    fn offsets_stay_absolute_across_trimming() {
        let mut b = Buffer::default();
        b.append(b"0123456789", 8);
        assert_eq!((b.base, b.end()), (2, 10));
        let r = b.read(0, 100).unwrap();
        assert_eq!((r.offset, r.dropped, r.output.as_str(), r.next_offset), (2, 2, "23456789", 10));
        let r = b.read(5, 2).unwrap();
        assert_eq!((r.output.as_str(), r.next_offset, r.more), ("56", 7, true));
        assert!(b.read(11, 1).is_err());
        // Trimming never leaves half a character at the start.
        let mut b = Buffer::default();
        b.append("aéé".as_bytes(), 3); // 61 c3 a9 c3 a9 -> keep "é"? cut 2 -> a9.. skip
        assert_eq!(String::from_utf8(b.data.clone()).unwrap(), "é");
        assert_eq!(b.base, 3);
    }
}
