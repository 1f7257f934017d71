//! Streaming text pages (read_text_file: the byte cap, tail reads).
//!
//! A page's first line is named from the start or from the end:
//! - `start_line ≥ 1` counts from the start (1 is the first line). The file
//!   is read forward through a fixed buffer; lines before `start_line` are
//!   counted, not stored.
//! - `start_line ≤ -1` counts from the end (-1 is the last line), like
//!   `tail -n`. The file is read backwards from its end in fixed-size
//!   positional blocks, only as far back as the start of that line, so the
//!   cost is that of the last `-start_line` lines whatever the file's size;
//!   then the page is read forward from there by the same code as the first
//!   mode. Lines appended while the call runs are not part of its file (the
//!   end is the size when the call started), so positions stay consistent.
//!   A `start_line` before the first line starts the page at the first line
//!   (as `tail -n 1000` of a 10-line file prints 10 lines), and the page's
//!   `start_line` then says where it really starts: `-(number of lines)`.
//!   All positions in such a page are negative, and `next_start_line`
//!   continues forward towards -1.
//!
//! In both modes a line ends after `\n` (a `\r` before it belongs to the
//! terminator and is returned); a final `\n` ends the last line and starts
//! no empty one, so `a\nb` and `a\nb\n` both have two lines. A UTF-8 BOM at
//! the file's start is not content: neither returned nor counted. A page
//! holds at most `max_lines` lines and `max_bytes` bytes: it may total
//! exactly `max_bytes`; it is cut before the first line that would pass the
//! cap (`has_more`, `next_start_line` at that line), so the lines kept are
//! always those from `start_line` on; a first line alone over the cap is
//! `LINE_TOO_LARGE`.
//!
//! Guarantees: the file is never loaded whole; memory is bounded by
//! `max_bytes` plus one block, whatever the file's size or line length. The
//! call's [`Deadline`] is checked before every block read in either
//! direction, so a read that skips millions of lines stops when its client
//! cancels or its deadline passes (`TIMEOUT`). Content is returned
//! byte-exact (terminators kept, never lossy): UTF-8 or an error. NUL bytes
//! in the file's first 8 KiB or in the page make it `BINARY_FILE`.

use std::fmt::Display;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::num::NonZeroI64;
use std::os::unix::fs::FileExt;

use crate::deadline::{Deadline, DeadlineReader, is_deadline_stop};
use crate::error::{ErrorCode, FsError};

/// How much of the file head is sampled for NUL bytes.
pub const BINARY_SAMPLE_BYTES: usize = 8 * 1024;
/// The forward buffer and the backward block.
const BLOCK_BYTES: usize = 64 * 1024;
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Line 1, where pages start by default.
pub const FIRST_LINE: NonZeroI64 = NonZeroI64::new(1).unwrap();

/// One page of lines. Positions are 1-based from the start, or negative
/// from the end (-1 = last line) when the page was asked from the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextPage {
    /// First line of the page: the one asked for, except that a position
    /// from the end before the first line becomes the first line's.
    pub start_line: i64,
    /// Last line returned; `None` for an empty page.
    pub end_line: Option<i64>,
    /// The lines, terminators kept.
    pub content: String,
    /// More lines follow `end_line`.
    pub has_more: bool,
    /// Where the next page starts, when `has_more`.
    pub next_start_line: Option<i64>,
}

/// Reads the page of `file` that starts at `start_line` (positive: from the
/// start; negative: from the end, see the module docs): at most `max_lines`
/// lines and at most `max_bytes` bytes of content. `shown` names the file in
/// errors.
///
/// # Errors
/// `BINARY_FILE` (NUL in the first 8 KiB or in the page),
/// `UNSUPPORTED_TEXT_ENCODING`, `LINE_TOO_LARGE` (the first line of the page
/// alone passes `max_bytes`), `TIMEOUT` (deadline passed or cancelled),
/// `INTERNAL_ERROR` on I/O failure.
pub fn read_page(
    file: &File,
    shown: &dyn Display,
    start_line: NonZeroI64,
    max_lines: u64,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<TextPage, FsError> {
    read_page_in_blocks(file, shown, start_line, max_lines, max_bytes, deadline, BLOCK_BYTES)
}

/// [`read_page`] with the buffer and block size as a parameter, so tests
/// can make lines straddle many blocks.
fn read_page_in_blocks(
    file: &File,
    shown: &dyn Display,
    start_line: NonZeroI64,
    max_lines: u64,
    max_bytes: u64,
    deadline: &Deadline,
    block: usize,
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
    let content_start = if head[..head_len].starts_with(BOM) { BOM.len() as u64 } else { 0 };

    // Position the reader at the page's first line, whatever the handle's
    // offset was (the head was read positionally).
    let mut handle = file;
    let start_line = start_line.get();
    let (first_line, mut reader) = if start_line > 0 {
        handle.seek(SeekFrom::Start(content_start)).map_err(io_error)?;
        // Forward reads follow the file as it is while they run: no end.
        let mut reader =
            BufReader::with_capacity(block, DeadlineReader::new(handle.take(u64::MAX), deadline));
        skip_lines(&mut reader, start_line.unsigned_abs() - 1).map_err(io_error)?;
        (start_line, reader)
    } else {
        let size = file.metadata().map_err(io_error)?.len();
        let (offset, first_line) =
            find_tail_start(file, content_start, size, start_line, block, deadline)
                .map_err(io_error)?;
        handle.seek(SeekFrom::Start(offset)).map_err(io_error)?;
        let rest = handle.take(size.saturating_sub(offset));
        (first_line, BufReader::with_capacity(block, DeadlineReader::new(rest, deadline)))
    };

    let mut content: Vec<u8> = Vec::new();
    let mut returned: u64 = 0;
    let mut line: Vec<u8> = Vec::new();
    let mut cut_by_bytes = false;
    while returned < max_lines {
        line.clear();
        let budget = max_bytes - content.len();
        match read_line_within(&mut reader, &mut line, budget).map_err(io_error)? {
            LineRead::Eof => break,
            LineRead::OverBudget if content.is_empty() => {
                return Err(FsError::new(
                    ErrorCode::LineTooLarge,
                    format!(
                        "line {} of {shown} is larger than the {max_bytes}-byte read limit.",
                        first_line.saturating_add_unsigned(returned)
                    ),
                ));
            }
            LineRead::OverBudget => {
                cut_by_bytes = true;
                break;
            }
            LineRead::Line => {}
        }
        if memchr::memchr(0, &line).is_some() {
            return Err(binary());
        }
        content.extend_from_slice(&line);
        returned += 1;
    }
    let has_more = cut_by_bytes || !reader.fill_buf().map_err(io_error)?.is_empty();
    let content = String::from_utf8(content).map_err(|_| {
        FsError::new(
            ErrorCode::UnsupportedTextEncoding,
            format!("{shown} is not valid UTF-8; only UTF-8 text files can be read."),
        )
    })?;
    let next_line = first_line.saturating_add_unsigned(returned);
    Ok(TextPage {
        start_line: first_line,
        end_line: (returned > 0).then(|| next_line - 1),
        content,
        has_more,
        next_start_line: has_more.then_some(next_line),
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
    match read_page(file, shown, FIRST_LINE, u64::MAX, max_bytes, deadline) {
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

/// Where the line at `start_line` (negative: -1 is the last line) of the
/// content `[content_start, size)` begins, and its position: reads `block`
/// bytes at a time backwards from `size`, only until that line's start is
/// found, checking the deadline before each block. Fewer lines than asked:
/// the first line, at `-(number of lines)` (an empty content keeps
/// `start_line`).
fn find_tail_start(
    file: &File,
    content_start: u64,
    size: u64,
    start_line: i64,
    block: usize,
    deadline: &Deadline,
) -> std::io::Result<(u64, i64)> {
    let mut buf = vec![0u8; block];
    // Position of the line that begins after the latest `\n` seen.
    let mut position: i64 = 0;
    let mut end = size;
    while end > content_start {
        deadline.check_io()?;
        let len = usize::try_from(end - content_start).map_or(block, |n| n.min(block));
        let begin = end - len as u64;
        file.read_exact_at(&mut buf[..len], begin)?;
        let mut scan = &buf[..len];
        if end == size {
            // A final `\n` ends the last line; it does not start another.
            scan = scan.strip_suffix(b"\n").unwrap_or(scan);
        }
        for at in memchr::memrchr_iter(b'\n', scan) {
            position -= 1;
            if position == start_line {
                return Ok((begin + at as u64 + 1, start_line));
            }
        }
        end = begin;
    }
    let first_line = if size > content_start { position - 1 } else { start_line };
    Ok((content_start, first_line))
}

/// Skips `lines` lines without storing them.
fn skip_lines(reader: &mut impl BufRead, mut lines: u64) -> std::io::Result<()> {
    while lines > 0 {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
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
    Ok(())
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

    fn at(line: i64) -> NonZeroI64 {
        NonZeroI64::new(line).unwrap()
    }

    fn page_in(
        file: &File,
        start: i64,
        lines: u64,
        cap: u64,
        block: usize,
    ) -> Result<TextPage, ErrorCode> {
        read_page_in_blocks(file, &"w:/f", at(start), lines, cap, &Deadline::never(), block)
            .map_err(|e| e.code())
    }

    fn page(bytes: &[u8], start: i64, lines: u64, cap: u64) -> Result<TextPage, ErrorCode> {
        page_in(&file_with(bytes), start, lines, cap, BLOCK_BYTES)
    }

    /// (content, start_line, end_line, has_more, next_start_line)
    fn summary(p: TextPage) -> (String, i64, Option<i64>, bool, Option<i64>) {
        (p.content, p.start_line, p.end_line, p.has_more, p.next_start_line)
    }

    fn tail(bytes: &[u8], start: i64, lines: u64) -> (String, i64, Option<i64>, bool, Option<i64>) {
        summary(page(bytes, start, lines, 1000).unwrap())
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
        let err = read_page(&f, &"w:/f", at(90_000), 2, 100, &late).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
        assert!(err.message().contains("w:/f"), "{}", err.message());
        let cancelled =
            Deadline::new(std::time::Duration::from_secs(60), Arc::new(AtomicBool::new(true)));
        let err = read_whole(&f, 500_000, &"w:/f", 1 << 20, &cancelled).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
        // Tail reads check it before every backward block.
        let err = read_page(&f, &"w:/f", at(-90_000), 2, 100, &late).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
        let err = read_page(&f, &"w:/f", at(-1), 2, 100, &cancelled).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
    }

    fn s(text: &str) -> String {
        text.to_owned()
    }

    #[test]
    fn tail_with_and_without_final_newline() {
        // A final `\n` does not start an extra empty line (as `tail -n`).
        for (bytes, last) in [(&b"a\nb\nc\n"[..], "c\n"), (b"a\nb\nc", "c")] {
            assert_eq!(tail(bytes, -1, 1), (s(last), -1, Some(-1), false, None));
            assert_eq!(tail(bytes, -2, 1), (s("b\n"), -2, Some(-2), true, Some(-1)));
            assert_eq!(tail(bytes, -3, 200), (format!("a\nb\n{last}"), -3, Some(-1), false, None));
        }
        // Empty lines are lines.
        assert_eq!(tail(b"a\n\n\n", -2, 5), (s("\n\n"), -2, Some(-1), false, None));
        assert_eq!(tail(b"\n", -1, 5), (s("\n"), -1, Some(-1), false, None));
    }

    #[test]
    fn tail_keeps_crlf_terminators() {
        assert_eq!(tail(b"a\r\nb\r\n", -1, 1), (s("b\r\n"), -1, Some(-1), false, None));
        assert_eq!(tail(b"a\r\nb\r\nc\r", -2, 9), (s("b\r\nc\r"), -2, Some(-1), false, None));
        // A lone `\r` ends no line.
        assert_eq!(tail(b"a\rb\n", -1, 1), (s("a\rb\n"), -1, Some(-1), false, None));
    }

    #[test]
    fn tail_of_a_single_line_and_before_the_first_line() {
        for bytes in [&b"only"[..], b"only\n"] {
            let text = String::from_utf8(bytes.to_vec()).unwrap();
            assert_eq!(tail(bytes, -1, 1), (text.clone(), -1, Some(-1), false, None));
            // Before the first line: the page starts at the first line.
            assert_eq!(tail(bytes, -1000, 200), (text, -1, Some(-1), false, None));
        }
        let ten: String = (1..=10).map(|i| format!("{i}\n")).collect();
        assert_eq!(tail(ten.as_bytes(), -1000, 3), (s("1\n2\n3\n"), -10, Some(-8), true, Some(-7)));
        assert_eq!(tail(ten.as_bytes(), i64::MIN, 500), (ten.clone(), -10, Some(-1), false, None));
    }

    #[test]
    fn tail_of_an_empty_file() {
        for bytes in [&b""[..], BOM] {
            assert_eq!(tail(bytes, -1, 5), (s(""), -1, None, false, None));
            assert_eq!(tail(bytes, -200, 200), (s(""), -200, None, false, None));
        }
    }

    #[test]
    fn tail_drops_the_bom() {
        let bytes = b"\xEF\xBB\xBFa\nb\n";
        assert_eq!(tail(bytes, -5, 5), (s("a\nb\n"), -2, Some(-1), false, None));
        // The BOM does not count against the cap either.
        assert_eq!(page(bytes, -2, 5, 4).unwrap().content, "a\nb\n");
        assert_eq!(tail(b"\xEF\xBB\xBFonly", -1, 1).0, "only");
    }

    #[test]
    fn tail_pages_continue_to_the_last_line() {
        let text: String = (1..=23).map(|i| format!("line {i}\n")).collect();
        let f = file_with(text.as_bytes());
        for block in [1, 5, 64, BLOCK_BYTES] {
            let (mut start, mut joined, mut pages) = (-20, String::new(), 0);
            loop {
                let p = page_in(&f, start, 6, 1000, block).unwrap();
                assert_eq!(p.start_line, start);
                pages += 1;
                joined += &p.content;
                if !p.has_more {
                    assert_eq!((p.end_line, p.next_start_line), (Some(-1), None));
                    break;
                }
                assert_eq!(p.next_start_line, Some(p.end_line.unwrap() + 1));
                start = p.next_start_line.unwrap();
            }
            assert_eq!(pages, 4);
            let want: String = (4..=23).map(|i| format!("line {i}\n")).collect();
            assert_eq!(joined, want, "block {block}");
        }
    }

    #[test]
    fn tail_byte_cap_keeps_the_lines_from_start_line() {
        let bytes = b"aa\nbb\ncc\n";
        // The page may total exactly the cap; the cut keeps the first lines.
        assert_eq!(
            summary(page(bytes, -3, 10, 6).unwrap()),
            (s("aa\nbb\n"), -3, Some(-2), true, Some(-1))
        );
        // A line equal to the cap comes alone.
        assert_eq!(
            summary(page(bytes, -3, 10, 3).unwrap()),
            (s("aa\n"), -3, Some(-3), true, Some(-2))
        );
        assert_eq!(page(bytes, -1, 10, 2), Err(ErrorCode::LineTooLarge));
        let err = read_page(&file_with(b"abcdef\nx\n"), &"w:/f", at(-2), 5, 5, &Deadline::never())
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::LineTooLarge);
        assert!(err.message().starts_with("line -2 of w:/f"), "{}", err.message());
    }

    #[test]
    fn tail_binary_and_encoding() {
        // NUL in the first 8 KiB, far from the tail.
        let mut head_nul = b"\0\n".to_vec();
        head_nul.extend_from_slice(&b"text\n".repeat(5000));
        assert_eq!(page(&head_nul, -1, 1, 100), Err(ErrorCode::BinaryFile));
        // NUL in the returned range only.
        let mut late_nul = b"x\n".repeat(5000);
        late_nul.extend_from_slice(b"\0\nend\n");
        assert_eq!(page(&late_nul, -2, 1, 100), Err(ErrorCode::BinaryFile));
        assert_eq!(page(&late_nul, -1, 1, 100).unwrap().content, "end\n");
        // Invalid UTF-8 in the range; a page before it is fine.
        assert_eq!(page(b"ok\ncaf\xE9\n", -1, 1, 100), Err(ErrorCode::UnsupportedTextEncoding));
        assert_eq!(page(b"ok\ncaf\xE9\n", -2, 1, 100).unwrap().content, "ok\n");
        assert_eq!(page("中文\n行\n".as_bytes(), -1, 1, 100).unwrap().content, "行\n");
        assert_eq!(page(b"\xFF\xFEa\0b\0", -1, 1, 100), Err(ErrorCode::BinaryFile));
    }

    #[test]
    fn tail_across_many_blocks() {
        // Lines of varied length, most straddling block boundaries.
        let lines: Vec<String> =
            (0..3000).map(|i| format!("{i} {}\n", "x".repeat(i % 37))).collect();
        let f = file_with(lines.concat().as_bytes());
        for block in [16, 100, 4096, BLOCK_BYTES] {
            let p = page_in(&f, -200, 200, 1 << 20, block).unwrap();
            assert_eq!(p.content, lines[2800..].concat(), "block {block}");
            assert_eq!((p.end_line, p.has_more), (Some(-1), false));
            let p = page_in(&f, -2999, 3, 1 << 20, block).unwrap();
            assert_eq!(p.content, lines[1..4].concat());
            assert_eq!(p.next_start_line, Some(-2996));
        }
    }

    #[test]
    fn tail_reads_only_the_end() {
        // A terabyte-long hole of NULs (sparse: no disk used) between a text
        // head longer than the binary sample and a text tail: the tail page is
        // found without reading (or rejecting) the middle.
        let mut f = file_with(&b"head\n".repeat(BINARY_SAMPLE_BYTES));
        f.set_len(1 << 40).unwrap();
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(b"\nlast but one\nlast\n").unwrap();
        let p = read_page(&f, &"w:/f", at(-2), 2, 1000, &Deadline::never()).unwrap();
        assert_eq!(
            (p.content.as_str(), p.end_line, p.has_more),
            ("last but one\nlast\n", Some(-1), false)
        );
    }

    /// The lines of `bytes` as `tail -n`/`head -n` see them, cut as the
    /// byte cap rules say: the model every page must equal.
    fn naive(bytes: &[u8], start: i64, max_lines: u64, cap: usize) -> Result<TextPage, ErrorCode> {
        let body = bytes.strip_prefix(BOM).unwrap_or(bytes);
        let lines: Vec<&[u8]> = body.split_inclusive(|b| *b == b'\n').collect();
        let n = i64::try_from(lines.len()).unwrap();
        let first = if start < 0 && n > 0 { start.max(-n) } else { start };
        let index =
            usize::try_from(if first > 0 { first - 1 } else { (n + first).max(0) }).unwrap();
        let (mut content, mut taken) = (Vec::new(), 0);
        for line in lines.iter().skip(index).take(usize::try_from(max_lines).unwrap()) {
            if content.len() + line.len() > cap {
                if taken == 0 {
                    return Err(ErrorCode::LineTooLarge);
                }
                break;
            }
            content.extend_from_slice(line);
            taken += 1;
        }
        let has_more = index + taken < lines.len();
        let next = first + i64::try_from(taken).unwrap();
        Ok(TextPage {
            start_line: first,
            end_line: (taken > 0).then_some(next - 1),
            content: String::from_utf8(content).unwrap(),
            has_more,
            next_start_line: has_more.then_some(next),
        })
    }

    #[test]
    fn every_page_of_random_files_matches_the_naive_model() {
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % below as u64).unwrap()
        };
        let pieces: [&[u8]; 6] = [b"a", b"bc", "é".as_bytes(), b"\n", b"\r\n", b"\r"];
        for _ in 0..300 {
            let mut bytes = if next(4) == 0 { BOM.to_vec() } else { Vec::new() };
            for _ in 0..next(25) {
                bytes.extend_from_slice(pieces[next(pieces.len())]);
            }
            let f = file_with(&bytes);
            let body = bytes.strip_prefix(BOM).unwrap_or(&bytes);
            let n = i64::try_from(body.split_inclusive(|b| *b == b'\n').count()).unwrap();
            for start in (-n - 1..=n + 1).filter(|s| *s != 0) {
                for max_lines in 1..=u64::try_from(n).unwrap() + 1 {
                    for (block, cap) in [(1, 1000), (3, 5), (7, 2), (BLOCK_BYTES, 4)] {
                        let got = page_in(&f, start, max_lines, cap, block);
                        let want = naive(&bytes, start, max_lines, usize::try_from(cap).unwrap());
                        assert_eq!(
                            got, want,
                            "{bytes:?} start {start} max {max_lines} cap {cap} block {block}"
                        );
                    }
                }
            }
        }
    }
}
