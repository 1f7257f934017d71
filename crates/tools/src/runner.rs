//! How one call runs: admitted by its class's concurrency limit, executed
//! on the blocking pool under a deadline, stopped when its client cancels
//! or goes away, and logged as one line.
//!
//! Guarantees:
//! - At most `searches` find/search calls, `reads` file reads and `lookups`
//!   metadata calls run at once, each class on its own semaphore, so a
//!   flood of one class never makes another wait. Behind the running calls
//!   at most [`QUEUE_FACTOR`] × the limit wait, each for at most
//!   `busy_wait`; a call that finds the queue full, or no slot in time, is
//!   `SERVER_BUSY` at once. So nothing piles up: the calls a flood can keep
//!   open (and the HTTP connections they hold) are bounded by the limits,
//!   far below the connection cap, and `/healthz` keeps its connections.
//!   Writes and patches (serverfs-dev) have [`WRITE_SLOTS`] slots of their
//!   own. The blocking pool never needs more threads than the four limits
//!   add up to ([`Concurrency::blocking_threads`]).
//! - A call's permit is held by the blocking work itself, so an abandoned
//!   call keeps its slot until its work has really stopped.
//! - Every call gets a [`Deadline`] (the configured call timeout) whose
//!   flag is raised when the client cancels (`notifications/cancelled`, an
//!   HTTP client that disconnects) or when the call's future is dropped;
//!   the work stops at its next check.
//! - One flat JSON log line per call, written when its work has ended
//!   (also for a client that is gone), with `cancelled` when the client
//!   gave up; never file contents.
//! - Quick calls ([`Runner::run_quick`]: work of a few metadata syscalls,
//!   no directory read and no file content, e.g. stat_file) skip the hop
//!   to the blocking pool: admitted the same way, they run on the async
//!   worker that received them, which saves two thread hand-overs per
//!   call. The trade-off: such a syscall cannot be interrupted, so a stat
//!   that hangs (a dead NFS server) would hold that worker. At most
//!   [`INLINE_SLOTS`] quick calls run inline at once; the others take the
//!   blocking pool as every other call does. So a hung filesystem can hold
//!   at most that many async workers, never all of them, and `/healthz`
//!   and the other calls keep being served.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serverfs_core::{Deadline, ErrorCode, FsError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::text::{TextOutput, ToText, ToolResult};

/// What kind of work a call is, for admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallClass {
    /// find_files, search_text: walks whose cost grows with the tree.
    Search,
    /// read_text_file, resources/read: cost grows with the file.
    Read,
    /// list_workdirs, list_directory, stat_file: one directory at most.
    Lookup,
    /// write_file, apply_patch (serverfs-dev): plan and commit changes, on
    /// [`WRITE_SLOTS`] slots of their own, so patches being planned never
    /// take a slot a read, a search or a lookup needs.
    Write,
}

/// Concurrent write_file/apply_patch calls (their commits are serialised
/// by the writer anyway; the slots bound the planning).
pub const WRITE_SLOTS: usize = 4;

/// How many calls of each class may run at once, and how long an excess
/// call waits for a slot before it is refused with `SERVER_BUSY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Concurrency {
    /// Concurrent find_files/search_text calls.
    pub searches: usize,
    /// Concurrent read_text_file/resources/read calls.
    pub reads: usize,
    /// Concurrent list_workdirs/list_directory/stat_file calls.
    pub lookups: usize,
    /// Longest wait for a slot.
    pub busy_wait: Duration,
}

impl Default for Concurrency {
    fn default() -> Self {
        Self { searches: 4, reads: 16, lookups: 16, busy_wait: Duration::from_secs(10) }
    }
}

impl Concurrency {
    /// Blocking threads the runtime needs so that no admitted call waits for
    /// a thread (tokio's default of 512 is far above what may run).
    pub fn blocking_threads(&self) -> usize {
        self.searches + self.reads + self.lookups + WRITE_SLOTS
    }

    /// Threads the searches start besides the blocking pool: a search_text
    /// call searches files on up to [`serverfs_search::default_workers`]
    /// scoped threads of its own (none when that is 1), started by the
    /// call's blocking thread and all joined before the call ends, so
    /// before its permit is released. With the permits bounding the calls,
    /// the process never runs more than this many of them.
    pub fn search_worker_threads(&self) -> usize {
        match serverfs_search::default_workers() {
            1 => 0,
            n => self.searches * n,
        }
    }
}

/// How many calls of a class may wait for a slot, per running slot.
pub(crate) const QUEUE_FACTOR: usize = 4;

/// Quick calls that may run on async workers at once (see the module
/// docs); one more goes to the blocking pool.
pub const INLINE_SLOTS: usize = 1;

/// Defined in the core, so every crate with a tool result implements it.
pub use serverfs_core::Reported;

/// The shared state of every call: the binary's context `C` (its roots and
/// tools), the class semaphores and the timeouts. One per server process.
#[derive(Debug)]
pub struct Runner<C> {
    context: Arc<C>,
    call_timeout: Duration,
    searches: Admission,
    reads: Admission,
    lookups: Admission,
    writes: Admission,
    busy_wait: Duration,
    /// Quick calls running on an async worker.
    inline: Arc<Semaphore>,
    /// How a tool's answer is written as text.
    text_output: TextOutput,
}

/// One class's running slots and its bounded queue.
#[derive(Debug)]
struct Admission {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    what: &'static str,
}

impl Admission {
    fn new(limit: usize, what: &'static str) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limit)),
            waiting: AtomicUsize::new(0),
            max_waiting: limit * QUEUE_FACTOR,
            what,
        }
    }
}

/// Leaves the queue when the wait ends, however it ends.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<C: Send + Sync + 'static> Runner<C> {
    /// The runner of every call on `context`, each under `call_timeout`,
    /// admitted within `concurrency`.
    pub fn new(context: Arc<C>, call_timeout: Duration, concurrency: &Concurrency) -> Self {
        Self {
            context,
            call_timeout,
            searches: Admission::new(concurrency.searches, "searches"),
            reads: Admission::new(concurrency.reads, "file reads"),
            lookups: Admission::new(concurrency.lookups, "listing and stat calls"),
            writes: Admission::new(WRITE_SLOTS, "writes and patches"),
            busy_wait: concurrency.busy_wait,
            inline: Arc::new(Semaphore::new(INLINE_SLOTS)),
            text_output: TextOutput::default(),
        }
    }

    /// Writes tool answers' text as `text_output` (default compact).
    #[must_use]
    pub fn with_text_output(mut self, text_output: TextOutput) -> Self {
        self.text_output = text_output;
        self
    }

    /// A tool's outcome as rmcp takes it: the [`Answer`] (structured
    /// result and its text), or the failure's `CODE: message`. Every tool
    /// answer is built here, also for calls that ran outside the runner.
    ///
    /// # Errors
    /// The call's `CODE: message`.
    pub fn answer<T: Serialize + ToText>(&self, outcome: Result<T, FsError>) -> ToolResult {
        self.text_output.answer(&outcome.map_err(|e| e.to_string())?)
    }

    /// [`Runner::run`] for work of a few metadata syscalls: admitted,
    /// under a deadline and logged as every call, but run on this async
    /// worker while an inline slot is free (see the module docs).
    pub async fn run_quick<T, F>(
        &self,
        class: CallClass,
        call: CallLog,
        ct: CancellationToken,
        op: F,
    ) -> Result<T, FsError>
    where
        T: Reported + Send + 'static,
        F: FnOnce(&C, &Deadline) -> Result<T, FsError> + Send + 'static,
    {
        let Ok(_inline) = self.inline.try_acquire() else {
            return self.run(class, call, ct, op).await;
        };
        let started = Instant::now();
        let outcome = match self.admit(class, &ct).await {
            Ok(_permit) => {
                let cancel = Arc::new(AtomicBool::new(ct.is_cancelled()));
                let deadline = Deadline::new(self.call_timeout, cancel);
                // A panic is an internal error, as on the blocking pool.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    op(&self.context, &deadline)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!(event = "call_failed", error = "panic");
                    Err(FsError::new(
                        ErrorCode::InternalError,
                        "the call failed inside the server.",
                    ))
                })
            }
            Err(refused) => Err(refused),
        };
        call.write(&outcome, started, ct.is_cancelled());
        outcome
    }

    /// Runs `op` (admission, deadline, cancellation as in the module docs)
    /// and logs the call: when its work ends, even if nobody waits for the
    /// answer any more.
    pub async fn run<T, F>(
        &self,
        class: CallClass,
        call: CallLog,
        ct: CancellationToken,
        op: F,
    ) -> Result<T, FsError>
    where
        T: Reported + Send + 'static,
        F: FnOnce(&C, &Deadline) -> Result<T, FsError> + Send + 'static,
    {
        let started = Instant::now();
        let permit = match self.admit(class, &ct).await {
            Ok(permit) => permit,
            Err(refused) => {
                let outcome = Err(refused);
                call.write(&outcome, started, ct.is_cancelled());
                return outcome;
            }
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let _raise = RaiseOnDrop(Arc::clone(&cancel));
        let deadline = Deadline::new(self.call_timeout, Arc::clone(&cancel));
        let context = Arc::clone(&self.context);
        let mut work = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let outcome = op(&context, &deadline);
            call.write(&outcome, started, deadline.is_cancelled());
            outcome
        });
        let joined = tokio::select! {
            joined = &mut work => joined,
            () = ct.cancelled() => {
                cancel.store(true, Ordering::Relaxed);
                work.await
            }
        };
        joined.unwrap_or_else(|join| {
            tracing::error!(event = "call_failed", error = %join);
            Err(FsError::new(ErrorCode::InternalError, "the call failed inside the server.")
                .with_detail(join.to_string()))
        })
    }

    /// [`Self::run`] for an rmcp tool: its [`Answer`], or the failure's
    /// `CODE: message` as the tool's error result.
    ///
    /// # Errors
    /// The call's `CODE: message`.
    pub async fn run_tool<T, F>(
        &self,
        class: CallClass,
        call: CallLog,
        ct: CancellationToken,
        op: F,
    ) -> ToolResult
    where
        T: Reported + Serialize + ToText + Send + 'static,
        F: FnOnce(&C, &Deadline) -> Result<T, FsError> + Send + 'static,
    {
        self.answer(self.run(class, call, ct, op).await)
    }

    /// [`Self::run_quick`] for an rmcp tool: its [`Answer`], or the
    /// failure's `CODE: message`.
    ///
    /// # Errors
    /// The call's `CODE: message`.
    pub async fn run_quick_tool<T, F>(
        &self,
        class: CallClass,
        call: CallLog,
        ct: CancellationToken,
        op: F,
    ) -> ToolResult
    where
        T: Reported + Serialize + ToText + Send + 'static,
        F: FnOnce(&C, &Deadline) -> Result<T, FsError> + Send + 'static,
    {
        self.answer(self.run_quick(class, call, ct, op).await)
    }

    /// A slot of `class`: at once if one is free, else after waiting at
    /// most `busy_wait` in a queue of bounded length.
    async fn admit(
        &self,
        class: CallClass,
        ct: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, FsError> {
        let admission = match class {
            CallClass::Search => &self.searches,
            CallClass::Read => &self.reads,
            CallClass::Lookup => &self.lookups,
            CallClass::Write => &self.writes,
        };
        if let Ok(permit) = Arc::clone(&admission.slots).try_acquire_owned() {
            return Ok(permit);
        }
        let busy = |why: &str| {
            FsError::new(
                ErrorCode::ServerBusy,
                format!(
                    "the server is running its maximum number of concurrent {} and {why}; retry shortly.",
                    admission.what
                ),
            )
        };
        if admission.waiting.fetch_add(1, Ordering::Relaxed) >= admission.max_waiting {
            admission.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(busy("its queue is full"));
        }
        let _waiting = Waiting(&admission.waiting);
        let waited = format!("none finished within {} s", self.busy_wait.as_secs());
        tokio::select! {
            acquired = tokio::time::timeout(self.busy_wait, Arc::clone(&admission.slots).acquire_owned()) => {
                match acquired {
                    Ok(Ok(permit)) => Ok(permit),
                    // Timed out, or the semaphore was closed (never done).
                    _ => Err(busy(&waited)),
                }
            }
            // Nobody waits for the answer any more.
            () = ct.cancelled() => Err(busy(&waited)),
        }
    }
}

/// The result type of a call that never ran.
enum Refused {}

impl Reported for Refused {}

/// Raises the cancel flag when the call's future is dropped (an HTTP
/// client that went away), so the blocking work stops at its next check.
struct RaiseOnDrop(Arc<AtomicBool>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the log line names: the tool and, where it has them, the workdir
/// and path as the client sent them.
#[derive(Debug)]
#[must_use]
pub struct CallLog {
    /// The tool's name (or `resources/read`).
    pub tool: &'static str,
    /// The workdir as the client sent it.
    pub workdir: Option<String>,
    /// The path (or URI) as the client sent it.
    pub path: Option<String>,
}

impl CallLog {
    /// Logs a call refused before it ran (bad arguments).
    pub fn refused(self, error: FsError) {
        self.write::<Refused>(&Err(error), Instant::now(), false);
    }

    /// Logs a call that ran outside [`Runner::run`] (serverfs-dev's
    /// commands): its outcome, its duration since `started`, whether its
    /// client cancelled.
    pub fn write<T: Reported>(
        &self,
        outcome: &Result<T, FsError>,
        started: Instant,
        cancelled: bool,
    ) {
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let path = self.path.as_deref().map(|p| p.chars().take(512).collect::<String>());
        let error = outcome.as_ref().err();
        tracing::info!(
            event = "tool_call",
            tool = self.tool,
            workdir = self.workdir.as_deref(),
            path = path.as_deref(),
            bytes_returned = outcome.as_ref().map_or(0, Reported::bytes_returned),
            duration_ms,
            success = error.is_none(),
            cancelled,
            error_code = error.map(|e| e.code().as_str()),
            error_detail = error.and_then(FsError::detail),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_threads_cover_every_class() {
        let c = Concurrency { searches: 2, reads: 3, lookups: 5, busy_wait: Duration::ZERO };
        assert_eq!(c.blocking_threads(), 10 + WRITE_SLOTS);
    }

    #[derive(Debug, PartialEq)]
    struct Ran(std::thread::ThreadId);

    impl Reported for Ran {}

    fn quick_runner(lookups: usize) -> Runner<()> {
        let c = Concurrency { searches: 1, reads: 1, lookups, busy_wait: Duration::ZERO };
        Runner::new(Arc::new(()), Duration::from_secs(5), &c)
    }

    fn call() -> CallLog {
        CallLog { tool: "stat_file", workdir: None, path: None }
    }

    /// A quick call runs where it was received while the inline slot is
    /// free, and on the blocking pool while it is taken; same answer.
    #[tokio::test]
    async fn quick_calls_run_inline_while_the_slot_is_free() {
        let runner = quick_runner(2);
        let here = std::thread::current().id();
        let op = |(): &(), _: &Deadline| Ok(Ran(std::thread::current().id()));
        let inline = runner.run_quick(CallClass::Lookup, call(), CancellationToken::new(), op);
        assert_eq!(inline.await.unwrap(), Ran(here));

        let held = runner.inline.try_acquire().unwrap();
        let pooled = runner.run_quick(CallClass::Lookup, call(), CancellationToken::new(), op);
        assert_ne!(pooled.await.unwrap(), Ran(here));
        drop(held);
    }

    /// Admission holds for quick calls: a full class is `SERVER_BUSY`, and
    /// a failing or panicking op is its error / `INTERNAL_ERROR`.
    #[tokio::test]
    async fn quick_calls_are_admitted_and_fail_like_other_calls() {
        let runner = quick_runner(1);
        let slot = Arc::clone(&runner.lookups.slots).try_acquire_owned().unwrap();
        // The queue is full at once (no wait allowed): refused.
        runner.lookups.waiting.store(QUEUE_FACTOR, Ordering::Relaxed);
        let op = |(): &(), _: &Deadline| Ok(Ran(std::thread::current().id()));
        let busy = runner.run_quick(CallClass::Lookup, call(), CancellationToken::new(), op).await;
        assert_eq!(busy.unwrap_err().code(), ErrorCode::ServerBusy);
        runner.lookups.waiting.store(0, Ordering::Relaxed);
        drop(slot);

        let fails = |(): &(), _: &Deadline| -> Result<Ran, FsError> { Err(FsError::invalid("no")) };
        let err =
            runner.run_quick(CallClass::Lookup, call(), CancellationToken::new(), fails).await;
        assert_eq!(err.unwrap_err().code(), ErrorCode::InvalidArgument);
        let panics =
            |(): &(), _: &Deadline| -> Result<Ran, FsError> { panic!("inside a quick call") };
        let err =
            runner.run_quick(CallClass::Lookup, call(), CancellationToken::new(), panics).await;
        assert_eq!(err.unwrap_err().code(), ErrorCode::InternalError);
        // The slot and the permit were given back.
        assert_eq!(runner.inline.available_permits(), INLINE_SLOTS);
        assert_eq!(runner.lookups.slots.available_permits(), 1);
    }

    #[test]
    fn search_worker_threads_are_bounded_by_the_search_permits() {
        let c = Concurrency { searches: 3, reads: 1, lookups: 1, busy_wait: Duration::ZERO };
        assert!(c.search_worker_threads() <= 3 * serverfs_search::MAX_DEFAULT_WORKERS);
        let one_core = serverfs_search::default_workers() == 1;
        assert_eq!(c.search_worker_threads() == 0, one_core);
    }
}
