/*!
Command execution for serverfs-dev: the `bash` tool, shell sessions and the
command policy. Never a dependency of the read-only serverfs-mcp.

Every command runs under a small per-command supervisor process (the
`serverfs-supervisor` crate: a program whose `main` calls
`serverfs_supervisor::main`, serverfs-dev's own small
`serverfs-dev-supervisor`, or its whole binary under a hidden subcommand): a
child subreaper that starts `bash` in its own process group and, when `bash`
ends, when it is told to (its control channel closes) or when the server
dies, kills the group and every descendant re-parented to it, until it has
no child left. Nothing the command starts survives it — background jobs,
`setsid`, double forks and `nohup` included. A `bash` call's supervisor is
started ahead, when the previous command ends, and handed its command, its
directory (as a file descriptor) and its `TMPDIR` over the control channel,
so a short command does not wait for a process to start and load; it is one
idle process per server, and one that is gone or cannot take the command is
replaced by one started on the spot.

- [`run`] runs one `bash --noprofile --norc -c COMMAND` with a timeout and
  a cancellation token, both streams capped at 16,000 characters each.
  [`Sessions::run`] is the same run, but one still running at its yield
  point answers with its output so far and goes on as the caller's session.
- [`Limiter`] caps concurrent commands with a bounded queue.
- [`Sessions`] keeps long-lived shells, owned by the client that opened
  them, read at absolute byte offsets.
- [`Policy`] is the `--allow`/`--deny` check; see its module docs for what
  it cannot promise.
- [`SandboxConfig`] is the Landlock sandbox; [`check_confinement`] checks
  every layer at start-up and says what each enforces.
- [`Commands`] is the command tools as one service (policy, cap, sessions,
  sandbox, audit line); [`CommandSettings`] their flags.
- [`harden_server_process`] makes the server's `/proc` entries unreadable to
  the commands it runs (same user).

# Wiring into serverfs-dev

```text
fn main() -> ExitCode {
    // Before anything else (before tokio, before parsing secrets):
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == "__supervise") {
        return serverfs_supervisor::main(args);        // never returns to the server code
    }
    // The small program beside the binary if it is there (its main is one
    // call to serverfs_supervisor::main), else this binary under the
    // subcommand, copied into sealed memory:
    let sup = Supervisor::sealed(&exe.with_file_name("serverfs-dev-supervisor"), [""; 0])?;
    let sup = Supervisor::sealed(&std::env::current_exe()?, ["__supervise"])?;
    // Hardens the server, adopts orphans, sweeps stale TMPDIRs, and checks
    // each layer in a supervisor; the notices are for the log:
    let notices = serverfs_exec::check_confinement(&sup, config.sandbox.as_ref())?;
    ...
}
```

- bash tool: `Policy::check(command)`, then `limiter.acquire(principal).await?`, then
  [`run`] (or [`Sessions::run`], to yield to a session of the caller) with
  `cwd = /proc/self/fd/N` of the directory the resolver opened (keep that
  `OwnedFd` alive until `run` returns) and the request's
  cancellation token (MCP `notifications/cancelled`, client disconnect).
- shell tools: one [`Sessions`] per server; [`Owner`] is `"stdio"` for the
  stdio transport. HTTP is stateless (no `Mcp-Session-Id`): the owner is the
  request's authenticated principal (`access:<email>` under Cloudflare
  Access, `token:<name>` under a named bearer token, `token` for every
  holder of the single unnamed token, `token:local` for the holders of
  serverfs-dev's local token). The per-owner cap is per principal: each
  Access user and named token has its own. No
  transport event closes an HTTP client's sessions: they end with
  `shell_close`, the idle reaper, or shutdown.
  `Policy::check_input` on every `shell_write`.
- At shutdown: [`Sessions::close_all`]; a killed server needs nothing: each
  supervisor sees its control channel close and kills its tree.

# What is guaranteed, and what is not

When [`run`] returns, and when [`Sessions::close`] returns, every process
that descends from the command has been SIGKILLed and reaped by its
supervisor, whatever its process group or session. The server does not
take the supervisor's word for it: after every command and session it
sweeps the orphans re-parented to it (with [`adopt_orphans`]), and it
believes a status line only from a supervisor that exited normally (see the
driver module). Supervisors are non-dumpable, so a command of the same user
cannot ptrace them, open their `/proc/<pid>/fd` or `pidfd_getfd` from them.

With a [`SandboxConfig`] (serverfs-dev's default) each command and session
runs in a Landlock domain of its own: writes only below the root, its
private `TMPDIR`, `/tmp` and the configured paths; no ptrace or signal into
the server, the supervisors or other sessions; optionally no TCP (the
sandbox module lists what each kernel ABI adds). Every command gets a
private `TMPDIR`, removed when it ends, sandboxed or not.

Not covered: a process that is not a descendant (a job handed to a daemon
that was already running: `systemd-run`, `at`, `docker run -d`, an ssh to
elsewhere), and a descendant the supervisor may not signal (one that gained
another user's identity through `sudo` or a set-user-ID program, when the
server is not root; the sandbox sets no-new-privileges, which stops the
latter). Without the sandbox a command running as the server's user can
SIGKILL its supervisor or the server itself; with [`adopt_orphans`] the
server then inherits the tree and kills it.
*/
#![deny(missing_docs)]

// The server's side of the process boundary (the child side is the
// serverfs-supervisor crate, whose wire, `protocol`, both use): it starts
// supervisors (`launch`) and checks the layers at start-up (`startup`),
// drives each one the same way (`driver`) for one-shot commands (`run`)
// and shell sessions (`session`, `output`), and serves them as tools
// (`commands`). No module imports one above it.
mod capped;
mod commands;
mod driver;
mod launch;
mod limit;
mod output;
mod policy;
mod render;
mod run;
mod session;
mod settings;
mod startup;

pub use commands::{
    Audited, BashArgs, Commands, ShellCloseArgs, ShellList, ShellListArgs, ShellOpenArgs,
    ShellOpened, ShellReadArgs, ShellWriteArgs, ShellWritten,
};
pub use launch::{ChildEnv, Supervisor, adopt_orphans, remove_tmpdir_parent, sweep_stale_tmpdirs};
pub use limit::{DEFAULT_MAX_WAIT, DEFAULT_RUNNING, DEFAULT_WAITING, Limiter, Permit};
pub use output::ReadOutput;
pub use policy::Policy;

pub use run::{
    CommandSpec, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT_SECS, DEFAULT_YIELD_SECS, MAX_TIMEOUT_SECS,
    Outcome, Progress, ProgressFn, check_seconds, run,
};
pub use serverfs_supervisor::protocol::{MAX_COMMAND_BYTES, ViewProbe, signal_name};
pub use serverfs_supervisor::{
    Active as SandboxActive, Keep as KeptCapabilities, Network, SandboxConfig, probe_confine,
    probe_sandbox,
};
pub use session::{MAX_WAIT_MS, Owner, SessionConfig, SessionInfo, Sessions};
pub use settings::{CommandConfig, CommandSettings};
pub use startup::{Notice, StartupError, check_confinement};

/// Marks the server process non-dumpable (`PR_SET_DUMPABLE` 0): its
/// `/proc/<pid>/environ`, `mem`, `fd/`… become root-owned and unreadable
/// to other processes of the same user — the commands it runs — and it
/// cannot be ptraced by them. Call it first thing in `main` of serverfs-dev
/// (children are dumpable again after their `execve`).
pub fn harden_server_process() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}
