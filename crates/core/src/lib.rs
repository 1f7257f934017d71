//! The hardened core of ServerFS: the one race-free path resolver, the
//! hidden/deny policy, and the read-only operations built on them (stat,
//! list, streaming text reads).
//!
//! The principal type is [`Root`]: one directory handle opened with a
//! display name, a [`Policy`] and a [`SymlinkRule`] ([`RootOptions`]). It
//! turns a client path into a [`Location`] (syntax and policy checked,
//! nothing looked up yet) and opens handles beneath the root: [`Meta`] for
//! a stat, a read-only file, a [`WalkRoot`] for walkers, and
//! [`Root::open_parent`] — a [`ParentDir`] and a [`Name`] — as the only
//! seam a write crate gets. Every error is an [`FsError`] with a stable
//! [`ErrorCode`] and a message that names paths only as `name:/relative`.
//!
//! This crate has no write API: nothing in it creates, modifies or removes
//! a file.

pub mod config;
pub mod deadline;
pub mod entries;
pub mod errno;
pub mod error;
mod meta;
pub mod path;
pub mod policy;
pub mod render;
mod reported;
mod resolve;
mod root;
pub mod text;

pub use config::ConfigError;
pub use deadline::{Deadline, Stop};
pub use errno::errno_error;
pub use error::{ErrorCode, FsError};
pub use meta::{EntryKind, Meta};
pub use path::RelPath;
pub use policy::Policy;
pub use render::ToText;
pub use reported::Reported;
pub use resolve::{ResolveMode, SymlinkRule};
pub use root::{Entry, Location, Name, ParentDir, Root, RootError, RootOptions, WalkRoot};
