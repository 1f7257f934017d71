//! When one call must stop: a wall-clock deadline and a cancel flag raised
//! by whoever runs the call (the client cancelled or went away).
//!
//! Guarantees: [`Deadline::check`] is cheap (one relaxed atomic load and one
//! monotonic clock read), so long loops call it per entry or per buffer
//! fill; [`DeadlineReader`] checks it before every read, so no single file
//! keeps a call running more than one buffer fill past its deadline or its
//! cancellation. Stopping is cooperative: the running code notices at its
//! next check and returns what it has, or [`ErrorCode::Timeout`].

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, FsError};

/// Why a call was told to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The wall-clock deadline passed.
    Expired,
    /// The cancel flag was raised.
    Cancelled,
}

/// The deadline and cancel flag of one call. Cheap to clone (the flag is
/// shared).
#[derive(Clone, Debug)]
pub struct Deadline {
    /// `None` when `now + timeout` does not fit an `Instant`.
    at: Option<Instant>,
    timeout: Duration,
    cancel: Arc<AtomicBool>,
}

impl Deadline {
    /// `timeout` from now; raising `cancel` stops the call at its next check.
    pub fn new(timeout: Duration, cancel: Arc<AtomicBool>) -> Self {
        Self { at: Instant::now().checked_add(timeout), timeout, cancel }
    }

    /// No deadline and a flag nobody raises (tests, one-shot tools).
    pub fn never() -> Self {
        Self::new(Duration::MAX, Arc::new(AtomicBool::new(false)))
    }

    /// The length of the budget, for messages.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the cancel flag is raised.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// `Err` once the flag is raised or the deadline passed.
    ///
    /// # Errors
    /// Why the call must stop.
    pub fn check(&self) -> Result<(), Stop> {
        if self.is_cancelled() {
            Err(Stop::Cancelled)
        } else if self.at.is_some_and(|at| Instant::now() >= at) {
            Err(Stop::Expired)
        } else {
            Ok(())
        }
    }

    /// [`Deadline::check`] as an I/O error that [`is_deadline_stop`]
    /// recognises, for code that stops inside I/O loops. Its kind is
    /// `Other`, never `Interrupted`, which `std` read loops would retry.
    ///
    /// # Errors
    /// The flag is raised or the deadline passed.
    pub fn check_io(&self) -> io::Result<()> {
        self.check().map_err(|_| io::Error::other(DeadlinePassed))
    }

    /// The error a call that could not finish in time reports: `TIMEOUT`
    /// naming `what` (a cancelled call's error is never seen by anyone).
    pub fn error(&self, what: &dyn std::fmt::Display) -> FsError {
        FsError::new(
            ErrorCode::Timeout,
            format!("{what} did not finish within the {} s call deadline.", self.timeout.as_secs()),
        )
    }
}

/// The error a [`DeadlineReader`] fails a read with; see [`is_deadline_stop`].
#[derive(Debug)]
struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("call deadline passed or call cancelled")
    }
}

impl std::error::Error for DeadlinePassed {}

/// Whether `err` is a [`DeadlineReader`] refusing to read on.
pub fn is_deadline_stop(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<DeadlinePassed>())
}

/// Checks the deadline before every read ([`Deadline::check_io`]).
#[derive(Debug)]
pub struct DeadlineReader<'d, R> {
    inner: R,
    deadline: &'d Deadline,
}

impl<'d, R: Read> DeadlineReader<'d, R> {
    /// Wraps `inner`.
    pub fn new(inner: R, deadline: &'d Deadline) -> Self {
        Self { inner, deadline }
    }

    /// The wrapped reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }
}

impl<R: Read> Read for DeadlineReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.deadline.check_io()?;
        self.inner.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_and_cancel_stop() {
        let flag = Arc::new(AtomicBool::new(false));
        let open = Deadline::new(Duration::from_secs(60), flag.clone());
        assert_eq!(open.check(), Ok(()));
        flag.store(true, Ordering::Relaxed);
        assert_eq!(open.check(), Err(Stop::Cancelled));
        assert!(open.is_cancelled());

        let late = Deadline::new(Duration::ZERO, Arc::new(AtomicBool::new(false)));
        assert_eq!(late.check(), Err(Stop::Expired));
        assert_eq!(late.error(&"w:/f").code(), ErrorCode::Timeout);

        // A timeout too large for `Instant` means no deadline, not a panic.
        assert_eq!(Deadline::never().check(), Ok(()));
    }

    #[test]
    fn reader_fails_once_the_deadline_is_gone() {
        let flag = Arc::new(AtomicBool::new(false));
        let deadline = Deadline::new(Duration::from_secs(60), flag.clone());
        let mut reader = DeadlineReader::new(io::repeat(b'a'), &deadline);
        let mut buf = [0u8; 16];
        assert_eq!(reader.read(&mut buf).unwrap(), 16);
        flag.store(true, Ordering::Relaxed);
        let err = reader.read(&mut buf).unwrap_err();
        assert!(is_deadline_stop(&err));
        assert_ne!(err.kind(), io::ErrorKind::Interrupted);
        assert!(!is_deadline_stop(&io::Error::other("disk")));
    }
}
