//! The hardened core of ServerFS: workdir configuration, the one race-free
//! path resolver, the hidden/deny policy, and the read-only operations built
//! on them (stat, list, streaming text reads).
//!
//! The principal type is [`Sandbox`]: built once at start-up from
//! [`WorkdirSpec`]s and a [`Policy`], it turns `(alias, client path)` into a
//! [`Location`] (syntax and policy checked, nothing looked up yet) and
//! opens handles beneath the workdir root without following any symlink.
//! Every error is an [`FsError`] with a stable [`ErrorCode`] and a message
//! that names paths only as `alias:/relative`.
//!
//! This crate has no write API: nothing in it creates, modifies or removes
//! a file.

pub mod deadline;
pub mod entries;
pub mod error;
pub mod path;
pub mod policy;
pub mod sandbox;
pub mod text;

pub use deadline::{Deadline, Stop};
pub use error::{ErrorCode, FsError};
pub use path::RelPath;
pub use policy::Policy;
pub use sandbox::{EntryKind, Location, ResolveMode, Sandbox, WalkRoot, Workdir, WorkdirSpec};
