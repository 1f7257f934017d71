//! The server's side of a supervisor: how to start one ([`Supervisor`]),
//! the command's environment and private `TMPDIR`, the supervisor started
//! ahead of its command, and the sweep of orphans a dead supervisor left.
//! Stopping and ending one is the driver's (see `driver`).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rustix::process::{
    Pid, Signal, WaitOptions, getpid, kill_process, set_child_subreaper, waitpid,
};
use serverfs_core::error::{ErrorCode, FsError};
use tokio::process::Child;

use serverfs_egress::{CommandNet, Egress, Who};
use serverfs_supervisor::protocol::{Mode, Order, PROTOCOL, TMPDIR_PARENT_PREFIX, ViewProbe};
use serverfs_supervisor::{Keep, Network, SandboxConfig, children};

use crate::startup::StartupError;

/// How the server starts a supervisor: a program and the arguments that
/// select the hidden subcommand.
///
/// serverfs-dev ships the supervisor as a small program of its own,
/// `serverfs-dev-supervisor` (`Supervisor::new(path, [])`: a command starts
/// faster when the supervisor is not the whole server binary), and falls
/// back to `Supervisor::new(std::env::current_exe()?, ["__supervise"])`,
/// calling `serverfs_supervisor::main` when it sees that subcommand.
///
/// Clones share one supervisor started ahead of its command (see
/// [`Order`]): a `bash` call takes it and starts the next, so a command
/// does not wait for a supervisor to start. Use a `Supervisor` within one
/// tokio runtime.
#[derive(Clone, Debug)]
pub struct Supervisor {
    program: PathBuf,
    prefix: Vec<OsString>,
    ready: Arc<ReadySlot>,
    /// The sealed in-memory copy `program` names (`/proc/self/fd/N`), when
    /// made with [`Supervisor::sealed`]; kept open for as long as a clone
    /// lives.
    image: Option<Arc<OwnedFd>>,
    /// The capabilities commands keep (a root server's; none by default).
    keep: Keep,
    /// The proxy of commands on the network by allowlist.
    egress: Option<Arc<Egress>>,
}

impl Supervisor {
    /// `program` followed by `prefix` must end up in
    /// `serverfs_supervisor::main` with the remaining arguments.
    pub fn new<I, S>(program: impl Into<PathBuf>, prefix: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            program: program.into(),
            prefix: prefix.into_iter().map(Into::into).collect(),
            ready: Arc::default(),
            image: None,
            keep: Keep::default(),
            egress: None,
        }
    }

    /// Commands started from now on keep `keep` (a root server's
    /// `--command-capabilities`).
    #[must_use]
    pub fn keeping(mut self, keep: Keep) -> Self {
        self.keep = keep;
        self
    }

    /// Commands whose sandbox puts them on the network by allowlist reach
    /// it through `egress`.
    #[must_use]
    pub fn with_egress(mut self, egress: Arc<Egress>) -> Self {
        self.egress = Some(egress);
        self
    }

    /// Like [`Supervisor::new`], but `program` is copied now into a sealed
    /// memory file, and every supervisor is started from that copy (as
    /// `/proc/self/fd/N`, which each start resolves in the server's own
    /// descriptor table before closing it): whatever happens to the file on
    /// disk afterwards (a command that may write where it lies replaces it)
    /// changes nothing; the sandbox is always applied by the program that
    /// was there at start.
    ///
    /// # Errors
    /// `program` cannot be read, or the memory file cannot be made or
    /// sealed.
    pub fn sealed<I, S>(program: &Path, prefix: I) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, memfd_create};
        use std::os::fd::AsRawFd;
        let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
        // MFD_EXEC says the copy is meant to be run (Linux 6.3+, where
        // vm.memfd_noexec may otherwise make it non-executable); older
        // kernels do not know the flag.
        let image = match memfd_create("serverfs-supervisor", flags | MemfdFlags::EXEC) {
            Err(rustix::io::Errno::INVAL) => memfd_create("serverfs-supervisor", flags)?,
            made => made?,
        };
        // Plain writes through a buffer, not `io::copy` (which splices file
        // to file): the kernel refuses the write seal with EBUSY while any
        // page of the copy is still referenced, and a splice's references
        // can outlast the call on a busy machine. A reference the kernel's
        // own wait (a few tens of milliseconds) does not see dropped is
        // waited for a little longer. (Not the whole file at once: a debug
        // build of the program is tens of megabytes.)
        let mut copy = std::fs::File::from(image);
        let mut source = std::fs::File::open(program)?;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match std::io::Read::read(&mut source, &mut buf) {
                Ok(0) => break,
                Ok(n) => std::io::Write::write_all(&mut copy, &buf[..n])?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let image = OwnedFd::from(copy);
        let seals = SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL;
        let mut tries = 0;
        while let Err(e) = fcntl_add_seals(&image, seals) {
            tries += 1;
            if e != rustix::io::Errno::BUSY || tries == 20 {
                return Err(e.into());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let mut supervisor = Self::new(format!("/proc/self/fd/{}", image.as_raw_fd()), prefix);
        supervisor.image = Some(Arc::new(image));
        Ok(supervisor)
    }

    /// Checks at start-up, in a supervisor, whether commands under
    /// `sandbox` get a view of the file system of their own (see the
    /// mounts module), and with it a `/proc` that hides other processes.
    ///
    /// # Errors
    /// The supervisor cannot be started, or building the view failed (every
    /// command would fail the same way).
    pub fn probe_view(&self, sandbox: &SandboxConfig) -> Result<ViewProbe, StartupError> {
        let mut cmd = self.command(&sandbox.to_args(), &Mode::ProbeView);
        let out = cmd
            .as_std_mut()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(StartupError::SupervisorNotStarted)?;
        ViewProbe::from_exit_code(out.status.code()).ok_or_else(|| {
            StartupError::View(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        })
    }

    /// A command line for the supervisor with the sandbox options and
    /// `mode`; stdio, cwd and env are set by the caller.
    fn command(&self, sandbox: &[OsString], mode: &Mode) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.prefix)
            .arg(PROTOCOL)
            .args(self.keep.to_args())
            .args(sandbox)
            .args(mode.to_args());
        cmd
    }
}

/// The environment of a command: `PATH`, `HOME`, `LANG`, and `TMPDIR`
/// naming the command's own private directory; nothing else (the server's
/// own variables, its secrets included, are never passed on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildEnv {
    /// `PATH`; also where `bash` itself is looked up.
    pub path: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// `LANG`.
    pub lang: Option<OsString>,
}

impl ChildEnv {
    /// The three variables copied from the server's own environment (unset
    /// ones stay unset; `PATH` falls back to a standard one).
    pub fn from_server() -> Self {
        Self {
            path: Some(
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            home: std::env::var_os("HOME"),
            lang: std::env::var_os("LANG"),
        }
    }

    /// The environment, with `TMPDIR` when given (a supervisor started
    /// ahead of its command is told its `TMPDIR` with the command).
    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command, tmpdir: Option<&Path>) {
        cmd.env_clear();
        for (key, value) in [("PATH", &self.path), ("HOME", &self.home), ("LANG", &self.lang)] {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        if let Some(tmpdir) = tmpdir {
            cmd.env("TMPDIR", tmpdir);
        }
    }
}

/// Pids of our supervisors that tokio has not reaped yet.
static SUPERVISORS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// Held by the one orphan sweep that runs at a time (on a blocking thread):
/// only a sweep reaps an orphan, so a pid a sweep found stays its orphan
/// (or a zombie) until that sweep has killed it.
static SWEEPING: Mutex<()> = Mutex::new(());
/// [`adopt_orphans`] was called.
static ADOPTING: AtomicBool = AtomicBool::new(false);

pub(crate) fn supervisors() -> MutexGuard<'static, BTreeSet<i32>> {
    SUPERVISORS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Forgets a supervisor once it has been reaped.
pub(crate) fn reaped(pid: Option<u32>) {
    if let Some(pid) = pid {
        supervisors().remove(&(pid as i32));
    }
}

/// Makes the server a child subreaper too, so that if a supervisor dies
/// before its tree (a command can `kill -9 $PPID`: same user), the tree is
/// re-parented to the server instead of init, and the server kills and
/// reaps it (see the crate docs).
///
/// Only for a server whose every child process is a supervisor started by
/// this crate: when a supervisor dies without reporting, every other child
/// of the server is taken for an orphan and SIGKILLed.
pub fn adopt_orphans() -> std::io::Result<()> {
    set_child_subreaper(Some(getpid())).map_err(std::io::Error::from)?;
    ADOPTING.store(true, Ordering::Release);
    Ok(())
}

/// After a supervisor ended: SIGKILL every child of the server that is not
/// a live supervisor, reap it, and repeat while their own children keep
/// being re-parented to us (bounded).
///
/// `trusted_end`: the supervisor exited with code 0, which it does only
/// after `wait` told it that no child of its was left — its tree is gone,
/// nothing of it came to us, and the server's children are listed cheaply
/// (their `children` files; see the children module). After any other end
/// (killed, crashed, stopped by us) the sweep scans all of `/proc`, which
/// stays exact while other commands' supervisors start and end.
pub(crate) async fn sweep_orphans(trusted_end: bool) {
    if !ADOPTING.load(Ordering::Acquire) {
        return;
    }
    // It reads /proc and sleeps between rounds: not on an async worker.
    let _ = tokio::task::spawn_blocking(move || sweep_orphans_now(trusted_end)).await;
}

fn sweep_orphans_now(trusted_end: bool) {
    sweep_orphans_with(|| {
        let listed = if trusted_end { children::listed() } else { None };
        listed.unwrap_or_else(children::scanned)
    });
}

/// The sweep, with `find` listing the server's children. The listing (a
/// scan of all `/proc` on a busy machine) is made without the supervisors'
/// lock, which every command's start and end takes; what it found is
/// checked again under that lock, one pid at a time: a pid that is still
/// our child and not a live supervisor is an orphan (supervisors are
/// started and registered under the lock, and only a sweep reaps a child
/// that is not one), and stays ours until this sweep reaps it.
fn sweep_orphans_with(find: impl Fn() -> Vec<i32>) {
    let _only_sweep = SWEEPING.lock().unwrap_or_else(PoisonError::into_inner);
    for _ in 0..2000 {
        let candidates = find();
        let found: Vec<Pid> = {
            let live = supervisors();
            candidates
                .into_iter()
                .filter(|&pid| !live.contains(&pid) && children::is_ours(pid))
                .filter_map(Pid::from_raw)
                .inspect(|&pid| {
                    let _ = kill_process(pid, Signal::KILL);
                })
                .collect()
        };
        if found.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
        for pid in found {
            // A specific pid: never steals the status of tokio's children.
            let _ = waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// A started supervisor, the server's end of its control channel, and the
/// command's private temporary directory.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    /// Non-blocking, and not watched by the runtime: a command's run only
    /// shuts its writing down (the stop) and reads the status line once
    /// the supervisor has exited (a session makes it asynchronous).
    pub(crate) control: UnixStream,
    pub(crate) tmp: PrivateTmp,
    /// The command's id, as its audit lines name it.
    pub(crate) id: String,
    /// The proxy serving the command (on the network by allowlist), for as
    /// long as it lives.
    pub(crate) net: Option<CommandNet>,
}

/// A command's own `TMPDIR` (mode 0700, named at random in the server's
/// own directory of them, `serverfs-cmd-<server pid>-<random>` in the
/// server's temporary directory, mode 0700 too), removed with everything in it when
/// dropped — after the command's tree is gone. That directory exists only
/// while a `TMPDIR` is in it (a supervisor started ahead holds one): made
/// with the first, removed with the last, so a process whose commands and
/// supervisors have ended leaves nothing in `/tmp`. A server killed while
/// they live leaves theirs behind; the next start removes them
/// ([`sweep_stale_tmpdirs`]). In a command's own view of the file system
/// the others in that directory are invisible, and so are the directories
/// of the other servers of this user (see the mounts module).
pub(crate) struct PrivateTmp(PathBuf);

/// Removes the private `TMPDIR`s that servers no longer running left in the
/// temporary directory (a server killed with commands running): the
/// directories (not symlinks) of this user named after a pid that is gone
/// (`serverfs-cmd-<pid>`, and `serverfs-cmd-<pid>-<random>` as earlier
/// versions named each `TMPDIR`). Another server's, still running, are
/// left alone. Returns how many were removed.
pub fn sweep_stale_tmpdirs() -> usize {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMPDIR_PARENT_PREFIX))
            .map(|rest| rest.split_once('-').map_or(rest, |(pid, _)| pid))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            remove_tmp(&path);
            removed += 1;
        }
    }
    removed
}

/// This server's directory of private `TMPDIR`s, made at the first
/// command. One found there already (a dead server's of the same pid, not
/// yet swept) is used if it is a directory of this user that only this user
/// may enter; anything else (another user's, a symlink) is refused.
fn tmpdir_parent() -> Result<&'static Path, FsError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    // Made again after the last TMPDIR took it away: same path. Named at
    // random after the pid: no other user can make it first (and so deny
    // every command), and no command of another server can guess it.
    let path = match TMPDIR_PARENT.get() {
        Some(path) => path.clone(),
        None => {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).map_err(|e| internal("Could not create TMPDIR", e))?;
            let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let name = format!("{TMPDIR_PARENT_PREFIX}{}-{random}", std::process::id());
            std::env::temp_dir().join(name)
        }
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let me = rustix::process::geteuid().as_raw();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| internal("Could not create TMPDIR", e))?;
            if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o077 != 0 {
                return Err(internal(
                    "Could not create TMPDIR",
                    format!("{} is not this user's private directory", path.display()),
                ));
            }
        }
        Err(e) => return Err(internal("Could not create TMPDIR", e)),
    }
    Ok(TMPDIR_PARENT.get_or_init(|| path))
}

/// This server's directory of private `TMPDIR`s, once made.
static TMPDIR_PARENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// How many private `TMPDIR`s this process holds. Its lock is held while
/// one is made or the last one's directory removed, so that the directory
/// is never removed between being made (or found) and used.
static LIVE_TMPDIRS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

fn live_tmpdirs() -> std::sync::MutexGuard<'static, usize> {
    LIVE_TMPDIRS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes this server's directory of private `TMPDIR`s when it is empty
/// (every command has ended): for a server's clean end. One left behind is
/// swept at the next start ([`sweep_stale_tmpdirs`]).
pub fn remove_tmpdir_parent() {
    if let Some(parent) = TMPDIR_PARENT.get() {
        let _ = std::fs::remove_dir(parent);
    }
}

impl PrivateTmp {
    fn create() -> Result<Self, FsError> {
        use std::os::unix::fs::DirBuilderExt;
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| internal("Could not create TMPDIR", e))?;
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut live = live_tmpdirs();
        let path = tmpdir_parent()?.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| internal("Could not create TMPDIR", e))?;
        *live += 1;
        Ok(Self(path))
    }

    /// Removes the directory on a blocking thread (a command can leave a
    /// large tree in it), and returns once it is gone.
    pub(crate) async fn remove(mut self) {
        let path = std::mem::take(&mut self.0);
        let _ = tokio::task::spawn_blocking(move || release(&path)).await;
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // Not removed by `remove` (an early return): remove it here.
        if !self.0.as_os_str().is_empty() {
            release(&self.0);
        }
    }
}

/// Removes a private `TMPDIR`, and the directory of them with the last one.
fn release(path: &Path) {
    remove_tmp(path);
    let mut live = live_tmpdirs();
    *live = live.saturating_sub(1);
    if *live == 0
        && let Some(parent) = path.parent()
    {
        let _ = std::fs::remove_dir(parent);
    }
}

fn remove_tmp(path: &Path) {
    // Most commands leave it empty: one rmdir then.
    if std::fs::remove_dir(path).is_err() {
        let _ = std::fs::remove_dir_all(path);
    }
}

pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> FsError {
    FsError::new(ErrorCode::InternalError, format!("{what}.")).with_detail(e.to_string())
}

/// Starts a supervisor and hands it `command` (`None`: a shell session)
/// at once, with `cwd`, a private `TMPDIR`, the sandbox if any, and the
/// given output pipes; `principal` is whom its audit lines name.
pub(crate) fn spawn(
    supervisor: &Supervisor,
    command: Option<&str>,
    cwd: &Path,
    env: &ChildEnv,
    sandbox: Option<&SandboxConfig>,
    output: (Stdio, Stdio),
    principal: &str,
) -> Result<Spawned, FsError> {
    let ready = Ready::start(supervisor, env, sandbox, output)?;
    match ready.hand_over(command, cwd, principal) {
        HandOver::Done(spawned) => Ok(*spawned),
        HandOver::Failed(e) => Err(e),
        HandOver::NotSent => Err(internal("Could not start the command", "its supervisor ended")),
    }
}

/// Starts `bash -c command` under a supervisor with piped output: the one
/// started ahead for this environment and sandbox if there is one (it is
/// handed the command), else a new one (see [`prepare_next`]).
pub(crate) async fn spawn_run(
    supervisor: &Supervisor,
    command: &str,
    cwd: &Path,
    env: &ChildEnv,
    sandbox: Option<&SandboxConfig>,
    principal: &str,
) -> Result<Spawned, FsError> {
    let ready =
        supervisor.take_ready().await.filter(|r| r.env == *env && r.sandbox.as_ref() == sandbox);
    let spawned = match ready.map(|r| r.hand_over(Some(command), cwd, principal)) {
        Some(HandOver::Done(spawned)) => *spawned,
        Some(HandOver::Failed(e)) => return Err(e),
        // None ready, or it died while waiting: nothing was handed over.
        Some(HandOver::NotSent) | None => spawn(
            supervisor,
            Some(command),
            cwd,
            env,
            sandbox,
            (Stdio::piped(), Stdio::piped()),
            principal,
        )?,
    };
    Ok(spawned)
}

/// Starts, on a blocking thread, the supervisor the next `bash` call will
/// be handed, unless one is waiting. Called when a command has ended: a
/// supervisor starting while the command runs would compete with it for
/// the CPU. If it cannot start, the next command starts its own.
pub(crate) fn prepare_next(
    supervisor: &Supervisor,
    env: &ChildEnv,
    sandbox: Option<&SandboxConfig>,
) {
    {
        let mut slot = supervisor.slot();
        if !matches!(*slot, Slot::Empty) {
            return;
        }
        *slot = Slot::Starting;
    }
    // The slot leaves `Starting` however this ends, also when the blocking
    // task never runs (the runtime shutting down drops it unrun).
    let starting = Starting(supervisor.clone());
    let (env, sandbox) = (env.clone(), sandbox.cloned());
    tokio::task::spawn_blocking(move || {
        // Started without the slot's lock: a command that comes meanwhile
        // awaits it (see `take_ready`).
        let output = (Stdio::piped(), Stdio::piped());
        if let Ok(ready) = Ready::start(&starting.0, &env, sandbox.as_ref(), output) {
            *starting.0.slot() = Slot::Waiting(Box::new(ready));
        }
    });
}

/// The supervisor started ahead, shared by a [`Supervisor`]'s clones.
#[derive(Debug, Default)]
struct ReadySlot {
    slot: Mutex<Slot>,
    /// Told when the slot leaves [`Slot::Starting`].
    started: tokio::sync::Notify,
}

/// A start under way: its end (a supervisor waiting, or none) is told to
/// the commands awaiting it, also when the start failed or panicked.
struct Starting(Supervisor);

impl Drop for Starting {
    fn drop(&mut self) {
        {
            let mut slot = self.0.slot();
            if matches!(*slot, Slot::Starting) {
                *slot = Slot::Empty;
            }
        }
        self.0.ready.started.notify_waiters();
    }
}

/// The place of the supervisor started ahead.
#[derive(Debug, Default)]
enum Slot {
    /// None, and none starting: the next command's end starts one.
    #[default]
    Empty,
    /// One is starting on a blocking thread.
    Starting,
    /// One waits for its order.
    Waiting(Box<Ready>),
}

impl Slot {
    /// The waiting supervisor, if one waits (the slot is then empty).
    fn take(&mut self) -> Option<Ready> {
        match std::mem::take(self) {
            Slot::Waiting(ready) => Some(*ready),
            other => {
                *self = other;
                None
            }
        }
    }
}

impl Supervisor {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.ready.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The supervisor waiting for a command, if any. One still starting is
    /// awaited (it is part of a start: a second one started beside it
    /// would only compete for the CPU), with no lock held and no thread
    /// blocked meanwhile.
    async fn take_ready(&self) -> Option<Ready> {
        loop {
            // Registered before the slot is looked at: a start that ends in
            // between still wakes us.
            let started = self.ready.started.notified();
            tokio::pin!(started);
            started.as_mut().enable();
            {
                let mut slot = self.slot();
                if !matches!(*slot, Slot::Starting) {
                    return slot.take();
                }
            }
            started.await;
        }
    }
}

/// A supervisor started ahead of its command, in `ready` mode: it waits
/// for an order on its control channel (see the supervisor module's
/// `Order`), in `/`, with its command's `TMPDIR` (made ahead). Dropped unused, its channel closes
/// and it exits.
pub(crate) struct Ready {
    /// The supervisor, our end of its channel and the command's private
    /// `TMPDIR` (made ahead too: a directory costs a journalled write),
    /// until handed over.
    started: Option<(Child, UnixStream, PrivateTmp)>,
    env: ChildEnv,
    sandbox: Option<SandboxConfig>,
    /// The proxy its command reaches the network through, if by allowlist.
    egress: Option<Arc<Egress>>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pid = self.started.as_ref().and_then(|(child, _, _)| child.id());
        f.debug_struct("Ready").field("pid", &pid).finish_non_exhaustive()
    }
}

/// How handing a command to a [`Ready`] supervisor went.
enum HandOver {
    /// It runs the command.
    Done(Box<Spawned>),
    /// It did not get the command (it is gone): start another.
    NotSent,
    /// An error to report: the directory could not be opened, or the
    /// command may have been received (then it must never run a second
    /// time).
    Failed(FsError),
}

impl Ready {
    fn start(
        supervisor: &Supervisor,
        env: &ChildEnv,
        sandbox: Option<&SandboxConfig>,
        (stdout, stderr): (Stdio, Stdio),
    ) -> Result<Self, FsError> {
        let egress = match sandbox.map(|s| s.network) {
            Some(Network::Proxy) => Some(supervisor.egress.clone().ok_or_else(|| {
                internal("Could not start the command", "no proxy for the network allowlist")
            })?),
            _ => None,
        };
        let tmp = PrivateTmp::create()?;
        let sandbox_args = sandbox.map(|s| s.to_args()).unwrap_or_default();
        let (child, control) = start(
            supervisor,
            &sandbox_args,
            &Mode::Ready,
            Path::new("/"),
            env,
            // Known now, so the supervisor hides the others ahead too.
            Some(&tmp.0),
            stdout,
            stderr,
        )?;
        Ok(Self {
            started: Some((child, control, tmp)),
            env: env.clone(),
            sandbox: sandbox.cloned(),
            egress,
        })
    }

    /// Sends the order: the command (`None`: a session), its private
    /// `TMPDIR`, `cwd` opened here and passed as a file descriptor, and on
    /// the network by allowlist the channel its proxy socket comes back
    /// on (served from now on for `principal`).
    fn hand_over(mut self, command: Option<&str>, cwd: &Path, principal: &str) -> HandOver {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
        use std::io::IoSlice;
        use std::mem::MaybeUninit;
        use std::os::fd::AsFd;
        let failed = |what: &str, e: &dyn std::fmt::Display| HandOver::Failed(internal(what, e));
        let dir = match rustix::fs::open(
            cwd,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) {
            Ok(dir) => dir,
            Err(e) => return failed("Could not open the command's directory", &e),
        };
        // Until it is handed over, an early return drops `self`: the
        // supervisor sees the end of its channel and exits.
        let Some((_, control, tmp)) = self.started.as_ref() else {
            return HandOver::NotSent;
        };
        let order = Order::encode(&tmp.0, command);
        let proxy = match self.egress.is_some().then(UnixStream::pair).transpose() {
            Ok(proxy) => proxy,
            Err(e) => return failed("Could not create the proxy's channel", &e),
        };
        let fds: Vec<_> = std::iter::once(dir.as_fd())
            .chain(proxy.as_ref().map(|(_, theirs)| theirs.as_fd()))
            .collect();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        ancillary.push(SendAncillaryMessage::ScmRights(&fds));
        // One non-blocking send: the whole order fits in a new channel's
        // buffer (the longest command is 100,000 bytes). When it does not
        // all go (the supervisor is gone, stopped, or the buffer smaller),
        // dropping the channel ends it: a supervisor runs an order only
        // once it has read all of it.
        let sent = loop {
            match sendmsg(control, &[IoSlice::new(&order)], &mut ancillary, SendFlags::NOSIGNAL) {
                Err(rustix::io::Errno::INTR) => continue,
                result => break result,
            }
        };
        if sent != Ok(order.len()) {
            return HandOver::NotSent;
        }
        let Some((child, control, tmp)) = self.started.take() else {
            return HandOver::NotSent;
        };
        let id = command_id();
        let net = self.egress.as_ref().zip(proxy).map(|(egress, (ours, _))| {
            egress.serve(ours, Who { principal: principal.to_owned(), command: id.clone() })
        });
        HandOver::Done(Box::new(Spawned { child, control, tmp, id, net }))
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        // Unused: it exits at the end of its channel, and is no longer one
        // of the supervisors the orphan sweep spares. It has started
        // nothing yet, so killing it leaves nothing behind; a supervisor
        // that does not end at its channel's end (not ours) ends anyway.
        if let Some((child, _, _)) = &mut self.started {
            reaped(child.id());
            let _ = child.start_kill();
        }
    }
}

/// A new command's id: 8 hex digits, random (what its audit lines and its
/// network's share).
fn command_id() -> String {
    let mut bytes = [0u8; 4];
    // Only a name for log lines: a failure leaves it zero.
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts `supervisor` with its protocol, `sandbox_args`, `mode` and the
/// given directory, environment and output; registers it as a live
/// supervisor; returns it and our end of its control channel (non-blocking).
#[allow(clippy::too_many_arguments)]
fn start(
    supervisor: &Supervisor,
    sandbox_args: &[OsString],
    mode: &Mode,
    cwd: &Path,
    env: &ChildEnv,
    tmpdir: Option<&Path>,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<(Child, UnixStream), FsError> {
    let (ours, theirs) =
        UnixStream::pair().map_err(|e| internal("Could not create the control channel", e))?;
    ours.set_nonblocking(true).map_err(|e| internal("Could not create the control channel", e))?;
    let mut cmd = supervisor.command(sandbox_args, mode);
    cmd.stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(stdout)
        .stderr(stderr)
        .current_dir(cwd)
        .kill_on_drop(false);
    env.apply(&mut cmd, tmpdir);
    let child = {
        // Registered under the same lock the orphan sweep scans under, so
        // the sweep never mistakes a new supervisor for an orphan.
        let mut live = supervisors();
        let child = cmd.spawn().map_err(|e| internal("Could not start the command", e))?;
        if let Some(id) = child.id() {
            live.insert(id as i32);
        }
        child
    };
    // `cmd` still holds the supervisor's end: drop it now, or the
    // supervisor would never see end of file.
    drop(cmd);
    Ok((child, ours))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A sweep lists the processes (on a busy machine a scan of all of
    /// `/proc`) without the supervisors' lock: a supervisor starts while
    /// a listing is under way. Here the listing does not end until that
    /// start is done; with the lock held across it, neither would.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_supervisor_starts_while_a_sweep_lists_the_processes() {
        let (listing_tx, listing_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let sweep = std::thread::spawn(move || {
            sweep_orphans_with(|| {
                let _ = listing_tx.send(());
                started_rx
                    .recv_timeout(Duration::from_secs(120))
                    .expect("no supervisor could start while a sweep listed the processes");
                Vec::new()
            });
        });
        listing_rx.recv().unwrap();
        // `true` stands in for the supervisor: it starts and exits at once.
        let supervisor = Supervisor::new("true", [""; 0]);
        let env = ChildEnv::from_server();
        let (mut child, _control) = start(
            &supervisor,
            &[],
            &Mode::Ready,
            Path::new("/"),
            &env,
            None,
            Stdio::null(),
            Stdio::null(),
        )
        .unwrap();
        started_tx.send(()).unwrap();
        sweep.join().expect("the sweep ended once the supervisor had started");
        let pid = child.id();
        child.wait().await.unwrap();
        reaped(pid);
    }

    /// A command that comes while the next supervisor starts awaits it: no
    /// lock is held meanwhile and no thread is blocked (on this runtime's
    /// one thread, a blocked wait would stop this test's own task), and it
    /// goes on when the start ends, here without a supervisor.
    #[tokio::test]
    async fn a_command_awaits_a_supervisor_being_started_without_blocking() {
        let supervisor = Supervisor::new("true", [""; 0]);
        *supervisor.slot() = Slot::Starting;
        let starting = Starting(supervisor.clone());
        let waiter = tokio::spawn({
            let supervisor = supervisor.clone();
            async move { supervisor.take_ready().await.is_none() }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "it took the slot while a start was under way");
        assert!(supervisor.ready.slot.try_lock().is_ok(), "the slot is locked across the start");
        drop(starting);
        assert!(waiter.await.unwrap(), "the start ended with no supervisor");
        assert!(matches!(*supervisor.slot(), Slot::Empty));
    }

    /// What a listing found is checked again under the lock: a process that
    /// is not (or no longer) the server's child is never killed.
    #[test]
    fn a_sweep_kills_only_processes_that_are_still_its_children() {
        let out = std::process::Command::new("sh")
            .args(["-c", "sleep 120 >/dev/null 2>&1 & echo $!"])
            .output()
            .unwrap();
        let pid: i32 = String::from_utf8(out.stdout).unwrap().trim().parse().unwrap();
        // Its parent `sh` has exited: the sleep is init's (or a subreaper's).
        assert!(!children::is_ours(pid));
        sweep_orphans_with(|| vec![pid]);
        let alive =
            Pid::from_raw(pid).is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        let _ = Pid::from_raw(pid).map(|p| kill_process(p, Signal::KILL));
        assert!(alive, "the sweep killed a process that is not its child");
    }
}
