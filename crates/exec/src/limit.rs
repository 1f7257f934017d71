//! The cap on concurrent commands: a bounded queue, never an unbounded
//! pile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serverfs_core::error::{ErrorCode, FsError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `running` commands at once; at most `waiting` more wait, each
/// for at most `max_wait`; anything beyond is `SERVER_BUSY`.
#[derive(Debug)]
pub struct Limiter {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
}

/// A running slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
}

/// Default concurrent commands.
pub const DEFAULT_RUNNING: usize = 4;
/// Default queue length.
pub const DEFAULT_WAITING: usize = 16;
/// Default longest wait in the queue.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);

impl Default for Limiter {
    fn default() -> Self {
        Self::new(DEFAULT_RUNNING, DEFAULT_WAITING, DEFAULT_MAX_WAIT)
    }
}

/// Decrements the waiting count however the wait ends (a dropped future
/// included).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn busy() -> FsError {
    FsError::new(ErrorCode::ServerBusy, "Too many commands are running; retry shortly.")
}

impl Limiter {
    /// `running` ≥ 1 slots (0 is taken as 1).
    pub fn new(running: usize, max_waiting: usize, max_wait: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(running.max(1))),
            waiting: AtomicUsize::new(0),
            max_waiting,
            max_wait,
        }
    }

    /// How many callers wait for a slot right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// A slot now, or after a bounded wait, or `SERVER_BUSY`.
    pub async fn acquire(&self) -> Result<Permit, FsError> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(Permit { _permit: p });
        }
        let queued = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_waiting).then_some(n + 1)
            })
            .is_ok();
        if !queued {
            return Err(busy());
        }
        let _waiting = Waiting(&self.waiting);
        match tokio::time::timeout(self.max_wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(Permit { _permit: p }),
            _ => Err(busy()),
        }
    }
}
