//! The wire between the server and a supervisor: the command line that
//! selects the protocol version, the order a supervisor started ahead of its
//! command receives, and the status line it answers with. Both sides use
//! this module and nothing else of each other.
//!
//! - Command line: `PROGRAM [PREFIX…] --serverfs-exec=VERSION [CAPS…]
//!   [SANDBOX…] MODE`, where `MODE` is a [`Mode`]: `run COMMAND`,
//!   `session`, `ready` or `probe-view`.
//! - Exit code: 0 when a status line was sent, [`EXIT_USAGE`] on a usage
//!   error (another version's arguments included), 1 otherwise; the
//!   `probe-view` mode answers with its exit code alone ([`ViewProbe`]).
//! - Control channel (the supervisor's fd 0, a Unix socket pair): in
//!   `session` mode the shell's input; in `ready` mode first one [`Order`];
//!   its end (the server shut its writing down, or died) asks for the stop.
//! - Status line (the last thing a supervisor writes on the channel, just
//!   before it exits): `exit N`, `signal N` or `error WHAT`, at most
//!   [`MAX_STATUS_LINE`] bytes; before it, one [`REPO_LINE`] per git
//!   repository the command created below the root (at most
//!   [`MAX_REPOS_REPORTED`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The first argument of every supervisor command line: the version of this
/// crate, so that a supervisor program left over from another release (it
/// can be installed as a file of its own, beside the server) refuses to run
/// instead of misreading the arguments.
pub const PROTOCOL: &str = concat!("--serverfs-exec=", env!("CARGO_PKG_VERSION"));

/// The environment variables a command may see; everything else is
/// cleared.
pub const ENV_KEYS: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// The longest command (Linux refuses a single argument over 128 KiB).
pub const MAX_COMMAND_BYTES: usize = 100_000;

/// The largest order body a ready supervisor reads: the longest command
/// with a private directory's path.
const MAX_ORDER_BYTES: usize = MAX_COMMAND_BYTES + 8192;

/// A command handed to a supervisor started ahead of it (`ready` mode), so
/// that starting the supervisor is not on the command's path.
///
/// On the control channel: a little-endian `u32` length, then the kind
/// (`r`: run `command`; `s`: a shell session, no command), the private
/// `TMPDIR`, a NUL, and the command (which holds no NUL). With the first
/// byte ride, as `SCM_RIGHTS` file descriptors, the command's directory
/// and, when commands reach the network through the server's proxy, one end
/// of a Unix socket on which the supervisor hands back the proxy's
/// listening socket (see the network module). Only the server holds the
/// other end of the channel.
#[derive(Debug, PartialEq, Eq)]
pub struct Order {
    /// The text for `bash -c`; `None`: a shell session (bash reads the
    /// control channel).
    pub command: Option<OsString>,
    /// The command's private `TMPDIR` (absolute).
    pub tmpdir: PathBuf,
}

impl Order {
    /// The bytes of an order for `command` (`None`: a session) with
    /// `tmpdir`.
    pub fn encode(tmpdir: &Path, command: Option<&str>) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let kind = if command.is_some() { b'r' } else { b's' };
        let command = command.unwrap_or_default();
        let len = 1 + tmpdir.as_os_str().len() + 1 + command.len();
        let mut bytes = Vec::with_capacity(4 + len);
        bytes.extend_from_slice(&(len as u32).to_le_bytes());
        bytes.push(kind);
        bytes.extend_from_slice(tmpdir.as_os_str().as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(command.as_bytes());
        bytes
    }

    /// The body's length from the 4-byte header; `None` past the limit.
    pub fn body_len(header: [u8; 4]) -> Option<usize> {
        let len = u32::from_le_bytes(header) as usize;
        (len <= MAX_ORDER_BYTES).then_some(len)
    }

    /// The order in `body` (what follows the header); `None` when it is
    /// not one (an unknown kind, no NUL, a relative `TMPDIR`, a NUL in the
    /// command, a session with a command).
    pub fn decode(mut body: Vec<u8>) -> Option<Self> {
        use std::os::unix::ffi::OsStringExt;
        let kind = (!body.is_empty()).then(|| body.remove(0))?;
        let nul = body.iter().position(|&b| b == 0)?;
        let command = body.split_off(nul + 1);
        body.pop();
        if body.first() != Some(&b'/') || command.contains(&0) {
            return None;
        }
        let command = match kind {
            b'r' => Some(OsString::from_vec(command)),
            b's' if command.is_empty() => None,
            _ => return None,
        };
        Some(Self { command, tmpdir: PathBuf::from(OsString::from_vec(body)) })
    }
}

/// The start of the name of the directory that holds a server's private
/// `TMPDIR`s (`serverfs-cmd-<server pid>-<random>`): the server makes it, a
/// supervisor's view hides the others in it.
pub const TMPDIR_PARENT_PREFIX: &str = "serverfs-cmd-";

/// The exit code of a supervisor whose command line it cannot read (made
/// for another version, or malformed).
pub const EXIT_USAGE: u8 = 2;

/// What a supervisor is started for: the last words of its command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `run COMMAND`: `bash --noprofile --norc -c COMMAND`, stdin
    /// `/dev/null`.
    Run(OsString),
    /// `session`: `bash --noprofile --norc` reading the control channel's
    /// bytes.
    Session,
    /// `ready`: started ahead of its command, it waits for an [`Order`].
    Ready,
    /// `probe-view`: the server's start-up check of the sandbox's view of
    /// the file system; answers with a [`ViewProbe`] exit code.
    ProbeView,
}

impl Mode {
    /// The words on the command line.
    pub fn to_args(&self) -> Vec<OsString> {
        match self {
            Self::Run(command) => vec!["run".into(), command.clone()],
            Self::Session => vec!["session".into()],
            Self::Ready => vec!["ready".into()],
            Self::ProbeView => vec!["probe-view".into()],
        }
    }

    /// The mode `args` (the rest of the command line) name; `None` when
    /// they name none, or say more.
    pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Option<Self> {
        let mut args = args.into_iter();
        let mode = match args.next()?.to_str()? {
            "run" => Self::Run(args.next()?),
            "session" => Self::Session,
            "ready" => Self::Ready,
            "probe-view" => Self::ProbeView,
            _ => return None,
        };
        args.next().is_none().then_some(mode)
    }
}

/// What commands' view of the file system is on this kernel: the answer of
/// a supervisor started in [`Mode::ProbeView`], as its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewProbe {
    /// Their own, with a `/proc` that shows only their own processes
    /// (exit 0).
    OwnWithProc,
    /// Their own, with the host's `/proc` (read-only): not root (exit 4).
    Own,
    /// The server's: the kernel refuses the namespaces (exit 3).
    Shared,
}

impl ViewProbe {
    const CODES: [(Self, u8); 3] = [(Self::OwnWithProc, 0), (Self::Own, 4), (Self::Shared, 3)];
    const WORDS: [(Self, &'static str); 3] =
        [(Self::OwnWithProc, "own-proc"), (Self::Own, "own"), (Self::Shared, "shared")];

    /// Its word on a supervisor's command line (`--view WORD`: what the
    /// command must get).
    pub fn word(self) -> &'static str {
        Self::WORDS.iter().find(|(probe, _)| *probe == self).map_or("shared", |&(_, word)| word)
    }

    /// The answer a word names.
    pub fn from_word(word: &str) -> Option<Self> {
        Self::WORDS.iter().find(|&&(_, w)| w == word).map(|&(probe, _)| probe)
    }

    /// Whether a view that was entered (or not: `None`) gives at least
    /// this: own-proc needs its own `/proc`, own needs a view.
    pub fn is_met_by(self, entered: Option<bool>) -> bool {
        match self {
            Self::OwnWithProc => entered == Some(true),
            Self::Own => entered.is_some(),
            Self::Shared => true,
        }
    }

    /// The supervisor's exit code for it.
    pub fn exit_code(self) -> ExitCode {
        Self::CODES
            .iter()
            .find(|(probe, _)| *probe == self)
            .map_or(ExitCode::FAILURE, |&(_, code)| code.into())
    }

    /// The answer an exit code gives; `None` for any other (the probe
    /// failed: 1 with why on its stderr, or it did not run).
    pub fn from_exit_code(code: Option<i32>) -> Option<Self> {
        Self::CODES.iter().find(|&&(_, c)| code == Some(i32::from(c))).map(|&(probe, _)| probe)
    }
}

/// The longest status line; anything longer is not one.
pub const MAX_STATUS_LINE: usize = 256;

/// The start of a line a supervisor sends before its status line for each
/// git repository its command created below the root: `repo <its git
/// directory, relative to the root>`. Such a repository's hooks and config
/// were the command's to write before the next command pinned them.
pub const REPO_LINE: &str = "repo ";

/// The most repository lines a supervisor sends.
pub const MAX_REPOS_REPORTED: usize = 16;

/// The longest repository line (a longer path is not reported).
pub const MAX_REPO_LINE: usize = 1024;

/// The end of `bash`: an exit code or a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `exit N`.
    Exit(i32),
    /// Killed by signal N.
    Signal(i32),
}

impl Ended {
    /// The status line for this end.
    pub fn line(self) -> String {
        match self {
            Self::Exit(code) => format!("exit {code}\n"),
            Self::Signal(n) => format!("signal {n}\n"),
        }
    }

    /// Parses a status line (`exit N` / `signal N`); anything else (an
    /// `error …` line, nothing at all) is `None`.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let line = std::str::from_utf8(line).ok()?.trim_end();
        if let Some(n) = line.strip_prefix("exit ") {
            return n.parse().ok().map(Self::Exit);
        }
        if let Some(n) = line.strip_prefix("signal ") {
            return n.parse().ok().map(Self::Signal);
        }
        None
    }

    /// `exit N` or the signal's name, for audit lines.
    pub fn status(self) -> String {
        match self {
            Self::Exit(code) => format!("exit {code}"),
            Self::Signal(n) => signal_name(n),
        }
    }

    /// The exit code, when it exited.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            Self::Exit(code) => Some(code),
            Self::Signal(_) => None,
        }
    }

    /// The signal's name, when a signal ended it.
    pub fn signal_name(self) -> Option<String> {
        match self {
            Self::Exit(_) => None,
            Self::Signal(n) => Some(signal_name(n)),
        }
    }
}

/// What a supervisor could not do, sent as `error WHAT` (one word). The
/// server logs the word; a line that is not one of these is logged as
/// `unknown`, so a forged line never reaches the log verbatim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Could not become a child subreaper.
    Subreaper,
    /// Could not catch its signals.
    Signals,
    /// Could not start a session of its own (no controlling terminal).
    Session,
    /// Could not build or apply the seccomp filter, or drop capabilities.
    Confine,
    /// Could not create or enter the sandbox.
    Sandbox,
    /// A malformed order, or a channel error while reading it.
    Order,
    /// Could not enter the order's directory.
    Cwd,
    /// Could not start bash.
    Spawn,
    /// Could not wait for bash.
    Wait,
    /// bash ended in a way that is neither an exit nor a signal.
    Status,
}

impl Failure {
    const ALL: [Self; 10] = [
        Self::Subreaper,
        Self::Signals,
        Self::Session,
        Self::Confine,
        Self::Sandbox,
        Self::Order,
        Self::Cwd,
        Self::Spawn,
        Self::Wait,
        Self::Status,
    ];

    /// The word on the wire and in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Subreaper => "subreaper",
            Self::Signals => "signals",
            Self::Session => "session",
            Self::Confine => "confine",
            Self::Sandbox => "sandbox",
            Self::Order => "order",
            Self::Cwd => "cwd",
            Self::Spawn => "spawn",
            Self::Wait => "wait",
            Self::Status => "status",
        }
    }

    /// The status line for this failure.
    pub fn line(self) -> String {
        format!("error {}\n", self.as_str())
    }

    /// The failure an `error WHAT` line names; `None` for anything else.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let word = std::str::from_utf8(line).ok()?.trim_end().strip_prefix("error ")?;
        Self::ALL.into_iter().find(|f| f.as_str() == word)
    }
}

/// `SIGKILL` for 9; `SIG<n>` for a number without a name here.
pub fn signal_name(n: i32) -> String {
    let name = match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        _ => return format!("SIG{n}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_round_trip_and_nothing_else_parses() {
        for ended in [Ended::Exit(7), Ended::Exit(-1), Ended::Signal(9)] {
            assert_eq!(Ended::parse(ended.line().as_bytes()), Some(ended));
        }
        assert_eq!(Ended::parse(b"error spawn\n"), None);
        assert_eq!(Ended::parse(b""), None);
        for failure in Failure::ALL {
            assert_eq!(Failure::parse(failure.line().as_bytes()), Some(failure));
            assert_eq!(Ended::parse(failure.line().as_bytes()), None);
        }
        assert_eq!(Failure::parse(b"error \x1b[31mforged\n"), None);
        assert_eq!(Failure::parse(b"exit 0\n"), None);
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(64), "SIG64");
    }

    #[test]
    fn orders_round_trip_and_malformed_ones_are_refused() {
        for command in [Some("echo hi"), Some(""), None] {
            let bytes = Order::encode(Path::new("/tmp/serverfs-cmd-1"), command);
            let len = Order::body_len(bytes[..4].try_into().unwrap()).unwrap();
            assert_eq!(len, bytes.len() - 4);
            assert_eq!(
                Order::decode(bytes[4..].to_vec()),
                Some(Order {
                    command: command.map(Into::into),
                    tmpdir: "/tmp/serverfs-cmd-1".into()
                })
            );
        }
        assert_eq!(Order::body_len((MAX_ORDER_BYTES as u32 + 1).to_le_bytes()), None);
        assert_eq!(Order::decode(b"rrelative\0echo".to_vec()), None);
        assert_eq!(Order::decode(b"r/tmp/x\0echo\0hi".to_vec()), None);
        assert_eq!(Order::decode(b"r/tmp/x".to_vec()), None);
        assert_eq!(Order::decode(b"s/tmp/x\0echo".to_vec()), None);
        assert_eq!(Order::decode(b"x/tmp/x\0echo".to_vec()), None);
        assert_eq!(Order::decode(Vec::new()), None);
    }

    #[test]
    fn modes_and_probe_answers_round_trip() {
        for mode in [Mode::Run("echo hi".into()), Mode::Session, Mode::Ready, Mode::ProbeView] {
            assert_eq!(Mode::from_args(mode.to_args()), Some(mode));
        }
        assert_eq!(Mode::from_args(["run".into()]), None);
        assert_eq!(Mode::from_args(["session".into(), "x".into()]), None);
        assert_eq!(Mode::from_args(["walk".into()]), None);
        for (probe, code) in ViewProbe::CODES {
            assert_eq!(ViewProbe::from_exit_code(Some(code.into())), Some(probe));
            assert_eq!(probe.exit_code(), ExitCode::from(code));
        }
        assert_eq!(ViewProbe::from_exit_code(Some(1)), None);
        for (probe, word) in ViewProbe::WORDS {
            assert_eq!(ViewProbe::from_word(word), Some(probe));
            assert_eq!(probe.word(), word);
        }
        assert!(ViewProbe::OwnWithProc.is_met_by(Some(true)));
        assert!(!ViewProbe::OwnWithProc.is_met_by(Some(false)));
        assert!(ViewProbe::Own.is_met_by(Some(false)) && !ViewProbe::Own.is_met_by(None));
        assert!(ViewProbe::Shared.is_met_by(None));
        assert_eq!(ViewProbe::from_exit_code(None), None);
    }
}
