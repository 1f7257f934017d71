//! serverfs-dev's start-up check of what confines its commands, in one
//! call: the server hardened and made the adopter of orphans, stale
//! `TMPDIR`s swept, and each layer tried once (Landlock in a thread, the
//! view of the file system in a supervisor, the seccomp filter in a
//! thread), so a kernel that cannot give one stops the server instead of
//! failing every command. What it found is returned as [`Notice`]s for the
//! log.

use serverfs_supervisor::protocol::ViewProbe;
use serverfs_supervisor::{Network, SandboxConfig, probe_confine, probe_sandbox};

use crate::launch::{Supervisor, adopt_orphans, sweep_stale_tmpdirs};

/// One line for the start-up log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// A warning (a layer the operator turned off, or the kernel refused)
    /// rather than information.
    pub warn: bool,
    /// The log line's `event`.
    pub event: &'static str,
    /// What it says: what is active, or how many `TMPDIR`s were swept.
    pub message: String,
}

impl Notice {
    fn info(event: &'static str, message: impl Into<String>) -> Self {
        Self { warn: false, event, message: message.into() }
    }

    fn warn(event: &'static str, message: impl Into<String>) -> Self {
        Self { warn: true, event, message: message.into() }
    }

    /// Writes the line: `event` and `active` (`count` for swept `TMPDIR`s).
    pub fn log(&self) {
        let Self { warn, event, message } = self;
        match (warn, *event) {
            (_, STALE_TMPDIRS) => tracing::info!(event, count = %message),
            (true, _) => tracing::warn!(event, active = %message),
            (false, _) => tracing::info!(event, active = %message),
        }
    }
}

const STALE_TMPDIRS: &str = "stale_tmpdirs_removed";

/// Why commands cannot be confined here; the server does not start.
#[derive(Debug)]
pub enum StartupError {
    /// The server could not make itself non-dumpable or a subreaper.
    Harden(std::io::Error),
    /// Landlock cannot be applied: `--sandbox off` is the way out.
    Sandbox(serverfs_supervisor::Error),
    /// No supervisor could be started to check the view.
    SupervisorNotStarted(std::io::Error),
    /// The view of the file system could not be built (a supervisor's
    /// words).
    View(String),
    /// Commands on the network by allowlist cannot get the network
    /// namespace they need (the view's probe says why).
    Network(String),
    /// The seccomp filter cannot be built or installed.
    Seccomp(serverfs_supervisor::Error),
}

impl StartupError {
    /// The setting the error is about, when one decides it (exit 2).
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            Self::Sandbox(_) => Some("SERVERFS_SANDBOX"),
            Self::Network(_) => Some("SERVERFS_COMMAND_NETWORK_ALLOW"),
            _ => None,
        }
    }
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Harden(e) => write!(f, "cannot harden the process: {e}"),
            Self::Sandbox(e) => {
                write!(f, "{e}; start with --sandbox off to run commands without a sandbox")
            }
            Self::SupervisorNotStarted(e) => write!(
                f,
                "cannot confine commands (mount namespace): cannot start the supervisor: {e}"
            ),
            Self::View(why) => write!(f, "cannot confine commands (mount namespace): {why}"),
            Self::Network(why) => write!(
                f,
                "commands cannot get a network namespace of their own here, and without one they would have the host's network ({why}); leave the setting out (and use SERVERFS_COMMAND_NETWORK=off or on), or run where the kernel allows user and network namespaces"
            ),
            Self::Seccomp(e) => write!(f, "cannot confine commands (seccomp): {e}"),
        }
    }
}

impl std::error::Error for StartupError {}

const ALLOWLIST: &str = "by allowlist: a network namespace of its own per command, loopback only, the server's proxy its only way out";

const OWN_VIEW: &str = "own mount namespace: read-only outside the writable paths, other commands' TMPDIRs hidden, own /dev/shm";

/// Everything the server does before it runs a command, in order: it
/// becomes non-dumpable (commands of its user cannot read its memory or
/// environment) and the adopter of orphans, marks every descriptor it was
/// started with above 2 close-on-exec (none reaches a command), removes the `TMPDIR`s a killed
/// server left, and tries each layer of `sandbox` (`None`: `--sandbox
/// off`, the seccomp filter still applies) as every command will get it.
/// What it finds is written into `sandbox` and required of every command
/// from then on (fail closed: a supervisor that cannot build the view
/// start-up found refuses the command). Call it once, after the root was
/// opened and before any command runs.
///
/// # Errors
/// What cannot be had here (see [`StartupError`]).
pub fn check_confinement(
    supervisor: &Supervisor,
    mut sandbox: Option<&mut SandboxConfig>,
) -> Result<Vec<Notice>, StartupError> {
    crate::harden_server_process().and_then(|()| adopt_orphans()).map_err(StartupError::Harden)?;
    serverfs_supervisor::inherit_nothing();
    let mut notices = Vec::new();
    let removed = sweep_stale_tmpdirs();
    if removed > 0 {
        notices.push(Notice::info(STALE_TMPDIRS, removed.to_string()));
    }
    match sandbox.as_deref_mut() {
        Some(sandbox) => {
            // What the paths are now is what every command gets from now on.
            sandbox.pin_identities().map_err(StartupError::Sandbox)?;
            let active = probe_sandbox(sandbox).map_err(StartupError::Sandbox)?;
            notices.push(Notice::info("sandbox", active.to_string()));
            let view = match supervisor.probe_view(sandbox) {
                Err(StartupError::View(why)) if sandbox.network == Network::Proxy => {
                    return Err(StartupError::Network(why));
                }
                probed => probed?,
            };
            sandbox.view = Some(view);
            if sandbox.network == Network::Proxy {
                notices.push(Notice::info("sandbox_network", ALLOWLIST));
            }
            notices.push(match view {
                ViewProbe::OwnWithProc => Notice::info(
                    "sandbox_view",
                    format!("{OWN_VIEW}, other processes hidden in /proc"),
                ),
                ViewProbe::Own => Notice::info(
                    "sandbox_view",
                    format!("{OWN_VIEW}; /proc shows other processes (a new /proc needs root)"),
                ),
                ViewProbe::Shared => Notice::warn(
                    "sandbox_view",
                    "shared: this kernel refuses commands a mount namespace; Landlock holds, but metadata outside the writable paths (modes, times, xattrs) and other commands' TMPDIRs are within reach",
                ),
            });
        }
        None => notices.push(Notice::warn(
            "sandbox",
            "off (--sandbox off): commands can write anywhere this user can",
        )),
    }
    probe_confine(sandbox.as_deref()).map_err(StartupError::Seccomp)?;
    Ok(notices)
}
