//! One-shot commands: `bash --noprofile --norc -c COMMAND` under a
//! supervisor, both output streams drained concurrently and capped.
//!
//! A yielding run ([`crate::Sessions::run`]) also keeps both streams merged
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
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::capped::CappedText;
use crate::sandbox::SandboxConfig;
use crate::session::{Owner, Sessions, Shared};
use crate::spawn::{
    ChildEnv, STOP_GRACE, internal, prepare_next, reaped, spawn_run, sweep_orphans, terminate,
};
use crate::status::believed;
use crate::supervisor::Supervisor;

/// Default `timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Largest `timeout_seconds`.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Default `yield_after_seconds`: under the 60 s request timeout of common
/// MCP clients.
pub const DEFAULT_YIELD_SECS: u64 = 30;
/// The longest command (Linux refuses a single argument over 128 KiB).
pub const MAX_COMMAND_BYTES: usize = 100_000;
/// Scalar values kept of each stream by default.
pub const DEFAULT_OUTPUT_CAP: usize = 16_000;
/// After the supervisor exited (every descendant is dead), how long the
/// pipes may stay open (only a non-descendant holding them could do that)
/// before collection stops.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// A deadline that never comes.
const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

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
        }
    }
}

/// A progress report for a running command.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Progress {
    /// Time since the command started.
    pub elapsed: Duration,
    /// The timeout it runs under.
    pub timeout: Duration,
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
pub(crate) struct YieldTo {
    pub(crate) sessions: Sessions,
    pub(crate) owner: Owner,
    pub(crate) after: Duration,
}

/// Runs one command to its end, its timeout or its cancellation, and
/// returns only when every process of its tree is gone (see the crate
/// docs). Dropping the future, or firing `cancel`, kills the tree too: the
/// work happens in a spawned task that outlives a dropped future.
///
/// Must be called inside a tokio runtime. The command policy is the
/// caller's to apply first ([`crate::Policy::check`]).
pub async fn run(
    spec: CommandSpec,
    cancel: &CancellationToken,
    progress: Option<ProgressFn>,
) -> Result<Outcome, FsError> {
    run_inner(spec, cancel, progress, None).await
}

/// [`run`], yielding to a session when `yield_to` says so: once yielded,
/// `cancel` and dropping this future no longer reach the command (the
/// session's close does).
pub(crate) async fn run_inner(
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
    let mut spawned =
        spawn_run(&spec.supervisor, &spec.command, &spec.cwd, &spec.env, spec.sandbox.as_ref())?;
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
    result
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;

struct Drive {
    spawned: crate::spawn::Spawned,
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

/// Reads a stream to its end into a shared capped sink (what was read stays
/// there when the drain is dropped unfinished) and the merged buffer, if
/// any. The buffer's lock is taken first, so that a snapshot under it sees
/// both alike.
async fn drain(mut r: Reader, sink: Arc<Mutex<CappedText>>, merged: Option<(Arc<Shared>, usize)>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let buffer = merged.as_ref().map(|(shared, cap)| {
                    let mut b = shared.lock();
                    b.append(&buf[..n], *cap);
                    b
                });
                sink.lock().unwrap_or_else(PoisonError::into_inner).push(&buf[..n]);
                drop(buffer);
                if let Some((shared, _)) = &merged {
                    shared.bump();
                }
            }
        }
    }
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
    shared: &Arc<Shared>,
    token: &CancellationToken,
    out: &Mutex<CappedText>,
    err: &Mutex<CappedText>,
) -> Option<Outcome> {
    let (next_offset, (stdout, out_trunc), (stderr, err_trunc)) = {
        let b = shared.lock();
        (b.complete_end(), peek(out), peek(err))
    };
    let session_id = to.sessions.adopt(&to.owner, shared.clone(), token.clone()).ok()?;
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
        let crate::spawn::Spawned { mut child, control, tmp } = spawned;
        let supervisor_pid = child.id();
        // Shutting our writing down is the stop: the supervisor reads end
        // of file and kills the tree.
        let mut stopping = false;
        let stop = |stopping: &mut bool| {
            let _ = control.shutdown(std::net::Shutdown::Write);
            *stopping = true;
        };

        let out_sink = Arc::new(Mutex::new(CappedText::new(cap)));
        let err_sink = Arc::new(Mutex::new(CappedText::new(cap)));
        // Polled in this task (no task of their own): at the command's end
        // its output and its exit wake one task, not three.
        let out_drain = drain(stdout, out_sink.clone(), merged.clone());
        let err_drain = drain(stderr, err_sink.clone(), merged.clone());
        tokio::pin!(out_drain, err_drain);
        let (mut out_done, mut err_done) = (false, false);

        let start = Instant::now();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + progress_interval,
            progress_interval,
        );
        // Escalation after the stop request: SIGTERM, then SIGKILL.
        let escalate = tokio::time::sleep(FAR);
        tokio::pin!(escalate);
        let mut escalation = 0u8;
        // A yield point at or after the timeout never comes: the command
        // ends there anyway.
        let yield_after = yield_to.as_ref().map_or(FAR, |(to, _)| to.after);
        let yield_at = tokio::time::sleep(if yield_after < timeout { yield_after } else { FAR });
        tokio::pin!(yield_at);

        let mut exited: Option<Option<std::process::ExitStatus>> = None;
        let mut timed_out = false;
        let mut cancelled = false;
        while exited.is_none() {
            tokio::select! {
                // The status line is read once the supervisor has exited
                // (it is written just before): the channel is not watched.
                r = child.wait() => exited = Some(r.ok()),
                () = &mut out_drain, if !out_done => out_done = true,
                () = &mut err_drain, if !err_done => err_done = true,
                () = &mut deadline, if !stopping => {
                    timed_out = true;
                    stop(&mut stopping);
                    escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                }
                () = token.cancelled(), if !stopping => {
                    cancelled = true;
                    stop(&mut stopping);
                    escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                }
                () = &mut yield_at, if yield_to.is_some() && !stopping => {
                    if let (Some((to, tx)), Some((shared, _))) = (yield_to.take(), &merged)
                        && let Some(answer) = yield_now(&to, shared, &token, &out_sink, &err_sink)
                        && tx.send(answer).is_ok()
                    {
                        // The call has answered: no progress for it any more.
                        progress = None;
                    }
                }
                _ = tick.tick(), if progress.is_some() && !stopping => {
                    if let Some(p) = &progress {
                        p(Progress { elapsed: start.elapsed(), timeout });
                    }
                }
                () = &mut escalate, if stopping => {
                    escalation += 1;
                    if escalation == 1 {
                        terminate(&child);
                        escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                    } else {
                        let _ = child.start_kill();
                        escalate.as_mut().reset(tokio::time::Instant::now() + FAR);
                    }
                }
            }
        }
        stop(&mut stopping);
        reaped(supervisor_pid);
        // Whatever the supervisor said: if it died before its tree (killed
        // from outside), what is left was re-parented to us (when we adopt
        // orphans); a status line proves nothing (see the status module).
        sweep_orphans(exited.flatten().is_some_and(|s| s.success())).await;
        // The supervisor wrote it before exiting: it is buffered.
        let status = believed(&control, exited.flatten());

        // Every descendant is dead: the pipes close now, unless a process
        // outside the tree holds them (fd passing); then stop collecting.
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            if !out_done {
                out_drain.as_mut().await;
            }
            if !err_done {
                err_drain.as_mut().await;
            }
        })
        .await
        .is_ok();
        let (stdout, out_trunc) = take(&out_sink);
        let (stderr, err_trunc) = take(&err_sink);
        if let Some((shared, _)) = &merged {
            {
                let mut b = shared.lock();
                b.ended = status;
                b.exited = true;
            }
            shared.bump();
        }

        drop(tmp);
        let Some(ended) = status else {
            return Err(FsError::new(ErrorCode::InternalError, "The command's supervisor failed.")
                .with_detail("no believable status line from the supervisor"));
        };
        Ok(Outcome {
            exit_code: ended.exit_code(),
            signal: ended.signal_name(),
            stdout,
            stderr,
            // A command that ended by itself just as the deadline fired
            // ran to completion: not a timeout.
            timed_out: timed_out && ended.exit_code().is_none(),
            output_truncated: out_trunc || err_trunc || !drained,
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
