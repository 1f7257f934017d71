//! The per-command supervisor: a tiny process between the server and
//! `bash` that makes sure no descendant of the command outlives it.
//!
//! The server starts it (see `serverfs-exec`'s `launch`) with:
//!
//! - fd 0: one end of a Unix socket pair, the *control channel*. The server
//!   writes shell input on it (session mode only) and closes it to ask for
//!   the end; the supervisor answers with one status line (`exit N`,
//!   `signal N` or `error …`) just before it exits.
//! - fds 1 and 2: the command's output pipes, handed on to `bash`.
//! - the working directory and the minimal environment of the command.
//!
//! In `ready` mode it is started before its command, sets up all it can
//! (subreaper, signals, the sandbox's ruleset: see `Setup`) and waits for
//! an [`Order`] on the control channel. It moves into the order's
//! directory, adds its `TMPDIR` to the sandbox's writable paths and to
//! bash's environment, and goes on as in `run` mode.
//!
//! The supervisor marks itself a child subreaper, starts
//! `bash --noprofile --norc [-c COMMAND]` in a process group of its own and
//! waits. When `bash` ends, when the control channel reaches end of file
//! (the server asked, or died), or on SIGTERM/SIGINT/SIGHUP, it kills
//! bash's process group and then, until it has no child left, SIGKILLs every
//! process whose parent it is and reaps them. Every descendant that escapes
//! the group (`setsid`, double forks, `nohup`) is re-parented to the
//! supervisor when its parent dies, so the loop reaches it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::net::RecvFlags;
use rustix::process::{
    Pid, Signal, WaitId, WaitIdOptions, WaitOptions, getpid, kill_process, kill_process_group,
    set_child_subreaper, wait, waitid,
};

use crate::Error;
use crate::children;
use crate::confine::{Filter, Keep};
use crate::mounts::View;
use crate::network::{Network, PROXY_ENV};
use crate::protocol::{
    ENV_KEYS, EXIT_USAGE, Ended, Failure, MAX_REPO_LINE, MAX_REPOS_REPORTED, Mode, Order, PROTOCOL,
    REPO_LINE, ViewProbe,
};
use crate::sandbox::{Prepared, SandboxConfig};

/// Waits for the order and moves into its directory. `Ok(None)`: the
/// channel ended first (the server no longer needs this supervisor).
/// Returns the order and, when it came with one, the socket on which to
/// hand the proxy's listening socket back.
fn receive_order(control: &OwnedFd) -> Result<Option<(Order, Option<OwnedFd>)>, Failure> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, recvmsg};
    use std::io::IoSliceMut;
    use std::mem::MaybeUninit;
    let mut header = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match recvmsg(
            control,
            &mut [IoSliceMut::new(&mut header)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
        ) {
            Err(Errno::INTR) => continue,
            Err(_) => return Err(Failure::Order),
            Ok(r) => break r.bytes,
        }
    };
    let mut fds = Vec::new();
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if received == 0 && fds.is_empty() {
        return Ok(None);
    }
    if received != 4 || !(1..=2).contains(&fds.len()) {
        return Err(Failure::Order);
    }
    let proxy_channel = (fds.len() == 2).then(|| fds.remove(1));
    let dir = fds.remove(0);
    let len = Order::body_len(header).ok_or(Failure::Order)?;
    let mut body = vec![0u8; len];
    File::from(control.try_clone().map_err(|_| Failure::Order)?)
        .read_exact(&mut body)
        .map_err(|_| Failure::Order)?;
    let order = Order::decode(body).ok_or(Failure::Order)?;
    rustix::process::fchdir(&dir).map_err(|_| Failure::Cwd)?;
    Ok(Some((order, proxy_channel)))
}

/// Hands the proxy's listening socket (made in the command's network
/// namespace) to the server over `channel`, and closes our copy: from now
/// on only the server accepts on it.
fn hand_proxy(listener: TcpListener, channel: &OwnedFd) -> Result<(), Failure> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    use std::io::IoSlice;
    use std::mem::MaybeUninit;
    let fds = [listener.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    ancillary.push(SendAncillaryMessage::ScmRights(&fds));
    loop {
        match sendmsg(channel, &[IoSlice::new(b"L")], &mut ancillary, SendFlags::NOSIGNAL) {
            Err(Errno::INTR) => continue,
            Ok(1) => return Ok(()),
            _ => return Err(Failure::Order),
        }
    }
}

/// The supervisor's entry point. `args` are the arguments after the program
/// (and after the hidden subcommand, when the server's own binary is the
/// supervisor): the protocol version, the capabilities kept and the sandbox
/// options if any (see [`SandboxConfig`]), then the [`Mode`].
///
/// It never writes to stdout (it belongs to the command), nor to stderr but
/// in `probe-view` mode; its result goes to the server on the control
/// channel, and its exit code is the protocol's (see [`crate::protocol`]).
pub fn main<I>(args: I) -> ExitCode
where
    I: IntoIterator<Item = OsString>,
{
    // First of all: non-dumpable, so that a command running as the same
    // user can neither ptrace us nor open /proc/<us>/fd/* (our control
    // channel) nor pidfd_getfd from us. `bash` is dumpable again after its
    // exec.
    if rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    // Whatever the server was started with, bash gets only fds 0-2.
    crate::inherit_nothing();
    let mut args = args.into_iter().peekable();
    let usage = ExitCode::from(EXIT_USAGE);
    if args.next().is_none_or(|a| a != PROTOCOL) {
        return usage;
    }
    let Ok(keep) = Keep::from_args(&mut args) else { return usage };
    let Ok(sandbox) = SandboxConfig::from_args(&mut args) else { return usage };
    let mode = match Mode::from_args(args) {
        Some(Mode::ProbeView) => return probe_view(sandbox.as_ref()),
        Some(mode) => mode,
        None => return usage,
    };
    // Our own copy of the control channel (close-on-exec, so bash never
    // sees it; bash's fd 0 is /dev/null or a pipe).
    let Ok(control) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return ExitCode::FAILURE;
    };
    let ready = matches!(mode, Mode::Ready);
    let setup = match Setup::new(sandbox.as_ref(), keep, ready) {
        Ok(setup) => setup,
        // Started ahead: the failure is the command's that comes (the root
        // moved since, say), reported to it like any other; nothing when
        // none comes.
        Err(what) if ready => {
            if let Ok(Some(_)) = receive_order(&control)
                && let Ok(fd) = control.try_clone()
            {
                report(&mut File::from(fd), &what.line());
            }
            return ExitCode::FAILURE;
        }
        Err(what) => {
            if let Ok(fd) = control.try_clone() {
                report(&mut File::from(fd), &what.line());
            }
            return ExitCode::FAILURE;
        }
    };
    let mut setup = setup;
    let ordered = match mode {
        Mode::Ready => match setup.wait_for_order(&control) {
            Ok(Some((Order { command, tmpdir }, channel))) => setup
                .hand_proxy(channel)
                .map(|()| (command.map_or(Mode::Session, Mode::Run), Some(tmpdir))),
            Ok(None) => return ExitCode::SUCCESS,
            Err(what) => Err(what),
        },
        // Only an order can take the proxy's socket.
        mode => setup.hand_proxy(None).map(|()| (mode, None)),
    };
    let (mode, tmpdir) = match ordered {
        Ok(ordered) => ordered,
        Err(what) => {
            if let Ok(fd) = control.try_clone() {
                report(&mut File::from(fd), &what.line());
            }
            return ExitCode::FAILURE;
        }
    };
    match setup.supervise(mode, tmpdir, control) {
        Ok(()) => ExitCode::SUCCESS,
        Err(()) => ExitCode::FAILURE,
    }
}

/// `probe-view` (the server's start-up check): enters the sandbox's view
/// of the file system and its network namespace, and exits with the
/// [`ViewProbe`] it found, or 1 with why on stderr when building either
/// failed.
fn probe_view(sandbox: Option<&SandboxConfig>) -> ExitCode {
    let Some(sandbox) = sandbox else { return ExitCode::from(EXIT_USAGE) };
    let entered = View::enter(sandbox).and_then(|view| {
        let probe = match &view {
            Some(view) if view.own_proc() => ViewProbe::OwnWithProc,
            Some(_) => ViewProbe::Own,
            None => ViewProbe::Shared,
        };
        enter_network(sandbox.network, view.is_some()).map(|_| probe)
    });
    match entered {
        Ok(probe) => probe.exit_code(),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{e}");
            ExitCode::FAILURE
        }
    }
}

/// Enters the network namespace `network` asks for (see the network
/// module), with the view entered or not: without the view's namespaces
/// (the kernel refused them) `off` goes on with the seccomp filter and
/// Landlock alone, and the allowlist cannot be had (its only way out would
/// be the host's network).
fn enter_network(network: Network, view: bool) -> Result<Option<TcpListener>, Error> {
    match (network, view) {
        (Network::On, _) | (Network::Off, false) => Ok(None),
        (Network::Proxy, false) => Err(Error::ProxyWithoutNamespaces),
        (network, true) => network.enter(),
    }
}

fn report(control: &mut File, line: &str) {
    let _ = control.write_all(line.as_bytes());
}

/// Makes `signals` write a byte to a socket instead of their default
/// action (the handler only writes: async-signal-safe), and returns the
/// socket's end to read them from, non-blocking.
fn watch(signals: &[i32]) -> std::io::Result<UnixStream> {
    let (read, write) = UnixStream::pair()?;
    for &signal in signals {
        signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
    }
    read.set_nonblocking(true)?;
    Ok(read)
}

/// Reads all that waits on a [`watch`] socket: whether a signal came.
fn caught(signals: &UnixStream) -> bool {
    let mut any = false;
    let mut buf = [0u8; 64];
    while let Ok(n) = (&*signals).read(&mut buf) {
        if n == 0 {
            break;
        }
        any = true;
    }
    any
}

/// Kills bash's process group and bash (not yet reaped, so its pid and
/// group id are still its own).
fn kill_bash(pid: Pid) {
    let _ = kill_process_group(pid, Signal::KILL);
    let _ = kill_process(pid, Signal::KILL);
}

/// What a supervisor sets up before it starts bash. A supervisor started
/// ahead of its command (`ready` mode) does it all before the command
/// comes, so none of it is on the command's path.
///
/// The supervisor has one thread (bar the one that starts bash in the
/// sandbox, made ahead and gone once bash is started): it waits for
/// everything at once with `poll`, and a process without other live
/// threads ends several times faster.
struct Setup {
    /// SIGTERM, SIGINT, SIGHUP: kill the tree.
    stop: UnixStream,
    /// SIGCHLD: bash may have ended.
    child_ended: UnixStream,
    bash: OsString,
    /// The thread that starts bash, already confined.
    spawner: Spawner,
    /// The sandbox's own view of the file system, entered (see the mounts
    /// module); `None` without the sandbox or where the kernel refuses it.
    view: Option<View>,
    /// How bash reaches the network.
    network: Network,
    /// With [`Network::Proxy`], the socket the server's proxy accepts on,
    /// made in our network namespace, until it is handed over.
    proxy: Option<TcpListener>,
}

impl Setup {
    /// Marks us a child subreaper, catches SIGTERM/SIGINT/SIGHUP (so that
    /// one coming while bash starts does not end us and orphan bash to
    /// init) and SIGCHLD, finds bash, creates the sandbox's ruleset and
    /// enters its view of the file system (while we have one thread).
    fn new(sandbox: Option<&SandboxConfig>, keep: Keep, ready: bool) -> Result<Self, Failure> {
        use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
        set_child_subreaper(Some(getpid())).map_err(|_| Failure::Subreaper)?;
        // A session of our own: bash and all it starts have no controlling
        // terminal (see the confine module).
        rustix::process::setsid().map_err(|_| Failure::Session)?;
        let stop = watch(&[SIGTERM, SIGINT, SIGHUP]).map_err(|_| Failure::Signals)?;
        let child_ended = watch(&[SIGCHLD]).map_err(|_| Failure::Signals)?;
        let filter = Filter::new(sandbox).map_err(|_| Failure::Confine)?;
        let view = match sandbox {
            Some(config) => {
                let view = View::enter(config).map_err(|_| Failure::Sandbox)?;
                // Fail closed: a layer start-up found is never silently
                // missing (the user's namespaces exhausted, say).
                let entered = view.as_ref().map(View::own_proc);
                if !config.view.is_none_or(|required| required.is_met_by(entered)) {
                    return Err(Failure::Sandbox);
                }
                view
            }
            None => None,
        };
        let network = sandbox.map_or(Network::On, |config| config.network);
        let proxy = enter_network(network, view.is_some()).map_err(|_| Failure::Sandbox)?;
        if let (Some(view), Some(tmpdir)) = (&view, std::env::var_os("TMPDIR")) {
            view.hide_other_tmpdirs(Path::new(&tmpdir)).map_err(|_| Failure::Sandbox)?;
        }
        let prepared =
            sandbox.map(SandboxConfig::prepare).transpose().map_err(|_| Failure::Sandbox)?;
        // Started ahead, the order's `TMPDIR` is the one we were given; else
        // it is among the sandbox's writable paths already.
        let tmpdir = std::env::var_os("TMPDIR").filter(|_| ready).map(PathBuf::from);
        // Last: a user namespace needs a process of one thread.
        let spawner = Spawner::start(filter, keep, prepared, tmpdir);
        Ok(Self { stop, child_ended, bash: find_bash(), spawner, view, network, proxy })
    }

    /// Hands the proxy's socket over `channel` (see [`hand_proxy`]). Both
    /// or neither must be there: an order without the channel (or with one
    /// we have nothing for) is not the server's.
    fn hand_proxy(&mut self, channel: Option<OwnedFd>) -> Result<(), Failure> {
        match (self.proxy.take(), channel) {
            (Some(listener), Some(channel)) => hand_proxy(listener, &channel),
            (None, None) => Ok(()),
            _ => Err(Failure::Order),
        }
    }

    /// `ready` mode: waits for the [`Order`]. `Ok(None)`: the channel
    /// ended, or a stop signal came, first (nothing was started).
    fn wait_for_order(
        &self,
        control: &OwnedFd,
    ) -> Result<Option<(Order, Option<OwnedFd>)>, Failure> {
        loop {
            let mut fds =
                [PollFd::new(control, PollFlags::IN), PollFd::new(&self.stop, PollFlags::IN)];
            match poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => return Err(Failure::Order),
            }
            if caught(&self.stop) {
                return Ok(None);
            }
            if !fds[0].revents().is_empty() {
                return receive_order(control);
            }
        }
    }

    /// Runs bash in `mode` (`Run` or `Session`) until it and all it
    /// started are gone; `tmpdir` replaces the `TMPDIR` of our own
    /// environment and is writable in the sandbox.
    fn supervise(self, mode: Mode, tmpdir: Option<PathBuf>, control: OwnedFd) -> Result<(), ()> {
        let mut control_w = File::from(control.try_clone().map_err(|_| ())?);
        let mut bash = std::process::Command::new(&self.bash);
        bash.arg0("bash").arg("--noprofile").arg("--norc");
        match &mode {
            Mode::Run(command) => bash.arg("-c").arg(command).stdin(Stdio::null()),
            Mode::Session => bash.stdin(Stdio::piped()),
            Mode::Ready | Mode::ProbeView => return Err(()),
        };
        bash.env_clear();
        for key in ENV_KEYS {
            if let Some(value) = std::env::var_os(key) {
                bash.env(key, value);
            }
        }
        if let Some(tmpdir) = &tmpdir {
            bash.env("TMPDIR", tmpdir);
        }
        if self.network == Network::Proxy {
            bash.envs(PROXY_ENV);
        }
        bash.stdout(Stdio::inherit()).stderr(Stdio::inherit()).process_group(0);

        // The order's `TMPDIR` is the one the spawner's domain lets bash
        // write (the server gives a supervisor started ahead the same in its
        // environment and its order): anything else is not the server's.
        if self.spawner.tmpdir.as_deref() != tmpdir.as_deref() {
            report(&mut control_w, &Failure::Order.line());
            return Err(());
        }
        let pinned = match self.enter_view() {
            Ok(pinned) => pinned,
            Err(what) => {
                report(&mut control_w, &what.line());
                return Err(());
            }
        };
        if caught(&self.stop) {
            // Asked to stop before bash started: the command was killed at
            // its start, and says so like any other killed command.
            report(&mut control_w, &Ended::Signal(Signal::KILL.as_raw()).line());
            return Ok(());
        }
        let mut child = match self.spawner.spawn(bash) {
            Ok(child) => child,
            Err(what) => {
                report(&mut control_w, &what.line());
                return Err(());
            }
        };
        let Some(pid) = Pid::from_raw(child.id() as i32) else {
            report(&mut control_w, &Failure::Spawn.line());
            return Err(());
        };
        let input = child.stdin.take().map(OwnedFd::from);
        let Ok(status) = wait_for_bash(pid, &control, input, &self.stop, &self.child_ended) else {
            report(&mut control_w, &Failure::Wait.line());
            break_all(pid);
            return Err(());
        };
        let line = if let Some(code) = status.exit_status() {
            Ended::Exit(code).line()
        } else if let Some(sig) = status.terminating_signal() {
            Ended::Signal(sig).line()
        } else {
            Failure::Status.line()
        };
        break_all(pid);
        drop(child);
        if let Some(view) = &self.view {
            report(&mut control_w, &repo_lines(&view.created_since(&pinned)));
        }
        report(&mut control_w, &line);
        Ok(())
    }
}

/// The [`REPO_LINE`]s for `created` (paths relative to the root), at most
/// [`MAX_REPOS_REPORTED`]; a path with a newline or over
/// [`MAX_REPO_LINE`] is left out.
fn repo_lines(created: &[PathBuf]) -> String {
    use std::os::unix::ffi::OsStrExt;
    created
        .iter()
        .map(|path| path.as_os_str().as_bytes())
        .filter(|path| !path.contains(&b'\n') && REPO_LINE.len() + path.len() < MAX_REPO_LINE)
        .take(MAX_REPOS_REPORTED)
        .map(|path| format!("{REPO_LINE}{}\n", String::from_utf8_lossy(path)))
        .collect()
}

impl Setup {
    /// Where the view was entered (the other `TMPDIR`s were hidden ahead,
    /// around the one the order names): pins the root's git repositories
    /// (returned), and moves the working directory onto the view's mounts.
    fn enter_view(&self) -> Result<Vec<PathBuf>, Failure> {
        let Some(view) = &self.view else { return Ok(Vec::new()) };
        // At the order, not ahead: the repositories present when the
        // command starts.
        let pinned = view.pin_git().map_err(|_| Failure::Sandbox)?;
        view.enter_cwd().map_err(|_| Failure::Cwd)?;
        Ok(pinned)
    }
}

/// Waits for bash to end without reaping it: while it is a zombie its pid
/// (and so its process group id) cannot be reused. Meanwhile the end of
/// the control channel (the server asks for the stop, or died) and
/// SIGTERM/SIGINT/SIGHUP kill bash's group, and in session mode what comes
/// on the channel goes on to bash's `input`. When bash does not read its
/// input, the channel is no longer read (what the server sends waits in
/// it), but its end is still seen.
fn wait_for_bash(
    pid: Pid,
    control: &OwnedFd,
    mut input: Option<OwnedFd>,
    stop: &UnixStream,
    child_ended: &UnixStream,
) -> Result<rustix::process::WaitIdStatus, ()> {
    if let Some(fd) = &input {
        rustix::io::ioctl_fionbio(fd, true).map_err(|_| ())?;
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    let mut channel_open = true;
    loop {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        match waitid(WaitId::Pid(pid), options) {
            Ok(Some(status)) => return Ok(status),
            Ok(None) | Err(Errno::INTR) => {}
            Err(_) => return Err(()),
        }
        let mut fds = Vec::with_capacity(4);
        fds.push(PollFd::new(child_ended, PollFlags::IN));
        fds.push(PollFd::new(stop, PollFlags::IN));
        if channel_open {
            let events = if pending.is_empty() { PollFlags::IN } else { PollFlags::empty() };
            fds.push(PollFd::new(control, events | PollFlags::RDHUP));
        }
        if let (Some(fd), false) = (&input, pending.is_empty()) {
            fds.push(PollFd::new(fd, PollFlags::OUT));
        }
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return Err(()),
        }
        let channel_event = channel_open && !fds[2].revents().is_empty();
        drop(fds);
        caught(child_ended);
        if caught(stop) {
            kill_bash(pid);
        }
        if channel_event {
            if pending.is_empty() {
                match rustix::net::recv(control, &mut buf, RecvFlags::DONTWAIT) {
                    Ok((0, _)) => channel_open = false,
                    Ok((n, _)) if input.is_some() => pending.extend_from_slice(&buf[..n]),
                    Ok(_) | Err(Errno::AGAIN | Errno::INTR) => {}
                    Err(_) => channel_open = false,
                }
            } else {
                // Only its end is watched while input waits for bash.
                channel_open = false;
            }
            if !channel_open {
                kill_bash(pid);
            }
        }
        if let (Some(fd), false) = (&input, pending.is_empty()) {
            match rustix::io::write(fd, &pending) {
                Ok(n) => drop(pending.drain(..n)),
                Err(Errno::AGAIN | Errno::INTR) => {}
                // bash closed its input: what comes next is dropped.
                Err(_) => {
                    input = None;
                    pending.clear();
                }
            }
        }
    }
}

/// `bash` as the command's `PATH` finds it (in the first directory holding
/// an executable `bash`), or plain `bash` when a relative directory comes
/// first or none holds one (then the spawn searches `PATH` itself, as it
/// always did). An absolute program lets std start it with `posix_spawn`
/// (a vfork) instead of a fork of this large process followed by one failed
/// `execve` per `PATH` directory before bash's.
fn find_bash() -> OsString {
    use std::os::unix::ffi::OsStrExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in path.as_bytes().split(|&b| b == b':') {
        if !dir.starts_with(b"/") {
            break;
        }
        let bash = std::path::Path::new(OsStr::from_bytes(dir)).join("bash");
        if rustix::fs::access(&bash, rustix::fs::Access::EXEC_OK).is_ok()
            && bash.metadata().is_ok_and(|m| m.is_file())
        {
            return bash.into_os_string();
        }
    }
    "bash".into()
}

/// The thread that starts bash: made ahead of the command, it confines
/// itself (an IPC namespace, the capabilities, `no_new_privs`, the seccomp
/// filter: see the confine module) and enters a fresh Landlock domain (with
/// the expected `TMPDIR` writable in it), then waits; handed bash's
/// command, it starts it and ends. So no thread of the supervisor but this
/// one is ever confined or in the command's domain (see the sandbox
/// module), and none of it — the filter's load and JIT compile, 40
/// capability drops, the thread itself — is on the command's path.
struct Spawner {
    /// bash's command, to start.
    command: std::sync::mpsc::Sender<std::process::Command>,
    /// What became of it (or of confining the thread).
    started: std::sync::mpsc::Receiver<Result<std::process::Child, Failure>>,
    thread: std::thread::JoinHandle<()>,
    /// The `TMPDIR` the thread's domain lets bash write.
    tmpdir: Option<PathBuf>,
}

impl Spawner {
    fn start(
        filter: Filter,
        keep: Keep,
        prepared: Option<Prepared>,
        tmpdir: Option<PathBuf>,
    ) -> Self {
        let (command, commands) = std::sync::mpsc::channel::<std::process::Command>();
        let (report, started) = std::sync::mpsc::channel();
        let writable = tmpdir.clone();
        let thread = std::thread::spawn(move || {
            let confined =
                filter.confine_this_thread(keep).map_err(|_| Failure::Confine).and_then(|()| {
                    match prepared {
                        Some(sandbox) => sandbox
                            .restrict_this_thread(writable.as_deref())
                            .map(drop)
                            .map_err(|_| Failure::Sandbox),
                        None => Ok(()),
                    }
                });
            // No command (the channel closed): nothing to start.
            if let Ok(mut bash) = commands.recv() {
                let _ =
                    report.send(confined.and_then(|()| bash.spawn().map_err(|_| Failure::Spawn)));
            }
        });
        Self { command, started, thread, tmpdir }
    }

    /// Starts `bash` in the thread made ahead.
    fn spawn(self, bash: std::process::Command) -> Result<std::process::Child, Failure> {
        let Self { command, started, thread, .. } = self;
        let child = if command.send(bash).is_ok() {
            started.recv().unwrap_or(Err(Failure::Spawn))
        } else {
            Err(Failure::Spawn)
        };
        drop(command);
        let _ = thread.join();
        child
    }
}

/// Kills bash's group (bash is still unreaped), then SIGKILLs and reaps
/// every child of ours until none is left.
///
/// The loop ends only when `wait` says no child is left, alive or zombie.
/// Ended children are reaped first, so a command that left nothing behind
/// costs no `/proc` read at all. Living ones are found from our threads'
/// `children` files (see the children module), and when that listing
/// finds none to kill (it can skip an entry when the list changes under
/// it), from the exhaustive `/proc` scan, before we wait for one to end.
fn break_all(pid: Pid) {
    kill_bash(pid);
    loop {
        // `wait` is waitpid(-1): any child. (rustix's `waitpid(None, …)` is
        // waitpid(0), children of our own process group only — bash and
        // everything it starts are in other groups.)
        match wait(WaitOptions::NOHANG) {
            // No child left, alive or zombie.
            Err(Errno::CHILD) => break,
            // Children left, none ended yet.
            Ok(None) => {
                let found = match children::listed() {
                    Some(found) if !found.is_empty() => found,
                    _ => children::scanned(),
                };
                kill_all(&found);
                if let Err(Errno::CHILD) = wait(WaitOptions::empty()) {
                    break;
                }
            }
            // A reaped child, EINTR: again.
            Ok(Some(_)) | Err(_) => {}
        }
    }
}

/// SIGKILLs each of our children in `pids`. A child cannot be reaped by
/// anyone but us, so its pid cannot be reused between the listing and the
/// kill.
fn kill_all(pids: &[i32]) {
    for pid in pids.iter().filter_map(|&raw| Pid::from_raw(raw)) {
        let _ = kill_process(pid, Signal::KILL);
    }
}
