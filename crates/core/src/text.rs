//! Streaming text pages (SPEC §2.3 read_text_file, §2.6 byte cap).
//!
//! Guarantees: the file is read forward through a fixed buffer and never
//! loaded whole; lines before `start_line` are counted, not stored; memory is
//! bounded by `max_bytes` plus one buffer, whatever the file's size or line
//! length. The call's [`Deadline`] is checked before every buffer fill, so a
//! read that skips millions of lines stops when its client cancels or its
//! deadline passes (`TIMEOUT`). Content is returned byte-exact (terminators kept, never lossy):
//! UTF-8 (a leading BOM dropped) or an error.

use std::fmt::Display;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use crate::deadline::{Deadline, DeadlineReader, is_deadline_stop};
use crate::error::{ErrorCode, FsError};

/// How much of the file head is sampled for NUL bytes.
pub const BINARY_SAMPLE_BYTES: usize = 8 * 1024;
const BUFFER_BYTES: usize = 64 * 1024;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One page of lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextPage {
    /// First line number asked for (1-based).
    pub start_line: u64,
    /// Last line returned; `None` for an empty page.
    pub end_line: Option<u64>,
    /// The lines, terminators kept.
    pub content: String,
    /// More lines follow.
    pub has_more: bool,
    /// Where the next page starts, when `has_more`.
    pub next_start_line: Option<u64>,
}

/// Reads lines `start_line ..` of `file`: at most `max_lines` lines and at
/// most `max_bytes` bytes of content. `shown` names the file in errors.
///
/// # Errors
/// `BINARY_FILE` (NUL in the first 8 KiB or in the page),
/// `UNSUPPORTED_TEXT_ENCODING`, `LINE_TOO_LARGE` (the first line of the page
/// alone passes `max_bytes`), `TIMEOUT` (deadline passed or cancelled),
/// `INTERNAL_ERROR` on I/O failure.
pub fn read_page(
    file: &File,
    shown: &dyn Display,
    start_line: u64,
    max_lines: u64,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<TextPage, FsError> {
    let io_error = |e: std::io::Error| {
        if is_deadline_stop(&e) {
            return deadline.error(&format_args!("reading {shown}"));
        }
        FsError::new(ErrorCode::InternalError, format!("{shown} could not be read."))
            .with_detail(e.to_string())
    };
    let binary = || {
        FsError::new(
            ErrorCode::BinaryFile,
            format!("{shown} contains NUL bytes and is treated as binary."),
        )
    };
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);

    let mut head = [0u8; BINARY_SAMPLE_BYTES];
    let head_len = read_head(file, &mut head).map_err(io_error)?;
    if memchr::memchr(0, &head[..head_len]).is_some() {
        return Err(binary());
    }

    // Read from the start whatever the handle's offset (the head was read
    // positionally).
    let mut handle = file;
    handle.seek(SeekFrom::Start(0)).map_err(io_error)?;
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, DeadlineReader::new(file, deadline));
    if head[..head_len].starts_with(BOM) {
        skip_bytes(&mut reader, BOM.len()).map_err(io_error)?;
    }
    let at_eof = skip_lines(&mut reader, start_line.saturating_sub(1)).map_err(io_error)?;

    let mut content: Vec<u8> = Vec::new();
    let mut returned: u64 = 0;
    let mut line: Vec<u8> = Vec::new();
    let mut cut_by_bytes = false;
    if !at_eof {
        while returned < max_lines {
            line.clear();
            let budget = max_bytes - content.len();
            let outcome = read_line_within(&mut reader, &mut line, budget).map_err(io_error)?;
            if outcome == LineRead::Eof {
                break;
            }
            if outcome == LineRead::OverBudget {
                if content.is_empty() {
                    return Err(FsError::new(
                        ErrorCode::LineTooLarge,
                        format!(
                            "line {} of {shown} is larger than the {max_bytes}-byte read limit.",
                            start_line + returned
                        ),
                    ));
                }
                cut_by_bytes = true;
                break;
            }
            if memchr::memchr(0, &line).is_some() {
                return Err(binary());
            }
            content.extend_from_slice(&line);
            returned += 1;
        }
    }
    let has_more = cut_by_bytes || (!at_eof && !reader.fill_buf().map_err(io_error)?.is_empty());
    let content = String::from_utf8(content).map_err(|_| {
        FsError::new(
            ErrorCode::UnsupportedTextEncoding,
            format!("{shown} is not valid UTF-8; only UTF-8 text files can be read."),
        )
    })?;
    let end_line = (returned > 0).then(|| start_line + returned - 1);
    Ok(TextPage {
        start_line,
        end_line,
        content,
        has_more,
        next_start_line: has_more.then_some(start_line + returned),
    })
}

/// The whole file as one text, for resource reads: no line cap, and a file
/// over `max_bytes` is `READ_LIMIT_EXCEEDED`.
///
/// # Errors
/// As [`read_page`], with `LINE_TOO_LARGE` reported as `READ_LIMIT_EXCEEDED`.
pub fn read_whole(
    file: &File,
    size: u64,
    shown: &dyn Display,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<String, FsError> {
    let too_large = || {
        FsError::new(
            ErrorCode::ReadLimitExceeded,
            format!(
                "{shown} is larger than the {max_bytes}-byte read limit; use read_text_file to page through it."
            ),
        )
    };
    // The BOM is not content, so a file may exceed the cap by its length.
    if size > max_bytes + BOM.len() as u64 {
        return Err(too_large());
    }
    match read_page(file, shown, 1, u64::MAX, max_bytes, deadline) {
        Ok(page) if page.has_more => Err(too_large()),
        Ok(page) => Ok(page.content),
        Err(e) if e.code() == ErrorCode::LineTooLarge => Err(too_large()),
        Err(e) => Err(e),
    }
}

fn read_head(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn skip_bytes(reader: &mut impl BufRead, mut n: usize) -> std::io::Result<()> {
    while n > 0 {
        let available = reader.fill_buf()?.len();
        if available == 0 {
            break;
        }
        let take = available.min(n);
        reader.consume(take);
        n -= take;
    }
    Ok(())
}

/// Skips `lines` lines without storing them; true if EOF came first.
fn skip_lines(reader: &mut impl BufRead, mut lines: u64) -> std::io::Result<bool> {
    while lines > 0 {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(true);
        }
        let mut consumed = buf.len();
        for pos in memchr::memchr_iter(b'\n', buf) {
            lines -= 1;
            if lines == 0 {
                consumed = pos + 1;
                break;
            }
        }
        reader.consume(consumed);
    }
    Ok(reader.fill_buf()?.is_empty())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineRead {
    Eof,
    Line,
    OverBudget,
}

/// Reads one line (with its `\n`) into `line`, storing at most `budget`
/// bytes of it.
fn read_line_within(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    budget: usize,
) -> std::io::Result<LineRead> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { LineRead::Eof } else { LineRead::Line });
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(pos) => (&buf[..=pos], true),
            None => (buf, false),
        };
        if line.len() + chunk.len() > budget {
            return Ok(LineRead::OverBudget);
        }
        line.extend_from_slice(chunk);
        let n = chunk.len();
        reader.consume(n);
        if done {
            return Ok(LineRead::Line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn page(bytes: &[u8], start: u64, lines: u64, cap: u64) -> Result<TextPage, ErrorCode> {
        read_page(&file_with(bytes), &"w:/f", start, lines, cap, &Deadline::never())
            .map_err(|e| e.code())
    }

    #[test]
    fn pages_and_terminators() {
        let p = page(b"a\r\nb\nc", 1, 2, 100).unwrap();
        assert_eq!(p.content, "a\r\nb\n");
        assert_eq!((p.end_line, p.has_more, p.next_start_line), (Some(2), true, Some(3)));
        let p = page(b"a\r\nb\nc", 3, 2, 100).unwrap();
        assert_eq!(p.content, "c");
        assert_eq!((p.end_line, p.has_more, p.next_start_line), (Some(3), false, None));
    }

    #[test]
    fn page_ending_exactly_at_eof_has_no_more() {
        let p = page(b"a\nb\n", 1, 2, 100).unwrap();
        assert_eq!((p.has_more, p.next_start_line), (false, None));
    }

    #[test]
    fn empty_and_past_eof() {
        for (bytes, start) in [(&b""[..], 1), (b"a\n", 2), (b"a\nb", 9)] {
            let p = page(bytes, start, 5, 100).unwrap();
            assert_eq!(p.content, "");
            assert_eq!((p.end_line, p.has_more, p.next_start_line), (None, false, None));
        }
    }

    #[test]
    fn byte_cap_rules() {
        // a line equal to the cap comes alone
        let p = page(b"abcd\nef\n", 1, 10, 5).unwrap();
        assert_eq!((p.content.as_str(), p.has_more, p.next_start_line), ("abcd\n", true, Some(2)));
        // the page may total exactly the cap
        let p = page(b"ab\ncd\nef\n", 1, 10, 6).unwrap();
        assert_eq!((p.content.as_str(), p.next_start_line), ("ab\ncd\n", Some(3)));
        // a first line over the cap
        assert_eq!(page(b"abcdef\n", 1, 10, 5), Err(ErrorCode::LineTooLarge));
        assert_eq!(page(b"ok\nabcdefgh\n", 2, 10, 5), Err(ErrorCode::LineTooLarge));
    }

    #[test]
    fn bom_is_dropped_and_not_counted() {
        let p = page(b"\xEF\xBB\xBFhi\n", 1, 10, 3).unwrap();
        assert_eq!(p.content, "hi\n");
    }

    #[test]
    fn binary_and_encoding() {
        assert_eq!(page(b"a\0b", 1, 10, 100), Err(ErrorCode::BinaryFile));
        let mut late_nul = vec![b'x'; 9000];
        late_nul.extend_from_slice(b"\n\0\n");
        assert_eq!(page(&late_nul, 2, 10, 100_000), Err(ErrorCode::BinaryFile));
        assert!(page(&late_nul, 1, 1, 100_000).is_ok());
        assert_eq!(page(b"caf\xE9\n", 1, 10, 100), Err(ErrorCode::UnsupportedTextEncoding));
        // UTF-16 with BOM has NULs
        assert_eq!(page(b"\xFF\xFEa\0b\0", 1, 10, 100), Err(ErrorCode::BinaryFile));
        assert_eq!(page("中文\n行\n".as_bytes(), 2, 1, 100).unwrap().content, "行\n");
    }

    #[test]
    fn long_skips_stream() {
        let mut big = Vec::new();
        for i in 0..200_000 {
            big.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let p = page(&big, 150_001, 2, 1000).unwrap();
        assert_eq!(p.content, "line 150000\nline 150001\n");
    }

    #[test]
    fn whole_file_cap() {
        let f = file_with(b"abc\ndef\n");
        let never = Deadline::never();
        assert_eq!(read_whole(&f, 8, &"w:/f", 8, &never).unwrap(), "abc\ndef\n");
        let err = read_whole(&f, 8, &"w:/f", 7, &never).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ReadLimitExceeded);
        let f = file_with(b"abcdefgh");
        let err = read_whole(&f, 8, &"w:/f", 7, &never).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ReadLimitExceeded);
    }

    #[test]
    fn a_passed_deadline_or_a_cancel_stops_the_read() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let f = file_with(&b"line\n".repeat(100_000));
        let late = Deadline::new(std::time::Duration::ZERO, Arc::new(AtomicBool::new(false)));
        let err = read_page(&f, &"w:/f", 90_000, 2, 100, &late).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
        assert!(err.message().contains("w:/f"), "{}", err.message());
        let cancelled =
            Deadline::new(std::time::Duration::from_secs(60), Arc::new(AtomicBool::new(true)));
        let err = read_whole(&f, 500_000, &"w:/f", 1 << 20, &cancelled).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
    }
}
