//! How a command ended, as the supervisor reports it on the control
//! channel.

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
}
