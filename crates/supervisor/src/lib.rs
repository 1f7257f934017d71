/*!
The per-command supervisor of serverfs-dev: the child side of the process
boundary between the server and the commands it runs. A program whose `main`
is one call to [`main`] (serverfs-dev's small `serverfs-dev-supervisor`, or
serverfs-dev itself under a hidden subcommand).

A supervisor is a child subreaper that starts `bash` in its own process
group and, when `bash` ends, when it is told to (its control channel
closes) or when the server dies, kills the group and every descendant
re-parented to it, until it has no child left. Before `bash` starts it
confines it, layer by layer (each stands alone):

- `confine`: a session of its own (no controlling terminal), no
  capabilities (unless the operator keeps some), `no_new_privs`, and a
  seccomp filter for privileged calls, terminal injection and, with the
  network off, every socket family but `AF_UNIX`;
- `sandbox`: a Landlock domain of its own (writes only below the root,
  its `TMPDIR` and the writable paths; ptrace, signals and abstract sockets
  scoped to the command);
- `mounts`: a view of the file system of its own (read-only but the
  writable paths, other commands' `TMPDIR`s hidden, its own `/dev/shm` and,
  as root, its own `/proc`);
- [`network`]: with the network off or by allowlist, a network namespace
  of its own (by allowlist: loopback only, where the server's proxy listens
  on a socket the supervisor made there).

[`protocol`] is the wire both sides speak (the command line, the order a
supervisor started ahead receives, the status line it answers with, the
exit codes of its start-up probe); the server's side (`serverfs-exec`)
uses it and the probes here, nothing else.

This crate has no async runtime and knows nothing of the server: std,
rustix, landlock, seccompiler, libc and signal-hook only
(`scripts/check-crate-deps.sh` keeps it so).
*/
#![deny(missing_docs)]

pub mod children;
mod confine;
mod error;
mod mounts;
pub mod network;
pub mod protocol;
mod read_only;
mod repos;
mod sandbox;
mod supervise;

pub use confine::{Keep, probe as probe_confine};

/// Marks every descriptor above 2 close-on-exec, so that a program this
/// process starts inherits its standard streams and nothing else (what std's
/// `Command` hands it on purpose it sets up itself). A launcher may leave
/// descriptors open without the flag (a file elsewhere, a pty master: keys
/// typed into the user's shell): the server calls this at start, and each
/// supervisor again before it starts the command. No descriptor is closed:
/// those this process uses stay usable.
pub fn inherit_nothing() {
    close_fds::set_fds_cloexec(3, &[]);
}
pub use error::Error;
pub use network::Network;
pub use sandbox::{Active, FileId, SandboxConfig, TcpRule, probe as probe_sandbox};
pub use supervise::main;
