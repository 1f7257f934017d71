//! Shell sessions: a long-lived `bash --noprofile --norc` per session,
//! under the same supervisor as one-shot commands, its stdout and stderr
//! merged into one buffer read at absolute byte offsets.
//!
//! A `bash` command still running at its yield point becomes a session too
//! ([`Sessions::run`]): same owner rules, same registry and caps, read the
//! same way, killed the same way (close, idle reaper, shutdown), but it
//! takes no input and still ends at its own timeout.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::Reported;
use serverfs_core::error::{ErrorCode, FsError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::sandbox::SandboxConfig;
use crate::spawn::{
    ChildEnv, STOP_GRACE, internal, reaped, spawn, sweep_orphans, terminate, tokio_control,
    wait_stopped,
};
use crate::status::{Ended, believed};
use crate::supervisor::Supervisor;

/// Who opened a session: `Owner::new("stdio")` for the stdio transport,
/// the MCP session id (`Mcp-Session-Id`) for HTTP. Another owner's
/// sessions are invisible: same error as an unknown id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner(String);

impl Owner {
    /// An owner named by the transport.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
}

/// Limits and defaults of the session registry.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// How to start the supervisor.
    pub supervisor: Supervisor,
    /// The default environment of a session.
    pub env: ChildEnv,
    /// Sessions open at once, all owners together (default 32).
    pub max_sessions: usize,
    /// Sessions open at once per owner (default 8).
    pub max_per_owner: usize,
    /// A session neither read nor written for this long is closed
    /// (default 30 min).
    pub idle_timeout: Duration,
    /// Output bytes kept per session; older output is dropped (default
    /// 1 MiB).
    pub buffer_cap: usize,
    /// Output bytes returned by one read at most (default 64 KiB).
    pub max_read: usize,
    /// Bytes accepted by one write at most (default 64 KiB).
    pub max_input: usize,
    /// How long a write may wait for the shell to take its input (default
    /// 10 s; then `TIMEOUT`).
    pub write_timeout: Duration,
    /// The Landlock sandbox of every session; `None`: none.
    pub sandbox: Option<SandboxConfig>,
}

impl SessionConfig {
    /// The defaults, with the server's `PATH`/`HOME`/`LANG`, no sandbox.
    pub fn new(supervisor: Supervisor) -> Self {
        Self {
            supervisor,
            env: ChildEnv::from_server(),
            max_sessions: 32,
            max_per_owner: 8,
            idle_timeout: Duration::from_secs(30 * 60),
            buffer_cap: 1 << 20,
            max_read: 64 << 10,
            max_input: 64 << 10,
            write_timeout: Duration::from_secs(10),
            sandbox: None,
        }
    }
}

/// The longest blocking read: under 60 s, the request timeout of common
/// MCP clients (the TypeScript SDK gives up at 60 s); poll again for more.
pub const MAX_WAIT_MS: u64 = 50_000;
/// After the supervisor exited, how long the output pipe may stay open.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The answer of [`Sessions::read`], and shell_read's result as sent
/// (`ShellReadResult`; the field docs a client reads are the
/// `schemars(description)`s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ShellReadResult")]
pub struct ReadOutput {
    /// Output from `offset` to `next_offset` (lossy UTF-8; never ends in
    /// the middle of a character while the shell runs).
    #[schemars(description = "Output (stdout and stderr together) from offset to next_offset.")]
    pub output: String,
    /// Where `output` starts: the requested offset, or the buffer's start
    /// when that offset was already dropped.
    #[schemars(
        description = "Where output starts: the offset asked for, or the oldest kept byte when that was dropped."
    )]
    pub offset: u64,
    /// The offset to ask for next.
    #[schemars(description = "The offset to read from next.")]
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that were dropped
    /// from the buffer (0 normally).
    #[schemars(
        description = "Bytes between the offset asked for and offset that were dropped from the buffer."
    )]
    pub dropped: u64,
    /// More output is buffered beyond `next_offset` right now.
    #[schemars(description = "More output is already waiting beyond next_offset.")]
    pub more: bool,
    /// The shell has ended and all its output is in the buffer.
    #[schemars(
        description = "The shell has ended and all its output has been read into the buffer."
    )]
    pub exited: bool,
    /// Its exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed it, e.g. `SIGKILL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = "The signal that ended it, e.g. SIGKILL.")]
    pub signal: Option<String>,
}

impl Reported for ReadOutput {
    fn bytes_returned(&self) -> u64 {
        self.output.len() as u64
    }
}

/// One entry of [`Sessions::list`], as shell_list and shell_close send it
/// (`ShellInfo`; the field docs a client reads are the
/// `schemars(description)`s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ShellInfo", description = "One session.")]
pub struct SessionInfo {
    /// The session id.
    #[schemars(description = "The session's id.")]
    pub session_id: String,
    /// Bytes of output so far (the next offset a reader will reach).
    #[schemars(description = "Bytes of output so far.")]
    pub end_offset: u64,
    /// Since the last read or write (sent in whole seconds).
    #[serde(rename = "idle_seconds", serialize_with = "whole_seconds")]
    #[schemars(with = "u64", description = "Seconds since the last read or write.")]
    pub idle: Duration,
    /// The shell has ended.
    pub exited: bool,
    /// Its exit code.
    #[schemars(description = "Its exit code, when it exited normally.")]
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(description = "The signal that ended it.")]
    pub signal: Option<String>,
}

impl Reported for SessionInfo {}

fn whole_seconds<S: serde::Serializer>(idle: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(idle.as_secs())
}

/// The output buffer and the end state, under one lock (so a waiter never
/// misses the exit).
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    data: Vec<u8>,
    /// Absolute offset of `data[0]`.
    base: u64,
    pub(crate) exited: bool,
    pub(crate) ended: Option<Ended>,
}

impl Buffer {
    pub(crate) fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    /// The end without an incomplete character at it: where a reader that
    /// was shown everything so far goes on, so a character split across
    /// two writes is read whole later instead of as U+FFFD.
    pub(crate) fn complete_end(&self) -> u64 {
        self.base + complete_prefix(&self.data) as u64
    }

    pub(crate) fn append(&mut self, bytes: &[u8], cap: usize) {
        self.data.extend_from_slice(bytes);
        if self.data.len() > cap {
            let mut cut = self.data.len() - cap;
            // Start the kept part on a character boundary.
            while cut < self.data.len()
                && cut < self.data.len() - cap + 3
                && is_continuation(self.data[cut])
            {
                cut += 1;
            }
            self.data.drain(..cut);
            self.base += cut as u64;
        }
    }

    fn read(&self, offset: u64, max: usize) -> Result<ReadOutput, FsError> {
        let end = self.end();
        if offset > end {
            return Err(FsError::invalid(format!(
                "offset {offset} is past the end of the output ({end})."
            )));
        }
        let start = offset.max(self.base);
        let from = (start - self.base) as usize;
        let mut to = self.data.len().min(from.saturating_add(max));
        // Never end inside a character, unless the shell is gone and this
        // is the very end.
        if !(self.exited && to == self.data.len()) {
            to = from + complete_prefix(&self.data[from..to]);
        }
        let (exit_code, signal) = match self.ended {
            Some(e) if self.exited => (e.exit_code(), e.signal_name()),
            _ => (None, None),
        };
        Ok(ReadOutput {
            output: String::from_utf8_lossy(&self.data[from..to]).into_owned(),
            offset: start,
            next_offset: start + (to - from) as u64,
            dropped: start - offset,
            more: to < self.data.len(),
            exited: self.exited,
            exit_code,
            signal,
        })
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of `bytes` without an incomplete character at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    let n = bytes.len();
    // Find the last lead byte among the last 4 bytes.
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if is_continuation(b) {
            continue;
        }
        let need = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// What a session's driver task and its readers share.
pub(crate) struct Shared {
    buffer: Mutex<Buffer>,
    changed: watch::Sender<u64>,
}

impl Shared {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { buffer: Mutex::new(Buffer::default()), changed: watch::Sender::new(0) })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the readers waiting for output or the end.
    pub(crate) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

struct Session {
    owner: Owner,
    shared: Arc<Shared>,
    /// The server's end of the control channel: shell input goes here;
    /// dropping it (shutdown) makes the supervisor kill the whole tree.
    /// `None` for a yielded command (its driver holds the channel).
    input: tokio::sync::Mutex<Option<OwnedWriteHalf>>,
    /// A yielded `bash` command: it reads no input.
    command: bool,
    /// Fired on close: interrupts a pending write, starts the driver's
    /// escalation (for a yielded command: its run's cancellation).
    stop: CancellationToken,
    last_used: Mutex<Instant>,
}

impl Session {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn idle(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(PoisonError::into_inner).elapsed()
    }

    fn info(&self, id: &str) -> SessionInfo {
        let b = self.shared.lock();
        let (exit_code, signal) = match b.ended {
            Some(e) if b.exited => (e.exit_code(), e.signal_name()),
            _ => (None, None),
        };
        SessionInfo {
            session_id: id.to_owned(),
            end_offset: b.end(),
            idle: self.idle(),
            exited: b.exited,
            exit_code,
            signal,
        }
    }

    /// Closes the control channel (the supervisor kills the tree) and waits
    /// until the driver saw the supervisor exit.
    async fn shut(&self) {
        self.stop.cancel();
        drop(self.input.lock().await.take());
        let mut rx = self.shared.changed.subscribe();
        let waited = tokio::time::timeout(STOP_GRACE * 3, async {
            loop {
                if self.shared.lock().exited {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        let _ = waited.await;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The input half is dropped with us (end of file for the
        // supervisor); let the driver escalate if it must.
        self.stop.cancel();
    }
}

struct Inner {
    cfg: SessionConfig,
    map: Mutex<HashMap<String, Arc<Session>>>,
}

/// The registry of shell sessions. Cloning shares it. When the last clone
/// is dropped, every session's control channel closes and every shell tree
/// is killed.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("cfg", &self.inner.cfg).finish_non_exhaustive()
    }
}

fn not_found() -> FsError {
    FsError::invalid("No such shell session (it was closed, reaped, or never existed).")
}

fn new_id() -> Result<String, FsError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| internal("Could not create a session id", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

async fn drain_into(mut r: tokio::net::unix::pipe::Receiver, shared: Arc<Shared>, cap: usize) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                shared.lock().append(&buf[..n], cap);
                shared.bump();
            }
        }
    }
}

impl Sessions {
    /// An empty registry. Inside a tokio runtime it also starts the idle
    /// reaper (a task that ends when the registry is dropped).
    pub fn new(cfg: SessionConfig) -> Self {
        let idle = cfg.idle_timeout;
        let inner = Arc::new(Inner { cfg, map: Mutex::default() });
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            let period = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
            handle.spawn(async move {
                loop {
                    tokio::time::sleep(period).await;
                    let Some(inner) = weak.upgrade() else { return };
                    Sessions { inner }.reap_idle().await;
                }
            });
        }
        Self { inner }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.inner.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `SERVER_BUSY` when `owner` may not have one more session.
    fn check_room(
        &self,
        map: &HashMap<String, Arc<Session>>,
        owner: &Owner,
    ) -> Result<(), FsError> {
        let cfg = &self.inner.cfg;
        if map.len() >= cfg.max_sessions
            || map.values().filter(|s| s.owner == *owner).count() >= cfg.max_per_owner
        {
            return Err(FsError::new(
                ErrorCode::ServerBusy,
                "Too many shell sessions are open; close one first.",
            ));
        }
        Ok(())
    }

    /// Output bytes kept per session.
    pub(crate) fn buffer_cap(&self) -> usize {
        self.inner.cfg.buffer_cap
    }

    /// Registers a running command (its output in `shared`, stopped by
    /// firing `stop`) as a session of `owner`; `SERVER_BUSY` past the caps.
    pub(crate) fn adopt(
        &self,
        owner: &Owner,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> Result<String, FsError> {
        let mut map = self.map();
        self.check_room(&map, owner)?;
        let id = new_id()?;
        let session = Arc::new(Session {
            owner: owner.clone(),
            shared,
            input: tokio::sync::Mutex::new(None),
            command: true,
            stop,
            last_used: Mutex::new(Instant::now()),
        });
        map.insert(id.clone(), session);
        Ok(id)
    }

    /// Runs a command like [`crate::run()`], except that one still running
    /// after `yield_after` returns at once with `running: true`, its output
    /// so far, a `session_id` and the `next_offset` where that output ends,
    /// and goes on as a session of `owner` (see the module docs). The
    /// session's output is stdout and stderr merged in arrival order from
    /// the command's first byte (offset 0). When `owner` has no room for
    /// one more session, the command does not yield and runs to its end.
    pub async fn run(
        &self,
        owner: &Owner,
        spec: crate::CommandSpec,
        yield_after: Duration,
        cancel: &CancellationToken,
        progress: Option<crate::ProgressFn>,
    ) -> Result<crate::Outcome, FsError> {
        let to = crate::run::YieldTo {
            sessions: self.clone(),
            owner: owner.clone(),
            after: yield_after,
        };
        crate::run::run_inner(spec, cancel, progress, Some(to)).await
    }

    fn get(&self, owner: &Owner, id: &str) -> Result<Arc<Session>, FsError> {
        let s = self.map().get(id).filter(|s| s.owner == *owner).cloned().ok_or_else(not_found)?;
        s.touch();
        Ok(s)
    }

    /// Starts a shell in `cwd` (e.g. `/proc/self/fd/N` of a directory the
    /// resolver opened; it must stay open until this returns) and returns
    /// its id (128 random bits, 32 hex digits). `env` replaces the
    /// configured environment when given. Must be called inside a tokio
    /// runtime. `SERVER_BUSY` past the caps.
    pub fn open(
        &self,
        owner: &Owner,
        cwd: &Path,
        env: Option<&ChildEnv>,
    ) -> Result<String, FsError> {
        let cfg = &self.inner.cfg;
        let mut map = self.map();
        self.check_room(&map, owner)?;
        let id = new_id()?;
        let (reader, writer) =
            std::io::pipe().map_err(|e| internal("Could not create the output pipe", e))?;
        let writer2 =
            writer.try_clone().map_err(|e| internal("Could not create the output pipe", e))?;
        let spawned = spawn(
            &cfg.supervisor,
            &[OsStr::new("session")],
            cwd,
            env.unwrap_or(&cfg.env),
            cfg.sandbox.as_ref(),
            Stdio::from(writer),
            Stdio::from(writer2),
        )?;
        let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(|e| internal("Could not read the shell's output", e))?;
        let crate::spawn::Spawned { mut child, control, tmp } = spawned;
        // Input goes out through the runtime; the status line is read from
        // what the exited supervisor left in the channel (as for a command).
        let status_channel =
            control.try_clone().map_err(|e| internal("Could not create the control channel", e))?;
        let (_, ctl_w) = tokio_control(control)?.into_split();
        let shared = Shared::new();
        let stop = CancellationToken::new();
        let session = Arc::new(Session {
            owner: owner.clone(),
            shared: shared.clone(),
            input: tokio::sync::Mutex::new(Some(ctl_w)),
            command: false,
            stop: stop.clone(),
            last_used: Mutex::new(Instant::now()),
        });
        let cap = cfg.buffer_cap;
        tokio::spawn(async move {
            let supervisor_pid = child.id();
            let mut drain = tokio::spawn(drain_into(reader, shared.clone(), cap));
            let exit = tokio::select! {
                r = child.wait() => r.ok(),
                () = stop.cancelled() => {
                    // End of file on the control channel is enough unless
                    // the supervisor is stuck handing input to a shell that
                    // does not read it; SIGTERM (which it handles the same
                    // way) reaches it either way.
                    terminate(&child);
                    wait_stopped(&mut child).await;
                    child.try_wait().ok().flatten()
                }
            };
            reaped(supervisor_pid);
            // Whatever the supervisor said (see the status module).
            sweep_orphans(exit.is_some_and(|s| s.success())).await;
            let ended = believed(&status_channel, exit);
            if tokio::time::timeout(DRAIN_GRACE, &mut drain).await.is_err() {
                drain.abort();
            }
            drop(tmp);
            {
                let mut b = shared.lock();
                b.ended = ended;
                b.exited = true;
            }
            shared.bump();
        });
        map.insert(id.clone(), session);
        Ok(id)
    }

    /// Writes `input` to the shell's stdin (the caller applies
    /// [`crate::Policy::check_input`] first). End each command with `\n`.
    pub async fn write(&self, owner: &Owner, id: &str, input: &str) -> Result<(), FsError> {
        let s = self.get(owner, id)?;
        if input.len() > self.inner.cfg.max_input {
            return Err(FsError::invalid(format!(
                "The input is larger than {} bytes.",
                self.inner.cfg.max_input
            )));
        }
        if s.command {
            return Err(FsError::invalid(
                "This session is a bash command that yielded; it reads no input. Read it with shell_read, stop it with shell_close.",
            ));
        }
        if s.shared.lock().exited {
            return Err(FsError::invalid("The shell session has exited; close it."));
        }
        let mut input_half = s.input.lock().await;
        let Some(w) = input_half.as_mut() else { return Err(not_found()) };
        tokio::select! {
            r = tokio::time::timeout(self.inner.cfg.write_timeout, w.write_all(input.as_bytes())) => match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(internal("Could not write to the shell", e)),
                Err(_) => Err(FsError::new(ErrorCode::Timeout, "The shell is not reading its input.")),
            },
            () = s.stop.cancelled() => Err(not_found()),
        }
    }

    /// Output from absolute byte `offset`, waiting up to `wait_ms` (≤ [`MAX_WAIT_MS`])
    /// for some when there is none yet and the shell runs; `cancel`
    /// interrupts the wait (the answer is then what is there).
    pub async fn read(
        &self,
        owner: &Owner,
        id: &str,
        offset: u64,
        wait_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<ReadOutput, FsError> {
        if wait_ms > MAX_WAIT_MS {
            return Err(FsError::invalid(format!("wait_ms must be at most {MAX_WAIT_MS}.")));
        }
        let s = self.get(owner, id)?;
        let max = self.inner.cfg.max_read;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut rx = s.shared.changed.subscribe();
        loop {
            rx.borrow_and_update();
            let out = s.shared.lock().read(offset, max)?;
            if !out.output.is_empty() || out.exited || out.dropped > 0 {
                return Ok(out);
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Ok(out) },
                () = tokio::time::sleep_until(deadline) => return Ok(out),
                () = cancel.cancelled() => return Ok(out),
            }
        }
    }

    /// Kills the session's whole tree, waits for it, and forgets the
    /// session. Returns its last state.
    pub async fn close(&self, owner: &Owner, id: &str) -> Result<SessionInfo, FsError> {
        let s = {
            let mut map = self.map();
            match map.get(id) {
                Some(s) if s.owner == *owner => map.remove(id),
                _ => None,
            }
        }
        .ok_or_else(not_found)?;
        s.shut().await;
        Ok(s.info(id))
    }

    /// The owner's sessions.
    pub fn list(&self, owner: &Owner) -> Vec<SessionInfo> {
        let mut v: Vec<SessionInfo> = self
            .map()
            .iter()
            .filter(|(_, s)| s.owner == *owner)
            .map(|(id, s)| s.info(id))
            .collect();
        v.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        v
    }

    /// Closes every session idle longer than the configured timeout;
    /// returns how many. The reaper task calls this periodically.
    pub async fn reap_idle(&self) -> usize {
        let idle = self.inner.cfg.idle_timeout;
        let stale: Vec<Arc<Session>> = {
            let mut map = self.map();
            let ids: Vec<String> =
                map.iter().filter(|(_, s)| s.idle() >= idle).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in &stale {
            s.shut().await;
        }
        stale.len()
    }

    /// Closes every session of `owner` (an HTTP MCP session was deleted or
    /// expired); returns how many.
    pub async fn close_owner(&self, owner: &Owner) -> usize {
        let theirs: Vec<Arc<Session>> = {
            let mut map = self.map();
            let ids: Vec<String> =
                map.iter().filter(|(_, s)| s.owner == *owner).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in &theirs {
            s.shut().await;
        }
        theirs.len()
    }

    /// Closes every session (server shutdown).
    pub async fn close_all(&self) {
        let all: Vec<Arc<Session>> = self.map().drain().map(|(_, s)| s).collect();
        for s in &all {
            s.shut().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_prefix_stops_before_incomplete_chars() {
        let e = "aé".as_bytes(); // 61 c3 a9
        assert_eq!(complete_prefix(e), 3);
        assert_eq!(complete_prefix(&e[..2]), 1);
        let crab = "🦀".as_bytes();
        assert_eq!(complete_prefix(&crab[..3]), 0);
        assert_eq!(complete_prefix(crab), 4);
        assert_eq!(complete_prefix(b""), 0);
    }

    #[test]
    fn offsets_stay_absolute_across_trimming() {
        let mut b = Buffer::default();
        b.append(b"0123456789", 8);
        assert_eq!((b.base, b.end()), (2, 10));
        let r = b.read(0, 100).unwrap();
        assert_eq!((r.offset, r.dropped, r.output.as_str(), r.next_offset), (2, 2, "23456789", 10));
        let r = b.read(5, 2).unwrap();
        assert_eq!((r.output.as_str(), r.next_offset, r.more), ("56", 7, true));
        assert!(b.read(11, 1).is_err());
        // Trimming never leaves half a character at the start.
        let mut b = Buffer::default();
        b.append("aéé".as_bytes(), 3); // 61 c3 a9 c3 a9 -> keep "é"? cut 2 -> a9.. skip
        assert_eq!(String::from_utf8(b.data.clone()).unwrap(), "é");
        assert_eq!(b.base, 3);
    }
}
