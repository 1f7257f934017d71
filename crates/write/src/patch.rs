//! Patches: the Codex patch format applied all-or-nothing, one transaction
//! of this writer.
//!
//! The text is parsed (`serverfs-patch`, pure), then every operation is
//! planned against the files as they are now — each path located in the
//! root, each current file read once (never through a symlink, at most the
//! writer's file cap), each update planned bytes-in, bytes-out — and only a
//! plan that holds for every file is committed, as one transaction, which
//! re-checks each target just before switching it and makes the whole patch
//! survive a failure or a crash wholly before or wholly after. A dry run
//! stops after the plan and writes nothing.
//!
//! Planning checks the call's deadline and cancellation between operations
//! and, inside an update, every few thousand steps of the planner (its
//! cost bound is in `serverfs-patch`'s `plan` module): a stopped call is
//! `TIMEOUT` and writes nothing. The answer is bounded whatever the patch:
//! per file an operation, two paths, two sizes and at most 100 hunk
//! reports (the rest counted in `hunks_not_listed`) and a syntax warning
//! of at most a few lines ([`SyntaxWarning`]); never file content beyond
//! the lines those quote.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::{Deadline, EntryKind, ErrorCode, FsError, Location, Meta, Reported, ToText};
use serverfs_patch::{HunkReport, Operation, PatchLimits};

use crate::syntax::{SyntaxCheck, SyntaxWarning};
use crate::tx::{Change, Writer};

impl Writer {
    /// Plans `patch` (the Codex format) against the files as they are now
    /// and, unless `dry_run`, commits it as one transaction.
    ///
    /// # Errors
    /// The patch crate's codes (`PATCH_SYNTAX`, `PATCH_CONTEXT_NOT_FOUND`,
    /// `PATCH_CONTEXT_AMBIGUOUS`, `PATCH_INDENTATION_AMBIGUOUS`, `PATCH_CONFLICT`, `PATCH_TOO_LARGE`,
    /// `UNSUPPORTED_TEXT_ENCODING`), the root's path errors,
    /// `ALREADY_EXISTS`, `NOT_A_FILE`, `WRITE_LIMIT_EXCEEDED` (a file over
    /// the writer's file cap), `TIMEOUT` (`deadline` passed while
    /// planning), and [`Writer::commit`]'s.
    pub fn apply_patch(
        &self,
        patch: &str,
        dry_run: bool,
        deadline: &Deadline,
    ) -> Result<PatchReport, FsError> {
        let patch = serverfs_patch::parse(patch, &PatchLimits::default())?;
        let mut changes = Vec::new();
        let mut files = Vec::new();
        let mut seen = HashSet::new();
        let syntax = SyntaxCheck::new(&self.kept_parses, !dry_run);
        for operation in &patch.operations {
            deadline.check().map_err(|_| deadline.error(&"apply_patch"))?;
            let (change, file) = self.plan_operation(operation, &mut seen, &syntax, deadline)?;
            changes.extend(change);
            files.push(file);
        }
        let applied = !dry_run;
        if applied {
            self.commit(changes)?;
        }
        Ok(PatchReport { dry_run, applied, files })
    }

    /// The writer's changes for one operation and its report.
    fn plan_operation(
        &self,
        operation: &Operation,
        seen: &mut HashSet<String>,
        syntax: &SyntaxCheck<'_>,
        deadline: &Deadline,
    ) -> Result<(Vec<Change>, FilePlan), FsError> {
        let root = &self.root;
        // The parser refuses a path written twice; normalising can make two
        // spellings one path (`a//b`, `./a/b`), refused here the same way.
        let mut claim = |loc: &Location<'_>| {
            let path = loc.path().as_relative();
            if seen.insert(path.clone()) {
                Ok(path)
            } else {
                Err(FsError::new(
                    ErrorCode::PatchConflict,
                    format!(
                        "{path} appears more than once in the patch; give each file one operation."
                    ),
                ))
            }
        };
        match operation {
            Operation::Add { path, lines, .. } => {
                let loc = root.locate(path)?;
                let path = claim(&loc)?;
                self.must_not_exist(&loc, "use *** Update File to change it")?;
                let bytes = serverfs_patch::add_file_bytes(lines);
                self.within_cap(&path, bytes.len())?;
                let mut file = FilePlan::new("add", &path).after(bytes.len());
                file.syntax = syntax.file(&path, None, &bytes);
                Ok((vec![Change::Create { path, bytes, mode: None, create_parents: true }], file))
            }
            Operation::Delete { path, .. } => {
                let loc = root.locate(path)?;
                let path = claim(&loc)?;
                let (bytes, _) = self.current_file(&loc)?;
                let file = FilePlan::new("delete", &path).before(bytes.len());
                Ok((vec![Change::Delete { path, expected: Some(bytes) }], file))
            }
            Operation::Update { path, move_to, hunks, .. } => {
                let loc = root.locate(path)?;
                let path = claim(&loc)?;
                let (old, meta) = self.current_file(&loc)?;
                let (new, hunks) = if hunks.is_empty() {
                    (old.clone(), Vec::new())
                } else {
                    // Planning stops at the call's deadline or cancellation.
                    let stop = || deadline.check().is_err();
                    let planned = serverfs_patch::plan_update_until(&old, hunks, &path, &stop)
                        .map_err(|e| match e.code() {
                            ErrorCode::Timeout => stopped(deadline),
                            _ => FsError::from(e),
                        })?;
                    (planned.bytes, planned.hunks)
                };
                self.within_cap(&path, new.len())?;
                let Some(target) = move_to else {
                    let mut file =
                        FilePlan::new("update", &path).before(old.len()).after(new.len());
                    file.list_hunks(&hunks);
                    file.syntax = syntax.file(&path, Some(&old), &new);
                    return Ok((vec![Change::Replace { path, expected: old, bytes: new }], file));
                };
                let target_loc = root.locate(target)?;
                let target = claim(&target_loc)?;
                self.must_not_exist(
                    &target_loc,
                    "*** Move to never replaces a file: move to another path, or delete it with \
                     an earlier patch (a patch names each file once)",
                )?;
                let mut file = FilePlan::new("move", &path).before(old.len()).after(new.len());
                file.move_to = Some(target.clone());
                file.list_hunks(&hunks);
                // The language of the file is its new name's.
                file.syntax = syntax.file(&target, Some(&old), &new);
                let changes = vec![
                    Change::Delete { path, expected: Some(old) },
                    Change::Create {
                        path: target,
                        bytes: new,
                        mode: Some(meta.mode),
                        create_parents: true,
                    },
                ];
                Ok((changes, file))
            }
        }
    }

    /// The bytes and metadata of the regular file at `loc`, which must not
    /// be a link (writes never touch one) and must be within the file cap.
    pub(crate) fn current_file(&self, loc: &Location<'_>) -> Result<(Vec<u8>, Meta), FsError> {
        let (parent, name) = self.root.open_parent(loc)?;
        let meta = match parent.meta(&name)? {
            None => {
                return Err(FsError::new(
                    ErrorCode::PathNotFound,
                    format!("{loc} does not exist; read the directory and check the path."),
                ));
            }
            Some(meta) => meta,
        };
        match meta.kind {
            EntryKind::File => {}
            EntryKind::Symlink => {
                return Err(FsError::new(
                    ErrorCode::SymlinkNotAllowed,
                    format!("{loc} is a symbolic link; patches never change a link or its target."),
                ));
            }
            _ => {
                return Err(FsError::new(
                    ErrorCode::NotAFile,
                    format!("{loc} is not a regular file."),
                ));
            }
        }
        self.within_cap(&loc.to_string(), usize::try_from(meta.size).unwrap_or(usize::MAX))?;
        let (file, _) = self.root.open_file(loc)?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.size).unwrap_or(0));
        let cap = self.max_file_bytes;
        // One byte past the cap tells a file that grew since its stat.
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, cap + 1), &mut bytes).map_err(
            |e| {
                FsError::new(ErrorCode::InternalError, format!("{loc} could not be read."))
                    .with_detail(e.to_string())
            },
        )?;
        self.within_cap(&loc.to_string(), bytes.len())?;
        Ok((bytes, meta))
    }

    /// `ALREADY_EXISTS` when anything is at `loc`, its message ending in
    /// `what_to_do`.
    fn must_not_exist(&self, loc: &Location<'_>, what_to_do: &str) -> Result<(), FsError> {
        // A missing parent is fine (Add creates it); anything at the path,
        // a dangling link included, is not.
        let exists = match self.root.open_parent(loc) {
            Ok((parent, name)) => parent.meta(&name)?.is_some(),
            Err(e) if e.code() == ErrorCode::PathNotFound => false,
            Err(e) => return Err(e),
        };
        if exists {
            return Err(FsError::new(
                ErrorCode::AlreadyExists,
                format!("{loc} already exists; {what_to_do}."),
            ));
        }
        Ok(())
    }

    fn within_cap(&self, shown: &str, len: usize) -> Result<(), FsError> {
        let cap = self.max_file_bytes;
        if len as u64 > cap {
            let what = format!("{shown} is larger than the files apply_patch changes");
            return Err(crate::fsops::over_the_cap(&what, cap));
        }
        Ok(())
    }
}

/// `TIMEOUT` for planning stopped by the deadline or a cancellation.
fn stopped(deadline: &Deadline) -> FsError {
    if deadline.is_cancelled() {
        FsError::new(
            ErrorCode::Timeout,
            "apply_patch was cancelled while planning; nothing was written.",
        )
    } else {
        let e = deadline.error(&"apply_patch");
        FsError::new(ErrorCode::Timeout, format!("{} Nothing was written.", e.message()))
    }
}

/// What [`Writer::apply_patch`] did: apply_patch's result as sent.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PatchReport {
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Whether the files were changed (all of them; never some).
    pub applied: bool,
    /// One entry per file operation, in patch order.
    pub files: Vec<FilePlan>,
}

impl Reported for PatchReport {}

/// What a model reads: whether anything was written, then one line per
/// file (operation, path, sizes, where each listed hunk matched and by
/// which pass when not exact).
impl ToText for PatchReport {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        use std::fmt::Write as _;
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
                    .map(|h| match (h.pass.as_str(), &h.reindented) {
                        ("exact", _) => h.line.to_string(),
                        (pass, None) => format!("{} ({pass})", h.line),
                        (pass, Some(to)) => format!("{} ({pass}, re-indented to {to})", h.line),
                    })
                    .collect();
                let _ = write!(out, ", hunks at lines {}", hunks.join(", "));
            }
            if file.hunks_not_listed > 0 {
                let _ = write!(out, " and {} more hunks", file.hunks_not_listed);
            }
            out.push('\n');
            if let Some(syntax) = &file.syntax {
                syntax.write_text(file.move_to.as_ref().unwrap_or(&file.path), self.applied, out);
            }
        }
    }
}

/// What the patch does to one file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FilePlan {
    /// add, delete, update or move.
    pub operation: String,
    /// The file (for a move, its old path).
    pub path: String,
    /// For a move, the new path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub move_to: Option<String>,
    /// Size before, in bytes (not for add).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<u64>,
    /// Size after, in bytes (not for delete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_after: Option<u64>,
    /// For each hunk: the line of the file where it matched and the pass
    /// that matched it (exact, trailing-whitespace, whitespace, typography);
    /// at most the first 100 hunks of the file (see hunks_not_listed).
    pub hunks: Vec<HunkMatch>,
    /// Hunks of this file past the first 100, matched but not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub hunks_not_listed: u64,
    /// Syntax errors the patch introduced in the file (absent: none, or
    /// not checked); the patch is applied all the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syntax: Option<SyntaxWarning>,
}

/// Hunks listed per file: the answer stays a few KiB however many hunks a
/// patch has (a patch of 1 MiB can have 170,000).
const LISTED_HUNKS: usize = 100;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FilePlan {
    fn new(operation: &str, path: &str) -> Self {
        Self {
            operation: operation.to_owned(),
            path: path.to_owned(),
            move_to: None,
            bytes_before: None,
            bytes_after: None,
            hunks: Vec::new(),
            hunks_not_listed: 0,
            syntax: None,
        }
    }

    fn list_hunks(&mut self, hunks: &[HunkReport]) {
        self.hunks = hunks
            .iter()
            .take(LISTED_HUNKS)
            .map(|h| HunkMatch {
                line: h.line as u64,
                pass: h.pass.as_str().to_owned(),
                reindented: h.reindented.map(|style| style.describe()),
            })
            .collect();
        self.hunks_not_listed = hunks.len().saturating_sub(LISTED_HUNKS) as u64;
    }

    fn before(mut self, len: usize) -> Self {
        self.bytes_before = Some(len as u64);
        self
    }

    fn after(mut self, len: usize) -> Self {
        self.bytes_after = Some(len as u64);
        self
    }
}

/// Where one hunk matched.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HunkMatch {
    /// The 1-based line of the file where the hunk's lines start.
    pub line: u64,
    /// exact, trailing-whitespace, whitespace or typography.
    pub pass: String,
    /// When the hunk matched only by ignoring indentation: the file's
    /// indentation its added lines were rewritten to (`tabs`, `4 spaces`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reindented: Option<String>,
}
