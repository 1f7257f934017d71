//! write_file and apply_patch as tools: their arguments, write_file's
//! result (and the text a model reads of it). write_file takes text or
//! base64 bytes of at most the writer's file cap and commits them with
//! [`Writer::write_file`], so it is as atomic and link-proof as any write.

use std::fmt::Write as _;

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::render::shown_path;
use serverfs_core::{FsError, Reported, ToText};

use crate::Writer;

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
        let report = self.write_file(&args.path, bytes, overwrite)?;
        Ok(WriteFileResult { path: report.path, size: report.size, sha256: report.sha256 })
    }
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
    /// File path relative to the project root; missing parent directories are created.
    pub path: String,
    /// The new content as text (UTF-8). Exactly one of content and
    /// content_base64 (`""` beside the other counts as not given).
    #[serde(default)]
    pub content: Option<String>,
    /// The new content as base64 bytes. Exactly one of content and
    /// content_base64 (`""` beside the other counts as not given).
    #[serde(default)]
    pub content_base64: Option<String>,
    /// create (default): only create, an existing path is ALREADY_EXISTS;
    /// overwrite: create, or replace an existing file keeping its permissions.
    #[serde(default)]
    pub mode: WriteMode,
}

/// Arguments of apply_patch (committed by [`Writer::apply_patch`]).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyPatchArgs {
    /// The patch, from *** Begin Patch to *** End Patch.
    pub patch: String,
    /// Plan and check everything, write nothing.
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
}

impl Reported for WriteFileResult {}

impl ToText for WriteFileResult {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        let path = shown_path(workdir, &self.path);
        let _ = writeln!(out, "wrote {path}: {} bytes, sha256 {}", self.size, self.sha256);
    }
}
