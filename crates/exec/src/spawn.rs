//! The server's side of a supervisor: starting one, and stopping one
//! without ever killing it before it has killed its tree.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use serverfs_core::error::{ErrorCode, FsError};
use tokio::process::Child;

use crate::supervisor::{ENV_KEYS, Supervisor};

/// How long a supervisor gets to kill its tree and exit after its control
/// channel closed, before SIGTERM; and again after SIGTERM, before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// The environment of a command: `PATH`, `HOME`, `LANG` and `TMPDIR`, and
/// nothing else (the server's own variables, its secrets included, are
/// never passed on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildEnv {
    /// `PATH`; also where `bash` itself is looked up.
    pub path: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// `LANG`.
    pub lang: Option<OsString>,
    /// `TMPDIR`.
    pub tmpdir: Option<OsString>,
}

impl ChildEnv {
    /// The four variables copied from the server's own environment (unset
    /// ones stay unset; `PATH` falls back to a standard one).
    pub fn from_server() -> Self {
        Self {
            path: Some(
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            home: std::env::var_os("HOME"),
            lang: std::env::var_os("LANG"),
            tmpdir: std::env::var_os("TMPDIR"),
        }
    }

    fn values(&self) -> [Option<&OsString>; 4] {
        [self.path.as_ref(), self.home.as_ref(), self.lang.as_ref(), self.tmpdir.as_ref()]
    }

    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        for (key, value) in ENV_KEYS.iter().zip(self.values()) {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
    }
}

/// A started supervisor and the server's end of its control channel.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) control: tokio::net::UnixStream,
}

pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> FsError {
    FsError::new(ErrorCode::InternalError, format!("{what}.")).with_detail(e.to_string())
}

/// Starts the supervisor in `mode` with `cwd` (resolved in the child before
/// exec, so `/proc/self/fd/N` names the server's open directory N) and the
/// given output pipes.
pub(crate) fn spawn(
    supervisor: &Supervisor,
    mode: &[&OsStr],
    cwd: &Path,
    env: &ChildEnv,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<Spawned, FsError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| internal("Could not create the control channel", e))?;
    ours.set_nonblocking(true).map_err(|e| internal("Could not create the control channel", e))?;
    let mut cmd = supervisor.command(mode);
    cmd.stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(stdout)
        .stderr(stderr)
        .current_dir(cwd)
        .kill_on_drop(false);
    env.apply(&mut cmd);
    let child = cmd.spawn().map_err(|e| internal("Could not start the command", e))?;
    // `cmd` still holds the supervisor's end: drop it now, or the
    // supervisor would never see end of file.
    drop(cmd);
    let control = tokio::net::UnixStream::from_std(ours)
        .map_err(|e| internal("Could not create the control channel", e))?;
    Ok(Spawned { child, control })
}

/// SIGTERM to a supervisor that has not been reaped yet (once reaped, its
/// pid is unknown to tokio, so a reused pid is never signalled).
pub(crate) fn terminate(child: &Child) {
    if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process(pid, Signal::TERM);
    }
}

/// Waits for a supervisor whose control channel is already closed: it
/// kills its tree and exits by itself. Only if it does not, SIGTERM (which
/// it also handles by killing its tree), and only as a last resort SIGKILL.
pub(crate) async fn wait_stopped(child: &mut Child) {
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
        return;
    }
    terminate(child);
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
        return;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}
