//! The only code in ServerFS that mutates files, used by `serverfs-dev`
//! alone (never by `serverfs-mcp`, whose dependency graph must not contain
//! this crate).
//!
//! [`Writer`] runs crash-safe multi-file transactions ([`Change`]: create,
//! replace, delete; a move is a delete plus a create) and single-file
//! writes ([`Writer::write_file`], and as the write_file tool
//! [`Writer::write_file_tool`]) over one [`serverfs_core::Root`],
//! patches in the Codex format planned and committed as one transaction
//! ([`Writer::apply_patch`]), and streamed uploads of any size
//! ([`Writer::begin_upload`], own cap). The journal's state directory is
//! placed and created by [`prepare_state_dir`].
//!
//! Guarantees:
//! - Every access goes through the core's seam: [`Root::locate`] (syntax
//!   and policy) then [`Root::open_parent`] (a parent resolved beneath the
//!   root without following any link). No path string is given to the OS
//!   for anything inside the root.
//! - Writes never follow or touch a symbolic link: a final component that
//!   is a link is refused (`SYMLINK_NOT_ALLOWED`), and so is a linked
//!   parent, including one met while creating missing parents.
//! - A transaction is verified completely before anything is written, and
//!   a failure or a crash (kill -9 at any instant) leaves the tree wholly
//!   before or wholly after it: the intent journal lives in the state dir
//!   (never inside the root) and [`Writer::open`] settles what a crash
//!   left before serving.
//! - Readers see a target either old or new, never a partial file:
//!   contents are written to a temporary file beside the target and
//!   renamed over it. Temporaries and backups carry fixed hidden prefixes
//!   ([`TEMP_PREFIX`], [`BACKUP_PREFIX`]) and never remain after a commit
//!   or a rollback.
//! - Mutations of one path are serialised; each re-verifies under its lock.
//!   Any number of writers (processes) may share a root, with the same or
//!   different state dirs: their switches are serialised by the root's
//!   commit lock, found from the root's identity in the user's directory
//!   of one machine-wide place ([`WriterConfig::rendezvous`], see
//!   [`prepare_rendezvous`]), never from `HOME`; a writer of another user
//!   on the same root is refused at open. A dead writer's journal,
//!   in whichever state dir, is settled by the next transaction or start of
//!   any writer, never while its writer lives — judged by its process, not
//!   by a lock (see [`Writer`]).
//! - Out of every command's reach: commands cannot hold the commit lock
//!   (mode 0200), and [`prepare_state_dir`] and [`prepare_rendezvous`]
//!   refuse a state dir or rendezvous below any path commands may write
//!   (or, when narrowed, read).
//!
//! Files written by apply_patch and write_file are parsed afterwards, and
//! syntax errors the write introduced are reported, never refused
//! ([`SyntaxWarning`]).
//!
//! Errors are the core's [`serverfs_core::FsError`] with its stable codes.
//!
//! [`Root::locate`]: serverfs_core::Root::locate
//! [`Root::open_parent`]: serverfs_core::Root::open_parent

mod file_tool;
mod fsops;
mod journal;
mod locks;
mod owner;
mod patch;
mod rendezvous;
mod root_record;
mod shared;
mod state_dir;
mod syntax;
mod tx;
mod upload;

#[cfg(test)]
mod crash_tests;

pub use file_tool::{ApplyPatchArgs, WriteFileArgs, WriteFileResult, WriteMode};
pub use fsops::{BACKUP_PREFIX, TEMP_PREFIX};
pub use journal::Op;
pub use patch::{FilePlan, HunkMatch, PatchReport};
pub use rendezvous::{RENDEZVOUS_BASE, prepare_rendezvous};
pub use root_record::check_root_record;
pub use serverfs_patch::PatchLimits;
pub use state_dir::{Reach, default_state_dir, prepare_state_dir, program_reached};
pub use syntax::{SyntaxErrorAt, SyntaxWarning};
pub use tx::{
    Applied, Change, CommitReport, DEFAULT_MAX_FILE_BYTES, Outcome, Recovered, RecoveryReport,
    WriteReport, Writer, WriterConfig,
};
pub use upload::{Upload, UploadTarget};
