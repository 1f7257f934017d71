//! Who runs a transaction, and whether it still lives: decided by nothing
//! a command can hold or forge.
//!
//! A journal names its writer ([`WriterId`]): the process (pid, its start
//! time in clock ticks since boot as `/proc/<pid>/stat` gives it, the boot
//! id, the pid namespace) and the writer's number within that process.
//!
//! Guarantees:
//! - No lock decides liveness. A writer of another process is alive while
//!   a process with its pid *and* its start time exists (not a zombie) in
//!   this boot; a command cannot take that pid with that start time, and
//!   commands cannot write the journals that name it (the state directory
//!   is refused below every path they may write). A writer of this
//!   process is alive until it is dropped (so a test's "crashed" writer is
//!   dead like a killed process).
//! - A writer of another pid namespace (another container on the same
//!   files) cannot be judged: it counts as alive, and its journals are
//!   kept until a writer of its namespace, or any writer after a reboot,
//!   settles them — never settled while its owner may live.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};
use serverfs_core::{ErrorCode, FsError};

/// A writer, as recorded in its journals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WriterId {
    pid: u32,
    /// Start time of the process, clock ticks since boot.
    start: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    boot: String,
    /// Inode of `/proc/self/ns/pid`.
    pid_ns: u64,
    /// The writer's number within its process.
    writer: u64,
}

/// Whether a journal's writer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    Alive,
    Dead,
    /// Of another pid namespace: treated as alive.
    Unknown,
}

/// This process's identity (pid, start, boot, namespace), read once.
#[derive(Clone, Debug)]
struct Process {
    pid: u32,
    start: u64,
    boot: String,
    pid_ns: u64,
}

/// The writers of this process that are alive (not dropped).
static LIVE: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(1);
// A `String` error: read once, then cloned into the detail of every
// writer's error (`io::Error` is not `Clone`).
static THIS: OnceLock<Result<Process, String>> = OnceLock::new();

/// A writer's registration in this process: alive until dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    id: WriterId,
}

impl Registered {
    /// Registers a new writer of this process.
    ///
    /// # Errors
    /// `INTERNAL_ERROR` when `/proc` does not say who this process is.
    pub(crate) fn new() -> Result<Self, FsError> {
        let this = this()?;
        let writer = NEXT.fetch_add(1, Ordering::Relaxed);
        LIVE.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_default().insert(writer);
        Ok(Self {
            id: WriterId {
                pid: this.pid,
                start: this.start,
                boot: this.boot.clone(),
                pid_ns: this.pid_ns,
                writer,
            },
        })
    }

    pub(crate) fn id(&self) -> &WriterId {
        &self.id
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(live) = LIVE.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            live.remove(&self.id.writer);
        }
    }
}

/// Whether the writer `id` lives (see the module docs).
pub(crate) fn liveness(id: &WriterId) -> Liveness {
    let Ok(this) = this() else {
        return Liveness::Unknown;
    };
    if id.boot != this.boot {
        return Liveness::Dead;
    }
    if id.pid_ns != this.pid_ns {
        return Liveness::Unknown;
    }
    if (id.pid, id.start) == (this.pid, this.start) {
        let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        return if live.as_ref().is_some_and(|l| l.contains(&id.writer)) {
            Liveness::Alive
        } else {
            Liveness::Dead
        };
    }
    match std::fs::read_to_string(format!("/proc/{}/stat", id.pid)) {
        Ok(stat) => match parse_stat(&stat) {
            Some((state, start)) if start == id.start && !matches!(state, 'Z' | 'X' | 'x') => {
                Liveness::Alive
            }
            Some(_) => Liveness::Dead,
            None => Liveness::Unknown,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Liveness::Dead,
        Err(_) => Liveness::Unknown,
    }
}

fn this() -> Result<&'static Process, FsError> {
    THIS.get_or_init(read_this).as_ref().map_err(|e| {
        FsError::new(ErrorCode::InternalError, "the server cannot identify its own process.")
            .with_detail(e.clone())
    })
}

// A `String` error: what `THIS` keeps.
fn read_this() -> Result<Process, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc: {e}"))?;
    let (_, start) = parse_stat(&stat).ok_or("/proc/self/stat: unexpected format")?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map_err(|e| format!("boot_id: {e}"))?
        .trim()
        .to_owned();
    let pid_ns =
        std::fs::metadata("/proc/self/ns/pid").map_err(|e| format!("pid namespace: {e}"))?.ino();
    Ok(Process { pid: std::process::id(), start, boot, pid_ns })
}

/// The state letter and the start time (field 22) of a `/proc/<pid>/stat`
/// line. The command name (field 2) may hold spaces and parentheses: the
/// fields after it follow its last `)`.
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // Fields 4..=21 come between the state (3) and the start time (22).
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_a_tricky_name_parses() {
        let line = "42 (a) b (c) R 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some(('R', 987_654)));
        assert_eq!(parse_stat("42 (x) S 1"), None);
    }

    #[test]
    fn a_writer_of_this_process_lives_until_dropped() {
        let a = Registered::new().unwrap();
        let id = a.id().clone();
        assert_eq!(liveness(&id), Liveness::Alive);
        drop(a);
        assert_eq!(liveness(&id), Liveness::Dead);
    }

    /// A child process lives while it runs, is dead once reaped; a reused
    /// pid with another start time, another boot, are dead; another pid
    /// namespace cannot be judged.
    #[test]
    fn a_writer_of_another_process_lives_while_that_process_does() {
        let mut child = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let this = this().unwrap();
        let id = WriterId {
            pid: child.id(),
            start: parse_stat(&stat).unwrap().1,
            boot: this.boot.clone(),
            pid_ns: this.pid_ns,
            writer: 1,
        };
        assert_eq!(liveness(&id), Liveness::Alive);
        assert_eq!(liveness(&WriterId { start: id.start + 1, ..id.clone() }), Liveness::Dead);
        assert_eq!(liveness(&WriterId { boot: "other".into(), ..id.clone() }), Liveness::Dead);
        assert_eq!(liveness(&WriterId { pid_ns: 1, ..id.clone() }), Liveness::Unknown);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(liveness(&id), Liveness::Dead);
    }
}
