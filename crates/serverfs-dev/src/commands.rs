//! serverfs-dev's commands: one-shot `bash` and shell sessions, on
//! `serverfs-exec`.
//!
//! Guarantees: the command policy is checked before anything runs (and on
//! every line written to a session); the working directory is a directory
//! the root's resolver opened, handed to the command as `/proc/self/fd/N`
//! (never a re-resolved string), so `.git`, credentials and paths outside
//! the root cannot be a workdir; commands run concurrently up to a cap and
//! excess calls wait with a bound, then get `SERVER_BUSY`; when a call
//! ends — exit, timeout, `notifications/cancelled`, a client that
//! disconnects — nothing it started is left running (see the exec crate).
//! Sessions belong to their owner: over stdio the connection, over HTTP
//! the authenticated principal when there is one, else the session id
//! itself is the capability.

use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::{FsError, Root};
use serverfs_exec::{
    ChildEnv, CommandSpec, Limiter, Outcome, Owner, Policy, ProgressFn, ReadOutput, SessionConfig,
    SessionInfo, Sessions, Supervisor,
};
use serverfs_tools::{CallLog, Reported};
use tokio_util::sync::CancellationToken;

/// What runs commands: the supervisor to start them under, the cap, the
/// sessions and the policy. One per server.
#[derive(Debug)]
pub struct Commands {
    supervisor: Supervisor,
    limiter: Limiter,
    sessions: Sessions,
    policy: Policy,
    env: ChildEnv,
    /// Whether audit lines carry the command text.
    audit_text: bool,
}

impl Commands {
    /// Commands started as `supervisor`, at most `concurrency` at once,
    /// under `policy`. Must be called inside the runtime (the session
    /// reaper starts here).
    pub fn new(supervisor: Supervisor, policy: Policy, concurrency: usize) -> Self {
        let limiter = Limiter::new(concurrency, concurrency * 4, serverfs_exec::DEFAULT_MAX_WAIT);
        let sessions = Sessions::new(SessionConfig::new(supervisor.clone()));
        let env = ChildEnv::from_server();
        Self { supervisor, limiter, sessions, policy, env, audit_text: true }
    }

    /// Leaves the command text out of audit lines when `with_text` is false.
    #[must_use]
    pub fn with_audit_text(mut self, with_text: bool) -> Self {
        self.audit_text = with_text;
        self
    }

    /// The audit trail: one INFO `command` line per bash call or input
    /// written to a session, with who ran it, the command text (unless
    /// left out), how it ended (exit status, or the refusal's code) and
    /// how long the call took.
    pub fn audit(
        &self,
        principal: &str,
        tool: &str,
        command: &str,
        outcome: &Result<impl Audited, FsError>,
        started: Instant,
    ) {
        let status = match outcome {
            Ok(done) => done.status(),
            Err(e) => e.code().as_str().to_owned(),
        };
        let command = self.audit_text.then(|| command.chars().take(4096).collect::<String>());
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(event = "command", principal, tool, command, status, duration_ms);
    }

    /// Runs `args.command` in its workdir (located in `root`).
    pub async fn bash(
        &self,
        root: &Root,
        args: BashArgs,
        cancel: &CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<BashResult, FsError> {
        self.policy.check(&args.command)?;
        let timeout_seconds = args.timeout_seconds.unwrap_or(serverfs_exec::DEFAULT_TIMEOUT_SECS);
        serverfs_exec::check_timeout(timeout_seconds)?;
        let _slot = self.limiter.acquire().await?;
        // Kept open until the command has started in it.
        let workdir = root.walk_root(&root.locate(&args.workdir)?)?;
        let mut spec = CommandSpec::new(self.supervisor.clone(), args.command, workdir.path());
        spec.env = self.env.clone();
        spec.timeout_seconds = timeout_seconds;
        let outcome = serverfs_exec::run(spec, cancel, progress).await?;
        drop(workdir);
        Ok(BashResult::from(outcome))
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
    ) -> Result<ShellReadResult, FsError> {
        let read =
            self.sessions.read(owner, &args.session_id, args.offset, args.wait_ms, cancel).await?;
        Ok(ShellReadResult::from(read))
    }

    /// Closes a session, killing everything it started.
    pub async fn shell_close(&self, owner: &Owner, session_id: &str) -> Result<ShellInfo, FsError> {
        self.sessions.close(owner, session_id).await.map(ShellInfo::from)
    }

    /// The owner's sessions.
    pub fn shell_list(&self, owner: &Owner) -> ShellList {
        ShellList { sessions: self.sessions.list(owner).into_iter().map(ShellInfo::from).collect() }
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
}

impl Audited for BashResult {
    fn status(&self) -> String {
        match (self.exit_code, &self.signal, self.timed_out) {
            (_, _, true) => "timed out".to_owned(),
            (Some(code), _, _) => format!("exit {code}"),
            (None, Some(signal), _) => signal.clone(),
            (None, None, _) => "ended".to_owned(),
        }
    }
}

impl Audited for ShellWritten {
    fn status(&self) -> String {
        "written".to_owned()
    }
}

/// Runs `work` (an async command call) and logs it as one line when it
/// ends, like the runner does for file calls.
pub async fn logged<T: Reported>(
    call: CallLog,
    cancel: &CancellationToken,
    work: impl Future<Output = Result<T, FsError>>,
) -> Result<T, FsError> {
    let started = Instant::now();
    let outcome = work.await;
    call.write(&outcome, started, cancel.is_cancelled());
    outcome
}

/// Arguments of bash.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The command line, run by `bash --noprofile --norc -c`.
    pub command: String,
    /// Directory to run in, relative to the project root (default: the root).
    #[serde(default = "dot")]
    pub workdir: String,
    /// Seconds before the command and everything it started are killed (1 to 600, default 30).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u64>,
}

fn dot() -> String {
    ".".to_owned()
}

/// Result of bash. A non-zero exit is a result, not an error.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BashResult {
    /// bash's exit code; null when it was killed by a signal (a timeout included).
    pub exit_code: Option<i32>,
    /// The signal that ended it, e.g. SIGKILL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The first 16,000 characters of standard output.
    pub stdout: String,
    /// The first 16,000 characters of standard error.
    pub stderr: String,
    /// The timeout fired; the command and everything it started were killed.
    pub timed_out: bool,
    /// An output stream was longer than 16,000 characters and was cut.
    pub output_truncated: bool,
}

impl From<Outcome> for BashResult {
    fn from(o: Outcome) -> Self {
        Self {
            exit_code: o.exit_code,
            signal: o.signal,
            stdout: o.stdout,
            stderr: o.stderr,
            timed_out: o.timed_out,
            output_truncated: o.output_truncated,
        }
    }
}

impl Reported for BashResult {
    fn bytes_returned(&self) -> u64 {
        (self.stdout.len() + self.stderr.len()) as u64
    }
}

/// Arguments of shell_open.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellOpenArgs {
    /// Directory the shell starts in, relative to the project root (default: the root).
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
    pub session_id: String,
    /// Text for the shell's standard input; end a command with a newline.
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
    pub session_id: String,
    /// Absolute byte offset to read from: 0, then the previous next_offset.
    #[serde(default)]
    pub offset: u64,
    /// Milliseconds to wait for output when there is none yet (0 to 600000, default 0).
    #[serde(default)]
    #[schemars(range(max = 600_000))]
    pub wait_ms: u64,
}

/// Result of shell_read.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellReadResult {
    /// Output (stdout and stderr together) from offset to next_offset.
    pub output: String,
    /// Where output starts: the offset asked for, or the oldest kept byte when that was dropped.
    pub offset: u64,
    /// The offset to read from next.
    pub next_offset: u64,
    /// Bytes between the offset asked for and offset that were dropped from the buffer.
    pub dropped: u64,
    /// More output is already waiting beyond next_offset.
    pub more: bool,
    /// The shell has ended and all its output has been read into the buffer.
    pub exited: bool,
    /// Its exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, e.g. SIGKILL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl From<ReadOutput> for ShellReadResult {
    fn from(r: ReadOutput) -> Self {
        Self {
            output: r.output,
            offset: r.offset,
            next_offset: r.next_offset,
            dropped: r.dropped,
            more: r.more,
            exited: r.exited,
            exit_code: r.exit_code,
            signal: r.signal,
        }
    }
}

impl Reported for ShellReadResult {
    fn bytes_returned(&self) -> u64 {
        self.output.len() as u64
    }
}

/// Arguments of shell_close.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellCloseArgs {
    /// The session.
    pub session_id: String,
}

/// Arguments of shell_list (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellListArgs {}

/// One session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellInfo {
    /// The session's id.
    pub session_id: String,
    /// Bytes of output so far.
    pub end_offset: u64,
    /// Seconds since the last read or write.
    pub idle_seconds: u64,
    /// The shell has ended.
    pub exited: bool,
    /// Its exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl From<SessionInfo> for ShellInfo {
    fn from(s: SessionInfo) -> Self {
        Self {
            session_id: s.session_id,
            end_offset: s.end_offset,
            idle_seconds: s.idle.as_secs(),
            exited: s.exited,
            exit_code: s.exit_code,
            signal: s.signal,
        }
    }
}

impl Reported for ShellInfo {}

/// Result of shell_list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShellList {
    /// The caller's open sessions.
    pub sessions: Vec<ShellInfo>,
}

impl Reported for ShellList {}
