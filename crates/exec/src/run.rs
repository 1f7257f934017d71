//! One-shot commands: `bash --noprofile --norc -c COMMAND` under a
//! supervisor, both output streams drained concurrently and capped.
//!
//! A yielding run ([`Sessions::run`]) also keeps both streams merged
//! in a session buffer from the first byte; at the yield point it registers
//! that buffer and its own cancellation as a session of the caller, answers
//! with the output so far, and goes on driving the command exactly as
//! before (same timeout, same kill and sweep); its end state lands in the
//! buffer instead of an answer.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::Reported;
use serverfs_core::error::{ErrorCode, FsError};
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use crate::capped::CappedText;
use crate::driver::{FAR, drive};
use crate::launch::{ChildEnv, Spawned, Supervisor, internal, prepare_next, spawn_run};
use crate::output::{Shared, Tail, drain};
use crate::session::{Owner, Sessions};
use serverfs_supervisor::SandboxConfig;
use serverfs_supervisor::protocol::{Failure, MAX_COMMAND_BYTES};

/// Default `timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Largest `timeout_seconds`.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Default `yield_after_seconds`: under the 60 s request timeout of common
/// MCP clients.
pub const DEFAULT_YIELD_SECS: u64 = 30;
/// Scalar values kept of each stream by default.
pub const DEFAULT_OUTPUT_CAP: usize = 16_000;

/// One command to run.
#[derive(Clone, Debug)]
pub struct CommandSpec {
    /// How to start the supervisor.
    pub supervisor: Supervisor,
    /// The text given to `bash -c` (one argv element; never re-quoted).
    pub command: String,
    /// Starting directory, e.g. `/proc/self/fd/N` of a directory the
    /// resolver opened (it must stay open until [`run`] has spawned).
    pub cwd: PathBuf,
    /// The command's whole environment.
    pub env: ChildEnv,
    /// 1…600; anything else is `INVALID_ARGUMENT`.
    pub timeout_seconds: u64,
    /// Unicode scalar values kept of stdout and of stderr, each.
    pub output_cap: usize,
    /// How often the progress callback is called.
    pub progress_interval: Duration,
    /// The Landlock sandbox; `None`: none (`--sandbox off`).
    pub sandbox: Option<SandboxConfig>,
    /// Whom the command runs for, as the audit lines of its network
    /// connections name them.
    pub principal: String,
}

impl CommandSpec {
    /// A spec with the defaults: 30 s, 16,000 characters a stream, progress
    /// every 5 s, the server's `PATH`/`HOME`/`LANG`, no sandbox.
    pub fn new(
        supervisor: Supervisor,
        command: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        Self {
            supervisor,
            command: command.into(),
            cwd: cwd.into(),
            env: ChildEnv::from_server(),
            timeout_seconds: DEFAULT_TIMEOUT_SECS,
            output_cap: DEFAULT_OUTPUT_CAP,
            progress_interval: Duration::from_secs(5),
            sandbox: None,
            principal: String::new(),
        }
    }
}

/// A progress report for a running command.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Progress {
    /// Time since the command started.
    pub elapsed: Duration,
    /// The timeout it runs under.
    pub timeout: Duration,
    /// Lines of output written so far (both streams).
    pub lines: u64,
    /// The last non-blank line written, at most 200 bytes, control
    /// characters shown as `?`.
    pub last_line: Option<String>,
}

/// Called every [`CommandSpec::progress_interval`] while a command runs.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// How a command ended. A non-zero exit is an outcome, not an error.
///
/// It is the bash tool's result as sent (`BashResult`): the field docs a
/// client reads are the `schemars(description)`s.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "BashResult")]
pub struct Outcome {
    /// bash's exit code; `None` when it was killed by a signal (a timeout
    /// or a cancellation included).
    #[schemars(
        description = "bash's exit code; null when it was killed by a signal (a timeout included)."
    )]
    pub exit_code: Option<i32>,
    /// The signal that killed bash, e.g. `SIGKILL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = "The signal that ended it, e.g. SIGKILL.")]
    pub signal: Option<String>,
    /// The first `output_cap` characters of stdout.
    #[schemars(description = "The first 16,000 characters of standard output.")]
    pub stdout: String,
    /// The first `output_cap` characters of stderr.
    #[schemars(description = "The first 16,000 characters of standard error.")]
    pub stderr: String,
    /// The timeout fired; the command's tree was killed.
    #[schemars(
        description = "The timeout fired; the command and everything it started were killed."
    )]
    pub timed_out: bool,
    /// A stream was longer than the cap, or its pipe was still held open
    /// when collection stopped.
    #[schemars(description = "An output stream was longer than 16,000 characters and was cut.")]
    pub output_truncated: bool,
    /// The token fired (or the future was dropped); the tree was killed.
    /// Not sent: a cancelled call has no client left to read it.
    #[serde(skip)]
    pub cancelled: bool,
    /// Still running at the yield point: it goes on as session
    /// `session_id`. Not sent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(
        description = "Present and true when the command was still running at yield_after_seconds: it goes on as shell session session_id (exit_code is null until then)."
    )]
    pub running: bool,
    /// The session a yielded command goes on as.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        description = "When running: the shell session the command goes on as; poll it with shell_read, stop it with shell_close."
    )]
    pub session_id: Option<String>,
    /// Connections the proxy refused (on the network by allowlist), one
    /// line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        description = "Present when the proxy refused connections (network by allowlist): one line each, naming the host and why."
    )]
    pub network: Vec<String>,
    /// The git repositories the command created below the root (their git
    /// directories, relative to it): their hooks and config were the
    /// command's to write.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        description = "Present when the command created git repositories below the root: their git directories. Their hooks and config were written by the command; review them before running git there."
    )]
    pub repositories_created: Vec<String>,
    /// The command's id, as its audit lines name it. Not sent.
    #[serde(skip)]
    pub command_id: Option<String>,
    /// When running: the session offset where the output returned so far
    /// ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        description = "When running: the shell_read offset just past the output returned here (the session holds stdout and stderr merged, from offset 0)."
    )]
    pub next_offset: Option<u64>,
}

impl Reported for Outcome {
    fn bytes_returned(&self) -> u64 {
        (self.stdout.len() + self.stderr.len()) as u64
    }
}

/// Checks a duration argument given in seconds (1…600), named `argument`
/// in the refusal (`timeout_seconds`, `yield_after_seconds`).
pub fn check_seconds(argument: &str, seconds: u64) -> Result<Duration, FsError> {
    if (1..=MAX_TIMEOUT_SECS).contains(&seconds) {
        Ok(Duration::from_secs(seconds))
    } else {
        Err(FsError::invalid(format!(
            "{argument} must be between 1 and {MAX_TIMEOUT_SECS}, not {seconds}."
        )))
    }
}

/// Where a yielding run goes on: whose session it becomes, and when.
struct YieldTo {
    sessions: Sessions,
    owner: Owner,
    after: Duration,
}

/// Runs one command to its end, its timeout or its cancellation, and
/// returns only when every process of its tree is gone (see the crate
/// docs). Dropping the future, or firing `cancel`, kills the tree too: the
/// work happens in a spawned task that outlives a dropped future.
///
/// Must be called inside a tokio runtime. The command policy is the
/// caller's to apply first ([`crate::policy::Policy::check`]).
pub async fn run(
    spec: CommandSpec,
    cancel: &CancellationToken,
    progress: Option<ProgressFn>,
) -> Result<Outcome, FsError> {
    run_inner(spec, cancel, progress, None).await
}

impl Sessions {
    /// Runs a command like [`run()`], except that one still running
    /// after `yield_after` returns at once with `running: true`, its output
    /// so far, a `session_id` and the `next_offset` where that output ends,
    /// and goes on as a session of `owner` (see the session module's docs). The
    /// session's output is stdout and stderr merged in arrival order from
    /// the command's first byte (offset 0). When `owner` has no room for
    /// one more session, the command does not yield and runs to its end.
    pub async fn run(
        &self,
        owner: &Owner,
        spec: CommandSpec,
        yield_after: Duration,
        cancel: &CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<Outcome, FsError> {
        let to = YieldTo { sessions: self.clone(), owner: owner.clone(), after: yield_after };
        run_inner(spec, cancel, progress, Some(to)).await
    }
}

/// [`run`], yielding to a session when `yield_to` says so: once yielded,
/// `cancel` and dropping this future no longer reach the command (the
/// session's close does).
async fn run_inner(
    spec: CommandSpec,
    cancel: &CancellationToken,
    progress: Option<ProgressFn>,
    yield_to: Option<YieldTo>,
) -> Result<Outcome, FsError> {
    let timeout = check_seconds("timeout_seconds", spec.timeout_seconds)?;
    if spec.command.contains('\0') {
        return Err(FsError::invalid("The command contains a NUL character."));
    }
    if spec.command.len() > MAX_COMMAND_BYTES {
        return Err(FsError::invalid(format!(
            "The command is longer than {MAX_COMMAND_BYTES} bytes; write a script file and run it."
        )));
    }
    let mut spawned = spawn_run(
        &spec.supervisor,
        &spec.command,
        &spec.cwd,
        &spec.env,
        spec.sandbox.as_ref(),
        &spec.principal,
    )
    .await?;
    let command_id = spawned.id.clone();
    let (Some(stdout), Some(stderr)) = (spawned.child.stdout.take(), spawned.child.stderr.take())
    else {
        return Err(FsError::new(ErrorCode::InternalError, "Could not start the command."));
    };
    // Not a child of `cancel`: linked below only until the command yields.
    let token = CancellationToken::new();
    // Fires `token` if this future is dropped before the task is done.
    let guard = token.clone().drop_guard();
    let (yielded_tx, mut yielded_rx) = tokio::sync::oneshot::channel();
    let merged = yield_to.as_ref().map(|to| (Shared::new(), to.sessions.buffer_cap()));
    let task = Drive {
        spawned,
        stdout: Box::new(stdout),
        stderr: Box::new(stderr),
        timeout,
        cap: spec.output_cap,
        token: token.clone(),
        progress,
        progress_interval: spec.progress_interval.max(Duration::from_millis(100)),
        merged,
        yield_to: yield_to.map(|to| (to, yielded_tx)),
    };
    let mut task = tokio::spawn(task.run());
    let mut may_yield = true;
    let result = loop {
        tokio::select! {
            // A yield wins over an end seen at the same time: the session
            // exists then, and has the end.
            biased;
            y = &mut yielded_rx, if may_yield => match y {
                Ok(outcome) => break Ok(outcome),
                Err(_) => may_yield = false,
            },
            r = &mut task => break r.map_err(|e| internal("The command's task failed", e))?,
            () = cancel.cancelled(), if !token.is_cancelled() => token.cancel(),
        }
    };
    drop(guard.disarm());
    prepare_next(&spec.supervisor, &spec.env, spec.sandbox.as_ref());
    result.map(|outcome| Outcome { command_id: Some(command_id), ..outcome })
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;

struct Drive {
    spawned: Spawned,
    stdout: Reader,
    stderr: Reader,
    timeout: Duration,
    cap: usize,
    token: CancellationToken,
    progress: Option<ProgressFn>,
    progress_interval: Duration,
    /// Both streams merged, with the buffer cap (a yielding run only).
    merged: Option<(Arc<Shared>, usize)>,
    /// Whose session it becomes, and where to send the yielded answer.
    yield_to: Option<(YieldTo, tokio::sync::oneshot::Sender<Outcome>)>,
}

fn take(sink: &Mutex<CappedText>) -> (String, bool) {
    let mut g = sink.lock().unwrap_or_else(PoisonError::into_inner);
    std::mem::replace(&mut *g, CappedText::new(0)).finish()
}

fn peek(sink: &Mutex<CappedText>) -> (String, bool) {
    sink.lock().unwrap_or_else(PoisonError::into_inner).snapshot()
}

/// Registers the running command as a session of `to.owner` and returns the
/// yielded answer; `None` when the owner has no room (the run goes on).
fn yield_now(
    to: &YieldTo,
    started: Instant,
    shared: &Arc<Shared>,
    token: &CancellationToken,
    out: &Mutex<CappedText>,
    err: &Mutex<CappedText>,
) -> Option<Outcome> {
    let (next_offset, (stdout, out_trunc), (stderr, err_trunc)) = {
        let b = shared.lock();
        (b.complete_end(), peek(out), peek(err))
    };
    let session_id = to.sessions.adopt(&to.owner, shared.clone(), token.clone(), started).ok()?;
    Some(Outcome {
        stdout,
        stderr,
        output_truncated: out_trunc || err_trunc,
        running: true,
        session_id: Some(session_id),
        next_offset: Some(next_offset),
        ..Outcome::default()
    })
}

impl Drive {
    /// The command's timeout, cancellation, yield point and progress, around
    /// the driver (which stops, ends and drains it).
    async fn run(self) -> Result<Outcome, FsError> {
        let Drive {
            spawned,
            stdout,
            stderr,
            timeout,
            cap,
            token,
            mut progress,
            progress_interval,
            merged,
            mut yield_to,
        } = self;
        let out_sink = Mutex::new(CappedText::new(cap));
        let err_sink = Mutex::new(CappedText::new(cap));
        let merged_ref = merged.as_ref().map(|(shared, cap)| (&**shared, *cap));
        let tail = Mutex::new(Tail::default());
        // Polled in this task (no task of their own): at the command's end
        // its output and its exit wake one task, not three.
        let output = async {
            tokio::join!(
                drain(stdout, Some(&out_sink), merged_ref, Some(&tail)),
                drain(stderr, Some(&err_sink), merged_ref, Some(&tail)),
            );
        };
        let stop = CancellationToken::new();
        let driven = drive(spawned, stop.clone(), output);
        tokio::pin!(driven);

        let start = Instant::now();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + progress_interval,
            progress_interval,
        );
        // A yield point at or after the timeout never comes: the command
        // ends there anyway.
        let yield_after = yield_to.as_ref().map_or(FAR, |(to, _)| to.after);
        let yield_at = tokio::time::sleep(if yield_after < timeout { yield_after } else { FAR });
        tokio::pin!(yield_at);

        let mut timed_out = false;
        let mut cancelled = false;
        let ending = loop {
            tokio::select! {
                ending = &mut driven => break ending,
                () = &mut deadline, if !stop.is_cancelled() => {
                    timed_out = true;
                    stop.cancel();
                }
                () = token.cancelled(), if !stop.is_cancelled() => {
                    cancelled = true;
                    stop.cancel();
                }
                () = &mut yield_at, if yield_to.is_some() && !stop.is_cancelled() => {
                    if let (Some((to, tx)), Some((shared, _))) = (yield_to.take(), &merged)
                        && let Some(answer) = yield_now(&to, start, shared, &token, &out_sink, &err_sink)
                        && tx.send(answer).is_ok()
                    {
                        // The call has answered: no progress for it any more.
                        progress = None;
                    }
                }
                _ = tick.tick(), if progress.is_some() && !stop.is_cancelled() => {
                    if let Some(p) = &progress {
                        let (lines, last_line) =
                            tail.lock().unwrap_or_else(PoisonError::into_inner).report();
                        p(Progress { elapsed: start.elapsed(), timeout, lines, last_line });
                    }
                }
            }
        };
        let (stdout, out_trunc) = take(&out_sink);
        let (stderr, err_trunc) = take(&err_sink);
        if let Some((shared, _)) = &merged {
            shared.finish(ending.ended);
        }
        let Some(ended) = ending.ended else {
            let why = match ending.not_started {
                Some(Failure::Cwd) => {
                    "The command was not run: its working directory is not the one the call named (moved, replaced or removed meanwhile)."
                }
                Some(_) => {
                    "The command was not run: its sandbox could not be set up as at the server's start (a layer is never left out; the server's log says which; the project root or a --command-writable path moved or replaced since the start is one such cause)."
                }
                None => {
                    return Err(FsError::new(
                        ErrorCode::InternalError,
                        "The command's supervisor failed.",
                    )
                    .with_detail("no believable status line from the supervisor"));
                }
            };
            return Err(FsError::new(ErrorCode::InternalError, why));
        };
        Ok(Outcome {
            network: ending.network,
            repositories_created: ending.repos,
            exit_code: ended.exit_code(),
            signal: ended.signal_name(),
            stdout,
            stderr,
            // A command that ended by itself just as the deadline fired
            // ran to completion: not a timeout.
            timed_out: timed_out && ended.exit_code().is_none(),
            output_truncated: out_trunc || err_trunc || !ending.drained,
            cancelled,
            ..Outcome::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_checked_within_1_to_600_and_the_refusal_names_the_argument() {
        assert_eq!(check_seconds("timeout_seconds", 1).unwrap(), Duration::from_secs(1));
        assert_eq!(check_seconds("timeout_seconds", 600).unwrap(), Duration::from_secs(600));
        for bad in [0, 601, u64::MAX] {
            let e = check_seconds("yield_after_seconds", bad).unwrap_err();
            assert_eq!(e.code(), serverfs_core::ErrorCode::InvalidArgument);
            assert!(
                e.to_string()
                    .contains(&format!("yield_after_seconds must be between 1 and 600, not {bad}")),
                "{e}"
            );
        }
    }
}
