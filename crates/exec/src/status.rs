//! How a command ended, as the supervisor reports it on the control
//! channel, and when the server believes it.
//!
//! The status line comes over a socket a command could get hold of (when
//! it runs unsandboxed as the server's user), so it is believed only from
//! a supervisor that then exited normally (exit code 0): a command that
//! forges a line and kills its supervisor gets an `INTERNAL_ERROR`, and the
//! server sweeps its orphans either way.

/// The end of `bash`: an exit code or a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// `exit N`.
    Exit(i32),
    /// Killed by signal N.
    Signal(i32),
}

impl Ended {
    /// Parses the supervisor's status line (`exit N` / `signal N`);
    /// anything else (an `error …` line, nothing at all) is `None`.
    pub(crate) fn parse(line: &[u8]) -> Option<Self> {
        let line = std::str::from_utf8(line).ok()?.trim_end();
        if let Some(n) = line.strip_prefix("exit ") {
            return n.parse().ok().map(Self::Exit);
        }
        if let Some(n) = line.strip_prefix("signal ") {
            return n.parse().ok().map(Self::Signal);
        }
        None
    }

    pub(crate) fn exit_code(self) -> Option<i32> {
        match self {
            Self::Exit(code) => Some(code),
            Self::Signal(_) => None,
        }
    }

    pub(crate) fn signal_name(self) -> Option<String> {
        match self {
            Self::Exit(_) => None,
            Self::Signal(n) => Some(signal_name(n)),
        }
    }
}

/// The status line an exited supervisor left in its non-blocking control
/// channel: what is there, up to a newline, at most 256 bytes.
fn buffered_line(control: &std::os::unix::net::UnixStream) -> Vec<u8> {
    use std::io::Read;
    let mut line = Vec::new();
    let mut buf = [0u8; MAX_LINE];
    while !complete(&mut line) {
        match (&*control).read(&mut buf[..MAX_LINE - line.len()]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The end, or nothing more buffered.
            Ok(0) | Err(_) => break,
            Ok(n) => line.extend_from_slice(&buf[..n]),
        }
    }
    line
}

const MAX_LINE: usize = 256;

/// Whether `line` is a whole status line, or as long as one may be;
/// anything after its newline is dropped.
fn complete(line: &mut Vec<u8>) -> bool {
    if let Some(end) = line.iter().position(|&b| b == b'\n') {
        line.truncate(end + 1);
        return true;
    }
    line.len() >= MAX_LINE
}

/// The status line the exited supervisor left in `control`, believed only
/// when the supervisor itself exited normally (otherwise not even read).
pub(crate) fn believed(
    control: &std::os::unix::net::UnixStream,
    supervisor: Option<std::process::ExitStatus>,
) -> Option<Ended> {
    if supervisor.is_some_and(|s| s.success()) {
        Ended::parse(&buffered_line(control))
    } else {
        None
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
    fn parses_status_lines() {
        assert_eq!(Ended::parse(b"exit 7\n"), Some(Ended::Exit(7)));
        assert_eq!(Ended::parse(b"signal 9\n"), Some(Ended::Signal(9)));
        assert_eq!(Ended::parse(b"error spawn\n"), None);
        assert_eq!(Ended::parse(b""), None);
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(64), "SIG64");
    }

    #[test]
    fn the_buffered_status_line_is_what_the_supervisor_left() {
        use std::io::Write;
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        // Nothing written, the other end still open: nothing, at once.
        assert_eq!(buffered_line(&ours), b"");
        theirs.write_all(b"exit 0\nsignal 9\n").unwrap();
        assert_eq!(buffered_line(&ours), b"exit 0\n");
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(b"exit").unwrap();
        drop(theirs);
        assert_eq!(buffered_line(&ours), b"exit");
        // A forged flood is cut at 256 bytes.
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(&[b'x'; 300]).unwrap();
        assert_eq!(buffered_line(&ours).len(), 256);
    }
}
