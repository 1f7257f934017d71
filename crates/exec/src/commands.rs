//! The command tools as one service: one-shot `bash` and shell sessions
//! under the policy, the cap, the sandbox and the audit trail, with their
//! argument and result types (and the text a model reads of them).
//!
//! Guarantees: the command policy is checked before anything runs (and on
//! every line written to a session); the working directory is a directory
//! the root's resolver opened, handed to the command as `/proc/self/fd/N`
//! (never a re-resolved string), so `.git`, credentials and paths outside
//! the root cannot be a workdir; commands run concurrently up to a cap and
//! excess calls wait with a bound, then get `SERVER_BUSY`; when a call
//! ends — exit, timeout, `notifications/cancelled`, a client that
//! disconnects — nothing it started is left running (see the crate docs).
//! Sessions belong to their owner: over stdio the connection, over HTTP
//! the authenticated principal when there is one, else the session id
//! itself is the capability.
//!
//! A `bash` command still running at `yield_after_seconds` answers with its
//! output so far and goes on as a session of the caller. It moves from the
//! `bash` cap to the session caps at that point: its `bash` slot is freed
//! when the call answers, and it counts as one of the owner's sessions
//! until closed or reaped (when the owner has none left, it does not yield
//! and keeps its slot to the end). Running commands are thus bounded by
//! the `bash` cap plus the session caps.

use std::fmt::Write as _;
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::{FsError, Reported, Root, ToText};
use tokio_util::sync::CancellationToken;

use crate::launch::{ChildEnv, Supervisor};
use crate::limit::{DEFAULT_MAX_WAIT, Limiter};
use crate::output::ReadOutput;
use crate::policy::Policy;
use crate::run::{
    CommandSpec, DEFAULT_TIMEOUT_SECS, DEFAULT_YIELD_SECS, Outcome, ProgressFn, check_seconds,
};
use crate::session::{Owner, SessionConfig, SessionInfo, Sessions, short_id};
use crate::settings::CommandConfig;
use serverfs_supervisor::SandboxConfig;

/// What runs commands: the supervisor to start them under, the cap, the
/// sessions and the policy. One per server.
#[derive(Debug)]
pub struct Commands {
    supervisor: Supervisor,
    limiter: Limiter,
    sessions: Sessions,
    policy: Policy,
    env: ChildEnv,
    sandbox: Option<SandboxConfig>,
    /// Whether audit lines carry the command text.
    audit_text: bool,
}

impl Commands {
    /// Commands started as `supervisor` under `config` (policy, cap,
    /// sandbox, audit text). Must be called inside the runtime (the
    /// session reaper starts here).
    pub fn new(supervisor: Supervisor, config: CommandConfig) -> Self {
        let CommandConfig {
            policy,
            fair_share,
            max_concurrent,
            sandbox,
            audit_text,
            capabilities,
            egress,
        } = config;
        if !capabilities.is_empty() {
            if rustix::process::geteuid().is_root() {
                tracing::info!(event = "command_capabilities", kept = ?capabilities.names());
            } else {
                tracing::warn!(
                    event = "config_warning",
                    message = "SERVERFS_COMMAND_CAPABILITIES (--command-capabilities) has no effect: the server is not root, so its commands have no capabilities to keep",
                );
            }
        }
        let mut supervisor = supervisor.keeping(capabilities);
        if let Some(egress) = egress {
            supervisor = supervisor.with_egress(std::sync::Arc::new(egress));
        }
        let mut limiter = Limiter::new(max_concurrent, max_concurrent * 4, DEFAULT_MAX_WAIT);
        if fair_share {
            limiter = limiter.fair_share();
        }
        let mut cfg = SessionConfig::new(supervisor.clone());
        cfg.sandbox = sandbox.clone();
        let sessions = Sessions::new(cfg);
        let env = ChildEnv::from_server();
        Self { supervisor, limiter, sessions, policy, env, sandbox, audit_text }
    }

    /// The audit trail: one INFO `command` line per command tool call
    /// (bash, shell_open, shell_write, shell_read, shell_close), with who
    /// called, the command text or input when there is one (unless left
    /// out), the session it concerns (the first 8 hex digits of its id),
    /// how it ended (exit status, or the refusal's code) and how long the
    /// call took. Sessions add their own lines: `session_ended` when one
    /// ends (a yielded command included), `session_closed` when the server
    /// closes one (idle, shutdown).
    pub fn audit(
        &self,
        principal: &str,
        tool: &str,
        command: Option<&str>,
        session: Option<&str>,
        outcome: &Result<impl Audited, FsError>,
        started: Instant,
    ) {
        let status = match outcome {
            Ok(done) => done.status(),
            Err(e) => e.code().as_str().to_owned(),
        };
        let command_id = outcome.as_ref().ok().and_then(Audited::command_id);
        let repositories_created = outcome
            .as_ref()
            .ok()
            .map(Audited::repositories_created)
            .filter(|created| !created.is_empty());
        let command = command
            .filter(|_| self.audit_text)
            .map(|command| command.chars().take(4096).collect::<String>());
        let session = session.map(short_id);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            event = "command",
            principal,
            tool,
            command,
            command_id,
            session,
            status,
            duration_ms,
            repositories_created = repositories_created.map(|created| format!("{created:?}")),
        );
    }

    /// Runs `args.command` in its workdir (located in `root`); one still
    /// running at its yield point goes on as a session of `owner`.
    pub async fn bash(
        &self,
        root: &Root,
        owner: &Owner,
        args: BashArgs,
        cancel: &CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<Outcome, FsError> {
        self.policy.check(&args.command)?;
        let timeout_seconds = args.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECS);
        check_seconds("timeout_seconds", timeout_seconds)?;
        let yield_after = check_seconds(
            "yield_after_seconds",
            args.yield_after_seconds.unwrap_or(DEFAULT_YIELD_SECS),
        )?;
        let _slot = self.limiter.acquire(owner.name()).await?;
        // Kept open until the command has started in it.
        let workdir = root.walk_root(&root.locate(&args.workdir)?)?;
        let mut spec = CommandSpec::new(self.supervisor.clone(), args.command, workdir.path());
        spec.env = self.env.clone();
        spec.timeout_seconds = timeout_seconds;
        spec.sandbox = self.sandbox.clone();
        spec.principal = owner.name().to_owned();
        let outcome = self.sessions.run(owner, spec, yield_after, cancel, progress).await?;
        drop(workdir);
        Ok(outcome)
    }

    /// Opens a shell session in `workdir` for `owner`.
    pub fn shell_open(
        &self,
        root: &Root,
        owner: &Owner,
        workdir: &str,
    ) -> Result<ShellOpened, FsError> {
        let workdir = root.walk_root(&root.locate(workdir)?)?;
        let session_id = self.sessions.open(owner, workdir.path(), Some(&self.env))?;
        Ok(ShellOpened { session_id })
    }

    /// Writes `input` to a session, each line checked by the policy first.
    pub async fn shell_write(
        &self,
        owner: &Owner,
        args: &ShellWriteArgs,
    ) -> Result<ShellWritten, FsError> {
        self.policy.check_input(&args.input)?;
        self.sessions.write(owner, &args.session_id, &args.input).await?;
        Ok(ShellWritten { bytes_written: args.input.len() as u64 })
    }

    /// Reads a session's output from `offset`, waiting up to `wait_ms`.
    pub async fn shell_read(
        &self,
        owner: &Owner,
        args: &ShellReadArgs,
        cancel: &CancellationToken,
    ) -> Result<ReadOutput, FsError> {
        self.sessions.read(owner, &args.session_id, args.offset, args.wait_ms, cancel).await
    }

    /// Closes a session, killing everything it started.
    pub async fn shell_close(
        &self,
        owner: &Owner,
        session_id: &str,
    ) -> Result<SessionInfo, FsError> {
        self.sessions.close(owner, session_id).await
    }

    /// The owner's sessions.
    pub fn shell_list(&self, owner: &Owner) -> ShellList {
        ShellList { sessions: self.sessions.list(owner) }
    }

    /// Closes every session (at shutdown).
    pub async fn close_all(&self) {
        self.sessions.close_all().await;
    }
}

/// How a command call ended, for its audit line.
pub trait Audited {
    /// `exit 0`, `SIGKILL`, `timed out`, `written`.
    fn status(&self) -> String;

    /// The command's id, which the audit lines of its network connections
    /// name too.
    fn command_id(&self) -> Option<&str> {
        None
    }

    /// The git repositories the command created below the root.
    fn repositories_created(&self) -> &[String] {
        &[]
    }
}

impl Audited for Outcome {
    fn status(&self) -> String {
        match (self.exit_code, &self.signal, self.timed_out) {
            _ if self.running => "running".to_owned(),
            (_, _, true) => "timed out".to_owned(),
            (Some(code), _, _) => format!("exit {code}"),
            (None, Some(signal), _) => signal.clone(),
            (None, None, _) => "ended".to_owned(),
        }
    }

    fn command_id(&self) -> Option<&str> {
        self.command_id.as_deref()
    }

    fn repositories_created(&self) -> &[String] {
        &self.repositories_created
    }
}

impl Audited for ShellWritten {
    fn status(&self) -> String {
        "written".to_owned()
    }
}

impl Audited for ShellOpened {
    fn status(&self) -> String {
        "opened".to_owned()
    }
}

impl Audited for ReadOutput {
    fn status(&self) -> String {
        let read = format!("read {} bytes", self.output.len());
        match (self.exited, self.exit_code, &self.signal) {
            (false, _, _) => read,
            (true, Some(code), _) => format!("{read}, exited: exit {code}"),
            (true, None, Some(signal)) => format!("{read}, exited: {signal}"),
            (true, None, None) => format!("{read}, exited"),
        }
    }
}

impl Audited for SessionInfo {
    fn status(&self) -> String {
        match (self.exit_code, &self.signal) {
            (Some(code), _) => format!("closed: exit {code}"),
            (None, Some(signal)) => format!("closed: {signal}"),
            (None, None) => "closed".to_owned(),
        }
    }
}

/// Arguments of bash.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The command line, run by `bash --noprofile --norc -c`.
    // The schema's description is empty: the name says it, and a model
    // reads every byte on every turn.
    #[schemars(description = "")]
    pub command: String,
    /// Directory (default the root).
    #[serde(default = "dot")]
    pub workdir: String,
    /// Seconds before it is killed (default 30).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u64>,
    /// Seconds before a command still running answers with its output so far (default 30).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub yield_after_seconds: Option<u64>,
}

impl BashArgs {
    /// For a call run as an MCP task: it yields only when the caller asked
    /// (`yield_after_seconds`); otherwise it runs to its end or timeout,
    /// since the task is how the client waits for it. (A yield at the
    /// timeout is none: yielding happens only below it.)
    pub fn run_to_end_unless_yield_asked(&mut self) {
        if self.yield_after_seconds.is_none() {
            self.yield_after_seconds = Some(self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECS));
        }
    }
}

fn dot() -> String {
    ".".to_owned()
}

/// Arguments of shell_open.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellOpenArgs {
    /// Directory (default the root).
    #[serde(default = "dot")]
    pub workdir: String,
}

/// Result of shell_open.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellOpened {
    /// The session's id (128 random bits): pass it to shell_write, shell_read and shell_close.
    pub session_id: String,
}

impl Reported for ShellOpened {}

/// Arguments of shell_write.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellWriteArgs {
    /// The session.
    #[schemars(description = "")]
    pub session_id: String,
    /// End a command with a newline.
    pub input: String,
}

/// Result of shell_write.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellWritten {
    /// Bytes handed to the shell.
    pub bytes_written: u64,
}

impl Reported for ShellWritten {}

/// Arguments of shell_read.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellReadArgs {
    /// The session.
    #[schemars(description = "")]
    pub session_id: String,
    /// Byte offset: 0, then next_offset.
    #[serde(default)]
    pub offset: u64,
    /// Milliseconds to wait for output.
    #[serde(default)]
    #[schemars(range(max = 50_000))]
    pub wait_ms: u64,
}

/// Arguments of shell_close.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellCloseArgs {
    /// The session.
    #[schemars(description = "")]
    pub session_id: String,
}

/// Arguments of shell_list (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellListArgs {}

/// Result of shell_list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellList {
    /// The caller's open sessions.
    pub sessions: Vec<SessionInfo>,
}

impl Reported for ShellList {}

impl ToText for ShellOpened {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let _ = writeln!(out, "session_id: {}", self.session_id);
    }
}

impl ToText for ShellWritten {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        let _ =
            writeln!(out, "wrote {} bytes; read the output with shell_read", self.bytes_written);
    }
}

impl ToText for ShellList {
    fn to_text(&self, workdir: Option<&str>, out: &mut String) {
        if self.sessions.is_empty() {
            out.push_str("no open sessions\n");
        }
        for s in &self.sessions {
            s.to_text(workdir, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(timeout: Option<u64>, yield_after: Option<u64>) -> BashArgs {
        BashArgs {
            command: "true".to_owned(),
            workdir: dot(),
            timeout_seconds: timeout,
            yield_after_seconds: yield_after,
        }
    }

    /// A task's command yields only when asked: by default it waits for
    /// its timeout (yield at the timeout is no yield).
    #[test]
    fn a_task_runs_to_its_end_unless_a_yield_is_asked() {
        let mut long = args(Some(600), None);
        long.run_to_end_unless_yield_asked();
        assert_eq!(long.yield_after_seconds, Some(600));
        let mut default = args(None, None);
        default.run_to_end_unless_yield_asked();
        assert_eq!(default.yield_after_seconds, Some(DEFAULT_TIMEOUT_SECS));
        let mut asked = args(Some(600), Some(5));
        asked.run_to_end_unless_yield_asked();
        assert_eq!(asked.yield_after_seconds, Some(5));
    }
}
