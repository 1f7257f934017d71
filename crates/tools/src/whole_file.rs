//! The whole-file reads serverfs-dev publishes beside the shared tools:
//! read_file (whole lines of a UTF-8 file of at most the file cap, cut at
//! [`READ_FILE_MAX_CHARS`] characters, or an image for the model to see)
//! and stat_file with the file's SHA-256; their argument and result types
//! and the text a model reads of them. serverfs-mcp does not publish them.
//!
//! Guarantees: every path is located in the root by its resolver; a file
//! that grows while it is read is never read past its cap; every read
//! stops at the call's deadline.

use std::fmt::Write as _;

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::render::shown_path;
use serverfs_core::{Deadline, ErrorCode, FsError, Location, Reported, Root, ToText, text};

use crate::ReadTools;
use crate::schema::{StatFileArgs, StatFileResult};

/// Most characters (Unicode scalar values) one read_file returns.
pub const READ_FILE_MAX_CHARS: usize = 16_000;

impl ReadTools {
    /// read_file: lines `start_line..=end_line` (from 1) of a UTF-8 file of
    /// at most `max_file_bytes`, original line endings kept, at most
    /// [`READ_FILE_MAX_CHARS`] characters; an image is shown whole.
    pub fn read_file(
        &self,
        root: &Root,
        args: &ReadFileArgs,
        max_file_bytes: u64,
        deadline: &Deadline,
    ) -> Result<ReadFileResult, FsError> {
        let start_line = args.start_line.unwrap_or(1);
        if let Some(end) = args.end_line
            && end < start_line
        {
            return Err(FsError::invalid(format!(
                "end_line ({end}) is before start_line ({start_line})."
            )));
        }
        let loc = root.locate(&args.path)?;
        let (file, meta) = root.open_file(&loc)?;
        if let Some(mime_type) = image_type(&file) {
            return read_image(&file, meta.size, &loc, mime_type, deadline);
        }
        let text = text::read_whole(&file, meta.size, &loc, max_file_bytes, deadline).map_err(
            |e| match e.code() {
                ErrorCode::BinaryFile => FsError::new(
                    ErrorCode::BinaryFile,
                    format!("{} Move binary files with file_link (over HTTP).", e.message()),
                ),
                ErrorCode::ReadLimitExceeded => FsError::new(
                    ErrorCode::ReadLimitExceeded,
                    format!(
                        "{loc} is larger than read_file reads (at most {max_file_bytes} bytes, \
                         SERVERFS_MAX_FILE_BYTES / --max-file-bytes). Page through it with \
                         read_text_file, search it with search_text, or read it with bash \
                         (sed -n, head) or file_link (over HTTP)."
                    ),
                ),
                _ => e,
            },
        )?;
        select_lines(&text, loc.path().as_relative(), start_line, args.end_line)
    }

    /// stat_file, and with `sha256` the file's SHA-256: a regular file of
    /// at most `max_file_bytes`, read within the call's deadline.
    pub fn stat_hashed(
        &self,
        root: &Root,
        args: &StatArgs,
        max_file_bytes: u64,
        deadline: &Deadline,
    ) -> Result<StatResult, FsError> {
        let loc = root.locate(&args.stat.path)?;
        let stat = self.stat_file(root, &loc)?;
        let sha256 = match args.sha256 {
            Some(true) => Some(sha256(root, &loc, max_file_bytes, deadline)?),
            _ => None,
        };
        Ok(StatResult { stat, sha256 })
    }
}

/// The SHA-256 of the file at `loc`, hex.
fn sha256(
    root: &Root,
    loc: &Location<'_>,
    max_file_bytes: u64,
    deadline: &Deadline,
) -> Result<String, FsError> {
    use sha2::Digest;
    use std::os::unix::fs::FileExt;
    let (file, meta) = root.open_file(loc)?;
    let too_large = |size: u64| {
        FsError::new(
            ErrorCode::ReadLimitExceeded,
            format!(
                "{loc} is {size} bytes; sha256 is computed for files of at most {max_file_bytes} \
                 bytes (SERVERFS_MAX_FILE_BYTES / --max-file-bytes). Run sha256sum with bash for a \
                 larger one."
            ),
        )
    };
    if meta.size > max_file_bytes {
        return Err(too_large(meta.size));
    }
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0u64;
    loop {
        deadline.check().map_err(|_| deadline.error(loc))?;
        let n = file.read_at(&mut buf, read).map_err(|e| {
            FsError::new(ErrorCode::InternalError, "the file could not be read.")
                .with_detail(e.to_string())
        })?;
        if n == 0 {
            break;
        }
        read += n as u64;
        // A file that grows while it is read: never past the cap.
        if read > max_file_bytes {
            return Err(too_large(read));
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Largest image read_file shows (4 MiB; about 5.3 MiB as base64, under
/// what model APIs take per image).
pub const IMAGE_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The MIME type of an image read_file shows, from the file's first bytes
/// (its name says nothing reliable): PNG, JPEG, GIF or WebP.
fn image_type(file: &std::fs::File) -> Option<&'static str> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 12];
    let n = file.read_at(&mut head, 0).ok()?;
    let head = &head[..n];
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() == 12 && head.starts_with(b"RIFF") && &head[8..] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// A whole image of at most [`IMAGE_MAX_BYTES`], for the model to see.
fn read_image(
    file: &std::fs::File,
    size: u64,
    loc: &Location<'_>,
    mime_type: &'static str,
    deadline: &Deadline,
) -> Result<ReadFileResult, FsError> {
    use std::io::Read;
    let too_large = |size: u64| {
        FsError::new(
            ErrorCode::ReadLimitExceeded,
            format!(
                "{loc} is a {mime_type} image of {size} bytes; read_file shows images up to {IMAGE_MAX_BYTES} bytes. Move it with file_link (over HTTP)."
            ),
        )
    };
    if size > IMAGE_MAX_BYTES {
        return Err(too_large(size));
    }
    deadline.check().map_err(|_| deadline.error(loc))?;
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // The file may grow while it is read: never past the cap.
    file.take(IMAGE_MAX_BYTES + 1).read_to_end(&mut data).map_err(|e| {
        FsError::new(ErrorCode::InternalError, "the image could not be read.")
            .with_detail(e.to_string())
    })?;
    if data.len() as u64 > IMAGE_MAX_BYTES {
        return Err(too_large(data.len() as u64));
    }
    Ok(ReadFileResult {
        path: loc.path().as_relative(),
        start_line: 1,
        end_line: 0,
        total_lines: 0,
        truncated: false,
        content: String::new(),
        image: Some(ImageInfo {
            mime_type: mime_type.to_owned(),
            size: data.len() as u64,
            data: base64::engine::general_purpose::STANDARD.encode(&data),
        }),
    })
}

/// Lines `start..=end` of `text` (from 1; `end` past the last line means
/// the last line), cut to [`READ_FILE_MAX_CHARS`] characters at a line end
/// when at least one whole line fits.
fn select_lines(
    text: &str,
    path: String,
    start_line: u64,
    end_line: Option<u64>,
) -> Result<ReadFileResult, FsError> {
    let total_lines = text.split_inclusive('\n').count() as u64;
    if let Some(end) = end_line
        && end < start_line
    {
        return Err(FsError::invalid(format!(
            "start_line, end_line: end_line ({end}) is before start_line ({start_line})."
        )));
    }
    if start_line > total_lines.max(1) {
        return Err(FsError::invalid(format!(
            "start_line ({start_line}) is past the end of the file ({total_lines} lines)."
        )));
    }
    let last = end_line.map_or(total_lines, |end| end.min(total_lines));
    let mut content = String::new();
    let mut chars = 0usize;
    let mut end = start_line.saturating_sub(1);
    let mut truncated = false;
    let wanted = text.split_inclusive('\n').skip((start_line - 1) as usize);
    for line in wanted.take(last.saturating_sub(start_line - 1) as usize) {
        let n = line.chars().count();
        if chars + n > READ_FILE_MAX_CHARS {
            truncated = true;
            if content.is_empty() {
                // One line longer than the cap: its head, never a split
                // character.
                content.extend(line.chars().take(READ_FILE_MAX_CHARS));
                end += 1;
            }
            break;
        }
        content.push_str(line);
        chars += n;
        end += 1;
    }
    Ok(ReadFileResult {
        path,
        start_line,
        end_line: end,
        total_lines,
        truncated,
        content,
        image: None,
    })
}

/// Arguments of serverfs-dev's stat_file: the shared tool's, and the
/// hash (serverfs-mcp stays without it).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatArgs {
    /// The shared tool's arguments.
    #[serde(flatten)]
    pub stat: StatFileArgs,
    /// Also give the file's SHA-256 (regular files up to the file cap).
    // The schema's description is empty: the name says it, and a model
    // reads every byte on every turn.
    #[schemars(description = "")]
    #[serde(default)]
    pub sha256: Option<bool>,
}

/// serverfs-dev's stat_file result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatResult {
    /// The shared tool's result.
    #[serde(flatten)]
    pub stat: StatFileResult,
    /// SHA-256 of the file's bytes, hex, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl Reported for StatResult {}

/// Arguments of read_file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File path relative to the project root.
    #[schemars(description = "")]
    pub path: String,
    /// First line (default 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line, inclusive (default the last).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
}

/// Result of read_file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadFileResult {
    /// The path read, relative to the project root.
    pub path: String,
    /// First line returned (from 1).
    pub start_line: u64,
    /// Last line returned, inclusive (start_line - 1 when none was).
    pub end_line: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether the content stops before end_line (16,000-character cap):
    /// continue at end_line + 1.
    pub truncated: bool,
    /// The lines, original line endings kept, without line numbers.
    pub content: String,
    /// For an image (PNG, JPEG, GIF or WebP, recognised by its content):
    /// its type and size; the image itself follows as the call's image
    /// content, and `content` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInfo>,
}

/// An image read_file shows.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ImageInfo {
    /// image/png, image/jpeg, image/gif or image/webp.
    pub mime_type: String,
    /// Bytes.
    pub size: u64,
    /// The image as base64: the image content, not part of the structured
    /// result.
    #[serde(skip)]
    pub data: String,
}

impl Reported for ReadFileResult {
    fn bytes_returned(&self) -> u64 {
        self.content.len() as u64
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str, start: u64, end: Option<u64>) -> ReadFileResult {
        select_lines(text, "f".into(), start, end).unwrap()
    }

    #[test]
    fn lines_are_inclusive_from_one_with_their_endings() {
        let r = lines("a\r\nb\nc", 2, Some(3));
        assert_eq!((r.start_line, r.end_line, r.total_lines), (2, 3, 3));
        assert_eq!(r.content, "b\nc");
        assert!(!r.truncated);
        let r = lines("a\nb\n", 1, Some(99));
        assert_eq!((r.end_line, r.content.as_str()), (2, "a\nb\n"));
    }

    #[test]
    fn an_empty_file_has_no_lines_and_start_past_the_end_is_refused() {
        let r = lines("", 1, None);
        assert_eq!((r.end_line, r.total_lines, r.content.as_str()), (0, 0, ""));
        let e = select_lines("a\n", "f".into(), 3, None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
    }

    #[test]
    fn cross_field_refusals_name_the_arguments_first() {
        let e = select_lines("a\nb\n", "f".into(), 2, Some(1)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(e.message().starts_with("start_line, end_line: "), "{e}");
    }

    #[test]
    fn the_cap_counts_characters_and_cuts_at_a_line_end() {
        let line = format!("{}\n", "é".repeat(9_999));
        let text = line.repeat(3);
        let r = lines(&text, 1, None);
        assert!(r.truncated);
        assert_eq!(r.end_line, 1);
        assert_eq!(r.content, line);
        // One line over the cap: its first 16,000 characters, whole.
        let long = "😀".repeat(20_000);
        let r = lines(&long, 1, None);
        assert!(r.truncated);
        assert_eq!(r.content.chars().count(), READ_FILE_MAX_CHARS);
        assert!(r.content.chars().all(|c| c == '😀'));
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
            r.rendered(None),
            "src/a.rs: lines 3 to 4 of 9; cut at 16,000 characters, continue with start_line=5\nc\nd\n"
        );
    }
}
