//! The cap on concurrent commands: a bounded queue, never an unbounded
//! pile, and a fair share: one principal's commands and tasks never hold
//! every slot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serverfs_core::error::{ErrorCode, FsError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `running` commands at once, and, once [`Limiter::fair_share`]
/// is asked for (a server with several principals), each principal at most
/// its share of them (every slot but one, when there are two or more); at
/// most `waiting` more wait, each for at most `max_wait`; anything beyond
/// is `SERVER_BUSY`.
#[derive(Debug)]
pub struct Limiter {
    slots: Arc<Semaphore>,
    /// Each principal's share, made at its first command. One small entry
    /// per principal the server has seen (named tokens, Access users,
    /// `anonymous`, `stdio`).
    shares: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The slots, all principals together.
    running: usize,
    /// Slots one principal may hold: all of them, or all but one.
    share: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
}

/// A running slot (and one of its principal's share); dropping it frees
/// both.
#[derive(Debug)]
pub struct Permit {
    _share: OwnedSemaphorePermit,
    _slot: OwnedSemaphorePermit,
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
        let running = running.max(1);
        Self {
            slots: Arc::new(Semaphore::new(running)),
            shares: Mutex::default(),
            running,
            share: running,
            waiting: AtomicUsize::new(0),
            max_waiting,
            max_wait,
        }
    }

    /// One principal's commands and tasks never hold every slot: one is
    /// kept for the others (when there are two or more). For a server whose
    /// clients are several principals; with one (stdio) it only costs a
    /// slot.
    #[must_use]
    pub fn fair_share(mut self) -> Self {
        self.share = self.running.saturating_sub(1).max(1);
        self
    }

    /// How many callers wait for a slot right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    fn share_of(&self, principal: &str) -> Arc<Semaphore> {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        let share = shares
            .entry(principal.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.share)));
        Arc::clone(share)
    }

    /// A slot for a command of `principal` now, or after a bounded wait
    /// (for a free slot, or for one of its own share when it holds all of
    /// it), or `SERVER_BUSY`.
    pub async fn acquire(&self, principal: &str) -> Result<Permit, FsError> {
        let share = self.share_of(principal);
        if let Ok(own) = Arc::clone(&share).try_acquire_owned()
            && let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned()
        {
            return Ok(Permit { _share: own, _slot: slot });
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
        let slots = Arc::clone(&self.slots);
        let wait = async move {
            let own = share.acquire_owned().await.ok()?;
            let slot = slots.acquire_owned().await.ok()?;
            Some(Permit { _share: own, _slot: slot })
        };
        match tokio::time::timeout(self.max_wait, wait).await {
            Ok(Some(permit)) => Ok(permit),
            _ => Err(busy()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One principal gets every slot but one; the last is another's at once,
    /// and a principal's share comes back when its command ends.
    #[tokio::test]
    async fn one_principal_never_holds_every_slot() {
        let limiter = Limiter::new(3, 4, Duration::from_millis(200)).fair_share();
        let a1 = limiter.acquire("alice").await.unwrap();
        let _a2 = limiter.acquire("alice").await.unwrap();
        let refused = limiter.acquire("alice").await.unwrap_err();
        assert_eq!(refused.code(), ErrorCode::ServerBusy, "alice past her share of 2");
        let b1 = limiter.acquire("bob").await.expect("the last slot is free for bob");
        drop(a1);
        let _a3 = limiter.acquire("alice").await.expect("alice's share came back");
        assert_eq!(limiter.acquire("carol").await.unwrap_err().code(), ErrorCode::ServerBusy);
        drop(b1);
        let _c1 = limiter.acquire("carol").await.expect("a slot came back");
        assert_eq!(limiter.waiting(), 0);
    }

    /// Without a fair share, one principal may hold every slot (stdio).
    #[tokio::test]
    async fn without_a_fair_share_every_slot_is_anyone_s() {
        let limiter = Limiter::new(2, 0, Duration::from_millis(100));
        let _a1 = limiter.acquire("stdio").await.unwrap();
        let _a2 = limiter.acquire("stdio").await.expect("the last slot too");
    }

    /// With one slot, its principal may use it (a share of none would run
    /// nothing).
    #[tokio::test]
    async fn a_single_slot_is_anyone_s() {
        let limiter = Limiter::new(1, 1, Duration::from_millis(100)).fair_share();
        let held = limiter.acquire("alice").await.unwrap();
        assert_eq!(limiter.acquire("bob").await.unwrap_err().code(), ErrorCode::ServerBusy);
        drop(held);
        limiter.acquire("bob").await.unwrap();
    }
}
