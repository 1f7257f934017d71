//! One driver for a supervised process, the same for a one-shot `bash`
//! command and a shell session: it waits for the supervisor to exit while
//! the command's output drains, stops it when asked, and ends it.
//!
//! Guarantees:
//!
//! - A supervisor is never killed before it could kill its tree: the stop
//!   is the end of its control channel (it kills the tree and exits by
//!   itself); only after [`STOP_GRACE`] does it get SIGTERM (which it
//!   handles the same way), and only after another, SIGKILL.
//! - When [`drive`] returns, the supervisor has exited and been reaped, the
//!   orphans a dead supervisor left have been swept (see `launch`), the
//!   output has drained or been given up on ([`DRAIN_GRACE`]), and the
//!   command's `TMPDIR` is gone.
//! - The status line is believed only from a supervisor that exited
//!   normally (exit code 0): it comes over a socket a command could get
//!   hold of when it runs unsandboxed as the server's user, so a command
//!   that forges a line and kills its supervisor gets no believed end. Any
//!   other end is logged at WARN with its reason, never the line's text.

use std::future::Future;
use std::os::unix::net::UnixStream;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use crate::launch::{Spawned, reaped, sweep_orphans};
use serverfs_supervisor::protocol::{
    Ended, Failure, MAX_REPO_LINE, MAX_REPOS_REPORTED, MAX_STATUS_LINE, REPO_LINE, signal_name,
};

/// How long a supervisor gets to kill its tree and exit after its control
/// channel closed, before SIGTERM; and again after SIGTERM, before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// After the supervisor exited (every descendant is dead), how long the
/// output pipes may stay open (only a non-descendant holding them could do
/// that) before collection stops.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// A deadline that never comes.
pub(crate) const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// How a supervised process ended.
pub(crate) struct Ending {
    /// bash's end, when the supervisor's word for it is believed.
    pub(crate) ended: Option<Ended>,
    /// Without an end: why the supervisor did not start the command, when
    /// its line said it could not confine it (`error sandbox`, `error
    /// confine`) or enter its directory (`error cwd`).
    pub(crate) not_started: Option<Failure>,
    /// The output drained to its end (no pipe was held open past the
    /// grace).
    pub(crate) drained: bool,
    /// What the proxy refused the command (on the network by allowlist),
    /// one line each.
    pub(crate) network: Vec<String>,
    /// The git repositories the command created below the root (their git
    /// directories, relative to it).
    pub(crate) repos: Vec<String>,
}

/// Drives `spawned` to its end while `output` (reading the command's
/// pipes) runs; firing `stop` asks for the end (see the module docs).
pub(crate) async fn drive(
    spawned: Spawned,
    stop: CancellationToken,
    output: impl Future<Output = ()>,
) -> Ending {
    let Spawned { mut child, control, tmp, id: _, net } = spawned;
    let supervisor_pid = child.id();
    tokio::pin!(output);
    let mut output_done = false;
    let mut stopping = false;
    let escalate = tokio::time::sleep(FAR);
    tokio::pin!(escalate);
    let mut escalation = 0u8;
    let exit = loop {
        tokio::select! {
            // The status line is read once the supervisor has exited (it
            // is written just before): the channel is not watched.
            r = child.wait() => break r.ok(),
            () = &mut output, if !output_done => output_done = true,
            () = stop.cancelled(), if !stopping => {
                // Shutting our writing down is the stop: the supervisor
                // reads end of file and kills the tree.
                let _ = control.shutdown(std::net::Shutdown::Write);
                stopping = true;
                escalate.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
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
    };
    reaped(supervisor_pid);
    // Whatever the supervisor said: if it died before its tree (killed
    // from outside), what is left was re-parented to us (when we adopt
    // orphans); a status line proves nothing.
    sweep_orphans(exit.is_some_and(|s| s.success())).await;
    let (repos, line) = buffered_report(&control);
    let ended = believed(&line, exit);
    // Believed as its status line is: from a supervisor that exited normally.
    let repos = if ended.is_some() { repos } else { Vec::new() };
    let not_started = Failure::parse(&line).filter(|f| {
        ended.is_none() && matches!(f, Failure::Sandbox | Failure::Confine | Failure::Cwd)
    });
    // Every descendant is dead: the pipes close now, unless a process
    // outside the tree holds them (fd passing); then stop collecting.
    let drained = output_done || tokio::time::timeout(DRAIN_GRACE, output).await.is_ok();
    tmp.remove().await;
    // The tree is gone: the proxy stops serving it (and says what it
    // refused).
    let network = net.map(|net| net.refusals()).unwrap_or_default();
    Ending { ended, not_started, drained, network, repos }
}

/// SIGTERM to a supervisor that has not been reaped yet (once reaped, its
/// pid is unknown to tokio, so a reused pid is never signalled).
fn terminate(child: &Child) {
    if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process(pid, Signal::TERM);
    }
}

/// The status line the exited supervisor left (see [`buffered_report`]),
/// believed only when the supervisor exited normally; any other end is
/// logged.
fn believed(line: &[u8], supervisor: Option<ExitStatus>) -> Option<Ended> {
    if supervisor.is_some_and(|s| s.success())
        && let Some(ended) = Ended::parse(line)
    {
        return Some(ended);
    }
    let reason = failure_reason(line, supervisor);
    tracing::warn!(event = "supervisor_failed", reason, "the command's supervisor failed");
    None
}

/// Why a supervisor gave no believable end, in words safe to log: the
/// failure its `error` line names (only the known words), or how it exited.
fn failure_reason(line: &[u8], supervisor: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    let said = Failure::parse(line).map(Failure::as_str);
    match (said, supervisor) {
        (_, None) => "its exit could not be waited for".to_owned(),
        (Some(word), Some(_)) => word.to_owned(),
        (None, Some(s)) => match (s.code(), s.signal()) {
            (Some(0), _) => "no status line".to_owned(),
            (Some(2), _) => "usage (a supervisor program of another version?)".to_owned(),
            (Some(code), _) => format!("exit {code} without a status line"),
            (None, Some(signal)) => format!("killed by {}", signal_name(signal)),
            (None, None) => "ended without a status".to_owned(),
        },
    }
}

/// What an exited supervisor left in its non-blocking control channel:
/// its repository lines (the git directories its command created, relative
/// to the root) and then its status line, up to a newline, at most
/// [`MAX_STATUS_LINE`] bytes.
fn buffered_report(control: &UnixStream) -> (Vec<String>, Vec<u8>) {
    use std::io::Read;
    let max = MAX_STATUS_LINE + MAX_REPOS_REPORTED * MAX_REPO_LINE;
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while all.len() < max {
        let room = buf.len().min(max - all.len());
        match (&*control).read(&mut buf[..room]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The end, or nothing more buffered.
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
    let mut repos = Vec::new();
    let mut rest = all.as_slice();
    while repos.len() < MAX_REPOS_REPORTED {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else { break };
        let Some(path) = rest[..end].strip_prefix(REPO_LINE.as_bytes()) else { break };
        repos.push(String::from_utf8_lossy(path).into_owned());
        rest = &rest[end + 1..];
    }
    let mut line = rest[..rest.len().min(MAX_STATUS_LINE)].to_vec();
    complete(&mut line);
    (repos, line)
}

/// Cuts `line` after its newline (what follows is not the status line).
fn complete(line: &mut Vec<u8>) {
    if let Some(end) = line.iter().position(|&b| b == b'\n') {
        line.truncate(end + 1);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn the_buffered_status_line_is_what_the_supervisor_left() {
        use std::io::Write;
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        // Nothing written, the other end still open: nothing, at once.
        assert_eq!(buffered_report(&ours), (vec![], b"".to_vec()));
        theirs.write_all(b"repo a/.git\nrepo b c/.git\nexit 0\nsignal 9\n").unwrap();
        let repos = vec!["a/.git".to_owned(), "b c/.git".to_owned()];
        assert_eq!(buffered_report(&ours), (repos, b"exit 0\n".to_vec()));
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(b"exit").unwrap();
        drop(theirs);
        assert_eq!(buffered_report(&ours).1, b"exit");
        // A forged flood is cut at 256 bytes.
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(&[b'x'; 300]).unwrap();
        assert_eq!(buffered_report(&ours).1.len(), 256);
        // At most 16 repository lines; what follows is read as the status.
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(&b"repo x/.git\n".repeat(17)).unwrap();
        let (repos, line) = buffered_report(&ours);
        assert_eq!((repos.len(), line), (16, b"repo x/.git\n".to_vec()));
    }

    #[test]
    fn a_line_is_believed_only_from_a_supervisor_that_exited_normally() {
        use std::io::Write;
        let with_line = |line: &[u8]| {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            theirs.write_all(line).unwrap();
            ours
        };
        let ok = ExitStatus::from_raw(0);
        let failed = ExitStatus::from_raw(1 << 8);
        let killed = ExitStatus::from_raw(9);
        assert_eq!(
            believed(&buffered_report(&with_line(b"exit 3\n")).1, Some(ok)),
            Some(Ended::Exit(3))
        );
        assert_eq!(believed(&buffered_report(&with_line(b"exit 3\n")).1, Some(killed)), None);
        assert_eq!(believed(&buffered_report(&with_line(b"exit 3\n")).1, None), None);
        assert_eq!(believed(&buffered_report(&with_line(b"error spawn\n")).1, Some(failed)), None);
    }

    #[test]
    fn failure_reasons_name_the_known_word_or_the_exit_never_the_line() {
        let failed = ExitStatus::from_raw(1 << 8);
        assert_eq!(failure_reason(b"error sandbox\n", Some(failed)), "sandbox");
        assert_eq!(
            failure_reason(b"error \x1b[2Jforged\n", Some(failed)),
            "exit 1 without a status line"
        );
        assert_eq!(failure_reason(b"", Some(ExitStatus::from_raw(9))), "killed by SIGKILL");
        assert_eq!(failure_reason(b"", Some(ExitStatus::from_raw(0))), "no status line");
        assert_eq!(
            failure_reason(b"", Some(ExitStatus::from_raw(2 << 8))),
            "usage (a supervisor program of another version?)"
        );
        assert_eq!(failure_reason(b"exit 0\n", None), "its exit could not be waited for");
    }
}
