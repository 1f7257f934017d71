//! One-shot commands: `bash --noprofile --norc -c COMMAND` under a
//! supervisor, both output streams drained concurrently and capped.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::Reported;
use serverfs_core::error::{ErrorCode, FsError};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::capped::CappedText;
use crate::spawn::{ChildEnv, STOP_GRACE, internal, reaped, spawn, sweep_orphans, terminate};
use crate::status::Ended;
use crate::supervisor::Supervisor;

/// Default `timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Largest `timeout_seconds`.
pub const MAX_TIMEOUT_SECS: u64 = 600;
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
}

impl CommandSpec {
    /// A spec with the defaults: 30 s, 16,000 characters a stream, progress
    /// every 5 s, the server's `PATH`/`HOME`/`LANG`/`TMPDIR`.
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
}

impl Reported for Outcome {
    fn bytes_returned(&self) -> u64 {
        (self.stdout.len() + self.stderr.len()) as u64
    }
}

/// Checks `timeout_seconds` (1…600).
pub fn check_timeout(timeout_seconds: u64) -> Result<Duration, FsError> {
    if (1..=MAX_TIMEOUT_SECS).contains(&timeout_seconds) {
        Ok(Duration::from_secs(timeout_seconds))
    } else {
        Err(FsError::invalid(format!(
            "timeout_seconds must be between 1 and {MAX_TIMEOUT_SECS}, not {timeout_seconds}."
        )))
    }
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
    let timeout = check_timeout(spec.timeout_seconds)?;
    if spec.command.contains('\0') {
        return Err(FsError::invalid("The command contains a NUL character."));
    }
    if spec.command.len() > MAX_COMMAND_BYTES {
        return Err(FsError::invalid(format!(
            "The command is longer than {MAX_COMMAND_BYTES} bytes; write a script file and run it."
        )));
    }
    let mut spawned = spawn(
        &spec.supervisor,
        &[OsStr::new("run"), OsStr::new(&spec.command)],
        &spec.cwd,
        &spec.env,
        Stdio::piped(),
        Stdio::piped(),
    )?;
    let (Some(stdout), Some(stderr)) = (spawned.child.stdout.take(), spawned.child.stderr.take())
    else {
        return Err(FsError::new(ErrorCode::InternalError, "Could not start the command."));
    };
    let token = cancel.child_token();
    // Fires `token` if this future is dropped before the task is done.
    let guard = token.clone().drop_guard();
    let task = Drive {
        spawned,
        stdout: Box::new(stdout),
        stderr: Box::new(stderr),
        timeout,
        cap: spec.output_cap,
        token,
        progress,
        progress_interval: spec.progress_interval.max(Duration::from_millis(100)),
    };
    let result = tokio::spawn(task.run()).await;
    drop(guard.disarm());
    result.map_err(|e| internal("The command's task failed", e))?
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
}

/// Reads a stream to its end into a shared capped sink (shared so that what
/// was read survives an abort).
async fn drain(mut r: Reader, sink: Arc<Mutex<CappedText>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => sink.lock().unwrap_or_else(PoisonError::into_inner).push(&buf[..n]),
        }
    }
}

fn take(sink: &Mutex<CappedText>) -> (String, bool) {
    let mut g = sink.lock().unwrap_or_else(PoisonError::into_inner);
    std::mem::replace(&mut *g, CappedText::new(0)).finish()
}

/// Reads the supervisor's status line (at most a few bytes, then EOF).
async fn read_status(mut r: tokio::net::unix::OwnedReadHalf) -> Option<Ended> {
    let mut line = Vec::new();
    let mut buf = [0u8; 128];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if line.len() < 256 {
                    line.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
    Ended::parse(&line)
}

impl Drive {
    async fn run(self) -> Result<Outcome, FsError> {
        let Drive { spawned, stdout, stderr, timeout, cap, token, progress, progress_interval } =
            self;
        let crate::spawn::Spawned { mut child, control } = spawned;
        let supervisor_pid = child.id();
        let (ctl_r, ctl_w) = control.into_split();
        // Dropping the write half shuts it down: the supervisor reads end
        // of file and kills the tree.
        let mut ctl_w = Some(ctl_w);

        let out_sink = Arc::new(Mutex::new(CappedText::new(cap)));
        let err_sink = Arc::new(Mutex::new(CappedText::new(cap)));
        let mut out_task = tokio::spawn(drain(stdout, out_sink.clone()));
        let mut err_task = tokio::spawn(drain(stderr, err_sink.clone()));

        let start = Instant::now();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let status_fut = read_status(ctl_r);
        tokio::pin!(status_fut);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + progress_interval,
            progress_interval,
        );
        // Escalation after the stop request: SIGTERM, then SIGKILL.
        let escalate = tokio::time::sleep(FAR);
        tokio::pin!(escalate);
        let mut escalation = 0u8;

        let mut status: Option<Option<Ended>> = None;
        let mut exited = false;
        let mut timed_out = false;
        let mut cancelled = false;
        while !(exited && status.is_some()) {
            tokio::select! {
                s = &mut status_fut, if status.is_none() => status = Some(s),
                _ = child.wait(), if !exited => exited = true,
                () = &mut deadline, if ctl_w.is_some() => {
                    timed_out = true;
                    ctl_w = None;
                    escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                }
                () = token.cancelled(), if ctl_w.is_some() => {
                    cancelled = true;
                    ctl_w = None;
                    escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                }
                _ = tick.tick(), if progress.is_some() && ctl_w.is_some() => {
                    if let Some(p) = &progress {
                        p(Progress { elapsed: start.elapsed(), timeout });
                    }
                }
                () = &mut escalate, if ctl_w.is_none() && !exited => {
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
        drop(ctl_w);
        reaped(supervisor_pid);
        if !matches!(status, Some(Some(_))) {
            // The supervisor died before its tree (killed from outside):
            // what is left was re-parented to us if we adopt orphans.
            sweep_orphans().await;
        }

        // Every descendant is dead: the pipes close now, unless a process
        // outside the tree holds them (fd passing); then stop collecting.
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            let _ = (&mut out_task).await;
            let _ = (&mut err_task).await;
        })
        .await
        .is_ok();
        if !drained {
            out_task.abort();
            err_task.abort();
        }
        let (stdout, out_trunc) = take(&out_sink);
        let (stderr, err_trunc) = take(&err_sink);

        let Some(Some(ended)) = status else {
            return Err(FsError::new(ErrorCode::InternalError, "The command's supervisor failed.")
                .with_detail("no status line from the supervisor"));
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
        })
    }
}
