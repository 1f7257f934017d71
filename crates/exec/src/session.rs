//! Shell sessions: a long-lived `bash --noprofile --norc` per session,
//! under the same supervisor as one-shot commands, its stdout and stderr
//! merged into one buffer read at absolute byte offsets.
//!
//! A `bash` command still running at its yield point becomes a session too
//! ([`Sessions::run`]): same owner rules, same registry and caps, read the
//! same way, killed the same way (close, idle reaper, shutdown), but it
//! takes no input and still ends at its own timeout.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serverfs_core::Reported;
use serverfs_core::error::{ErrorCode, FsError};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio_util::sync::CancellationToken;

use crate::driver::{STOP_GRACE, drive};
use crate::launch::{ChildEnv, Supervisor, internal, spawn};
use crate::output::{ReadOutput, SessionAudit, Shared, drain};
use serverfs_supervisor::SandboxConfig;

/// Who opened a session: `Owner::new("stdio")` for the stdio transport,
/// the request's authenticated principal over HTTP (`anonymous` without
/// one; see the crate docs). Another owner's sessions are invisible: same
/// error as an unknown id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner(String);

impl Owner {
    /// An owner named by the transport.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// Its name: the principal.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// A session id's first 8 hex digits: enough to follow a session through
/// the log, not enough to use it (the whole id is a capability).
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
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
        let mut rx = self.shared.subscribe();
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
    /// The owners of sessions being opened (their shells start without the
    /// map's lock): they count against the caps. Locked after `map`.
    opening: Mutex<Vec<Owner>>,
}

/// A place held for a session of `owner` while its shell starts; given
/// back when dropped (the session is in the map by then, or never will be).
struct Opening<'a> {
    inner: &'a Inner,
    owner: Owner,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut opening = self.inner.opening.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = opening.iter().position(|o| *o == self.owner) {
            opening.swap_remove(i);
        }
    }
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

fn audit(owner: &Owner, id: &str, kind: &'static str, started: Instant) -> SessionAudit {
    SessionAudit { principal: owner.0.clone(), session: short_id(id), kind, started }
}

/// The audit line of sessions the server closed on its own (idle, or at
/// shutdown); a client's `shell_close` has its tool's line.
fn log_closed(closed: &[(String, Arc<Session>)], by: &'static str) {
    for (id, s) in closed {
        tracing::info!(event = "session_closed", principal = s.owner.0, session = short_id(id), by);
    }
}

fn new_id() -> Result<String, FsError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| internal("Could not create a session id", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// An empty registry. Inside a tokio runtime it also starts the idle
    /// reaper (a task that ends when the registry is dropped).
    pub fn new(cfg: SessionConfig) -> Self {
        let idle = cfg.idle_timeout;
        let inner = Arc::new(Inner { cfg, map: Mutex::default(), opening: Mutex::default() });
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

    /// `SERVER_BUSY` when `owner` may not have one more session (those
    /// being opened count).
    fn check_room(
        &self,
        map: &HashMap<String, Arc<Session>>,
        owner: &Owner,
    ) -> Result<(), FsError> {
        let cfg = &self.inner.cfg;
        let opening = self.inner.opening.lock().unwrap_or_else(PoisonError::into_inner);
        let owners = opening.iter().chain(map.values().map(|s| &s.owner));
        if map.len() + opening.len() >= cfg.max_sessions
            || owners.filter(|&o| o == owner).count() >= cfg.max_per_owner
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
    /// `started` is when the command started (its end line says how long
    /// it ran).
    pub(crate) fn adopt(
        &self,
        owner: &Owner,
        shared: Arc<Shared>,
        stop: CancellationToken,
        started: Instant,
    ) -> Result<String, FsError> {
        let mut map = self.map();
        self.check_room(&map, owner)?;
        let id = new_id()?;
        shared.attach(audit(owner, &id, "bash", started));
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
        let opening = self.reserve(owner)?;
        let id = new_id()?;
        let (reader, writer) =
            std::io::pipe().map_err(|e| internal("Could not create the output pipe", e))?;
        let writer2 =
            writer.try_clone().map_err(|e| internal("Could not create the output pipe", e))?;
        let spawned = spawn(
            &cfg.supervisor,
            None,
            cwd,
            env.unwrap_or(&cfg.env),
            cfg.sandbox.as_ref(),
            (Stdio::from(writer), Stdio::from(writer2)),
            owner.name(),
        )?;
        let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(|e| internal("Could not read the shell's output", e))?;
        // Input goes out through the runtime on a second handle to the
        // channel; the driver keeps the first (the stop, the status line).
        let input = spawned
            .control
            .try_clone()
            .and_then(tokio::net::UnixStream::from_std)
            .map_err(|e| internal("Could not create the control channel", e))?
            .into_split()
            .1;
        let shared = Shared::new();
        shared.attach(audit(owner, &id, "shell", Instant::now()));
        let stop = CancellationToken::new();
        let session = Arc::new(Session {
            owner: owner.clone(),
            shared: shared.clone(),
            input: tokio::sync::Mutex::new(Some(input)),
            command: false,
            stop: stop.clone(),
            last_used: Mutex::new(Instant::now()),
        });
        let cap = cfg.buffer_cap;
        tokio::spawn(async move {
            let ending =
                drive(spawned, stop, drain(reader, None, Some((&shared, cap)), None)).await;
            shared.finish(ending.ended);
        });
        // The place is given back under the map's lock, with the session in
        // it: never counted twice, never missing.
        let mut map = self.map();
        map.insert(id.clone(), session);
        drop(opening);
        Ok(id)
    }

    /// Holds a place for a session of `owner` (`SERVER_BUSY` past the
    /// caps), so that its shell starts without the registry's lock: other
    /// opens, reads and closes go on meanwhile.
    fn reserve(&self, owner: &Owner) -> Result<Opening<'_>, FsError> {
        let map = self.map();
        self.check_room(&map, owner)?;
        let mut opening = self.inner.opening.lock().unwrap_or_else(PoisonError::into_inner);
        opening.push(owner.clone());
        Ok(Opening { inner: &self.inner, owner: owner.clone() })
    }

    /// Writes `input` to the shell's stdin (the caller applies
    /// [`crate::policy::Policy::check_input`] first). End each command with `\n`.
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
        let mut rx = s.shared.subscribe();
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
        let stale: Vec<(String, Arc<Session>)> = {
            let mut map = self.map();
            let ids: Vec<String> =
                map.iter().filter(|(_, s)| s.idle() >= idle).map(|(id, _)| id.clone()).collect();
            ids.into_iter().filter_map(|id| map.remove(&id).map(|s| (id, s))).collect()
        };
        log_closed(&stale, "idle");
        for (_, s) in &stale {
            s.shut().await;
        }
        stale.len()
    }

    /// Closes every session (server shutdown).
    pub async fn close_all(&self) {
        let all: Vec<(String, Arc<Session>)> = self.map().drain().collect();
        log_closed(&all, "shutdown");
        for (_, s) in &all {
            s.shut().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell being started holds a place, not the registry: another open
    /// goes through meanwhile (with the registry locked across the start it
    /// would wait forever), and the place counts against the caps.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_session_being_opened_holds_a_place_not_the_registry() {
        // `cat` stands in for the supervisor: it takes its order and waits
        // for its channel's end.
        let stand_in = Supervisor::new("sh", ["-c", "exec cat >/dev/null", "sh"]);
        let mut cfg = SessionConfig::new(stand_in);
        cfg.max_per_owner = 2;
        let sessions = Sessions::new(cfg);
        let (alice, bob) = (Owner::new("alice"), Owner::new("bob"));
        let place = sessions.reserve(&alice).unwrap();

        let (tx, rx) = std::sync::mpsc::channel();
        let (other, runtime) = (sessions.clone(), tokio::runtime::Handle::current());
        let open = |owner: Owner| {
            let (other, runtime, tx) = (other.clone(), runtime.clone(), tx.clone());
            std::thread::spawn(move || {
                let _entered = runtime.enter();
                let _ = tx.send(other.open(&owner, Path::new("/"), None).map(|_| ()));
            });
        };
        let waited = |rx: &std::sync::mpsc::Receiver<Result<(), FsError>>| {
            rx.recv_timeout(Duration::from_secs(120))
                .expect("an open waited for a session being opened elsewhere")
        };
        open(bob.clone());
        waited(&rx).expect("bob's session opens while alice's starts");
        open(alice.clone());
        waited(&rx).expect("alice's second session fits beside the one starting");
        open(alice.clone());
        let refused = waited(&rx).expect_err("a third session of alice's is past her cap of 2");
        assert_eq!(refused.code(), ErrorCode::ServerBusy);
        drop(place);
        open(alice);
        waited(&rx).expect("the place given back is free again");
        sessions.close_all().await;
    }
}
