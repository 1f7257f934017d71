//! write_file and apply_patch as tools: their arguments, write_file's
//! result (and the text a model reads of it). write_file takes text or
//! base64 bytes of at most the writer's file cap and commits them with
//! [`Writer::write_file`], so it is as atomic and link-proof as any write,
//! and reports the syntax errors it introduced (`crate::syntax`).

use std::fmt::Write as _;

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::render::shown_path;
use serverfs_core::{ErrorCode, FsError, Reported, ToText};

use crate::Writer;
use crate::syntax::{SyntaxCheck, SyntaxWarning};

impl Writer {
    /// write_file: creates (`create`) or creates-or-replaces (`overwrite`,
    /// keeping the replaced file's mode bits) atomically; missing parents
    /// are created inside the root.
    pub fn write_file_tool(&self, args: WriteFileArgs) -> Result<WriteFileResult, FsError> {
        // `""` in one field with the other given means "not given": what a
        // strict client sends for the field it does not use.
        let given = |field: Option<String>, other: &Option<String>| {
            field.filter(|value| !(value.is_empty() && other.is_some()))
        };
        let content = given(args.content, &args.content_base64);
        let content_base64 = given(args.content_base64, &content);
        let bytes = match (content, content_base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map_err(|_| FsError::invalid("content_base64: not valid base64."))?,
            _ => {
                return Err(FsError::invalid(
                    "content, content_base64: give exactly one (content for text, content_base64 for bytes; null for the other).",
                ));
            }
        };
        if bytes.len() as u64 > self.max_file_bytes {
            let what = format!("the content is {} bytes, more than write_file writes", bytes.len());
            return Err(crate::fsops::over_the_cap(&what, self.max_file_bytes));
        }
        let overwrite = matches!(args.mode, WriteMode::Overwrite);
        let before = self.before_write(&args.path, &bytes, overwrite);
        let check = SyntaxCheck::new(&self.kept_parses, true);
        let syntax = match &before {
            Before::Unknown => None,
            Before::Absent => check.file(&args.path, None, &bytes),
            Before::Bytes(old) => check.file(&args.path, Some(old), &bytes),
        };
        let report = self.write_file(&args.path, bytes, overwrite)?;
        Ok(WriteFileResult { path: report.path, size: report.size, sha256: report.sha256, syntax })
    }

    /// What the file was before the write, read only when its syntax is
    /// checked (a language `serverfs-syntax` knows): the old errors are not
    /// blamed on the write.
    fn before_write(&self, path: &str, bytes: &[u8], overwrite: bool) -> Before {
        if serverfs_syntax::Language::for_path(path, bytes).is_none() {
            return Before::Unknown;
        }
        if !overwrite {
            // create refuses an existing file: a successful write is new.
            return Before::Absent;
        }
        let Ok(loc) = self.root.locate(path) else { return Before::Unknown };
        match self.current_file(&loc) {
            Ok((old, _)) => Before::Bytes(old),
            Err(e) if e.code() == ErrorCode::PathNotFound => Before::Absent,
            // Unreadable (a link, over the cap): the write decides; the
            // check cannot tell old errors from new ones.
            Err(_) => Before::Unknown,
        }
    }
}

/// The file a write replaces, as far as the syntax check is concerned.
enum Before {
    Absent,
    Bytes(Vec<u8>),
    Unknown,
}

/// How write_file treats an existing file (no doc per variant: the
/// schema stays a plain string `enum`, which every client understands).
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum WriteMode {
    #[default]
    Create,
    Overwrite,
}

/// Arguments of write_file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File path relative to the project root; missing parent directories
    /// are created.
    // The schema's description is empty: the name says it, and a model
    // reads every byte on every turn.
    #[schemars(description = "")]
    pub path: String,
    /// Text content; or content_base64.
    #[serde(default)]
    pub content: Option<String>,
    /// Base64 bytes, instead of content.
    #[serde(default)]
    pub content_base64: Option<String>,
    /// create (default) fails on an existing file; overwrite replaces it.
    #[serde(default)]
    pub mode: WriteMode,
}

/// Arguments of apply_patch (committed by [`Writer::apply_patch`]).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyPatchArgs {
    /// From *** Begin Patch to *** End Patch.
    pub patch: String,
    /// Check and report, write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Result of write_file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteFileResult {
    /// The path written, relative to the project root.
    pub path: String,
    /// Bytes written.
    pub size: u64,
    /// SHA-256 of the bytes written, hex.
    pub sha256: String,
    /// Syntax errors the write introduced (absent: none, or not checked);
    /// the file is written all the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syntax: Option<SyntaxWarning>,
}

impl Reported for WriteFileResult {}

impl ToText for WriteFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let path = shown_path(workdir, &self.path);
        let _ = writeln!(out, "wrote {path}: {} bytes, sha256 {}", self.size, self.sha256);
        if let Some(syntax) = &self.syntax {
            syntax.write_text(&path, true, out);
        }
    }
}
