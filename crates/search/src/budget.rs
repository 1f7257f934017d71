//! The cost budget of one find/search call: a walk-entry cap, a wall-clock
//! deadline and a cancel flag.
//!
//! Guarantees:
//! - [`Budget::check`] is cheap (one relaxed atomic load and one monotonic
//!   clock read), so the walk calls it for every entry and the file reader
//!   for every chunk it reads: neither a huge tree nor one huge file can
//!   outlive the deadline or a cancellation by more than one entry or one
//!   read (the reader is the core's `DeadlineReader`).
//! - Cancellation is cooperative: whoever owns the flag (the server, when
//!   the client cancels or disconnects) sets it, and the search stops at its
//!   next check with what it has. The outcome then says `SEARCH_TIMEOUT`;
//!   the caller, which set the flag, knows better and discards it
//!   ([`Budget::is_cancelled`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serverfs_core::Deadline;

/// Why a find/search returned before the whole tree was seen:
/// `SEARCH_LIMIT_REACHED` (match `limit + 1` exists; `limit` matches are
/// returned), `WALK_LIMIT_REACHED` (the walk-entry cap was reached and more
/// remained) or `SEARCH_TIMEOUT` (the deadline passed, or the call was
/// cancelled); the serde form is the wire name.
//
// Plain comments on the variants: the derived schema is then an `enum`,
// which validating clients check faster than a `oneOf` of `const`s (see
// `serverfs_core::EntryKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TruncatedReason {
    // Match `limit + 1` exists; `limit` matches are returned.
    SearchLimitReached,
    // `max_walk_entries` entries were visited and more remained.
    WalkLimitReached,
    // The deadline passed (or the call was cancelled).
    SearchTimeout,
}

/// What a find/search passed over without looking inside, by reason, so
/// that "no match" never hides "not searched".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Directories or files the server could not read (permissions, a
    /// path too long for the kernel, a line too long to buffer).
    pub unreadable: u64,
    /// Files larger than the search size cap (search_text only).
    pub too_large: u64,
    /// Files holding NUL bytes (search_text only).
    pub binary: u64,
}

/// What find_files and search_text return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome<T> {
    /// At most `limit` matches, in walk order (then line order).
    pub matches: Vec<T>,
    /// `Some` only when more may exist than what is returned.
    pub truncated_reason: Option<TruncatedReason>,
    /// What was passed over.
    pub skipped: Skipped,
    /// Set exactly when `truncated_reason` is: pass it back as `cursor`
    /// with the same arguments to continue where this call stopped.
    pub next_cursor: Option<String>,
}

/// Limits of one call: a walk-entry cap and the call's [`Deadline`]. Build
/// it when the call starts.
#[derive(Clone, Debug)]
pub struct Budget {
    max_walk_entries: u64,
    deadline: Deadline,
    workers: usize,
}

/// Most worker threads one find_files or search_text call starts by
/// default.
pub const MAX_DEFAULT_WORKERS: usize = 8;

/// The default number of worker threads of one find/search call: the
/// cores this process may use ([`std::thread::available_parallelism`]),
/// at most [`MAX_DEFAULT_WORKERS`].
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get).min(MAX_DEFAULT_WORKERS)
}

impl Budget {
    /// A budget of `max_walk_entries` visited entries and `timeout` of wall
    /// clock from now; setting `cancel` stops the call at its next check.
    pub fn new(max_walk_entries: u64, timeout: Duration, cancel: Arc<AtomicBool>) -> Self {
        Self::with_deadline(max_walk_entries, Deadline::new(timeout, cancel))
    }

    /// A budget of `max_walk_entries` under an existing deadline, searched
    /// by [`default_workers`] threads.
    pub fn with_deadline(max_walk_entries: u64, deadline: Deadline) -> Self {
        Self { max_walk_entries, deadline, workers: default_workers() }
    }

    /// The same budget with `workers` threads searching files for
    /// search_text, or reading directories for find_files (0 or 1: the
    /// calling thread alone, one after the other). The answer is the same
    /// for every count.
    #[must_use]
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Threads that search files in one search_text call, or read
    /// directories in one find_files call (1: none besides the calling
    /// thread).
    pub fn workers(&self) -> usize {
        self.workers.max(1)
    }

    /// Entries one walk may visit.
    pub fn max_walk_entries(&self) -> u64 {
        self.max_walk_entries
    }

    /// The deadline and cancel flag.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Whether the cancel flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.deadline.is_cancelled()
    }

    /// `Err(SearchTimeout)` once the deadline passed or the flag is set.
    pub(crate) fn check(&self) -> Result<(), TruncatedReason> {
        self.deadline.check().map_err(|_| TruncatedReason::SearchTimeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Clients match on these strings: pinned on the type that reaches the
    /// wire.
    #[test]
    fn wire_names() {
        for (reason, wire) in [
            (TruncatedReason::SearchLimitReached, "SEARCH_LIMIT_REACHED"),
            (TruncatedReason::WalkLimitReached, "WALK_LIMIT_REACHED"),
            (TruncatedReason::SearchTimeout, "SEARCH_TIMEOUT"),
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), wire);
        }
    }

    #[test]
    fn deadline_and_cancel_stop() {
        let flag = Arc::new(AtomicBool::new(false));
        let open = Budget::new(10, Duration::from_secs(60), flag.clone());
        assert_eq!(open.check(), Ok(()));
        flag.store(true, Ordering::Relaxed);
        assert_eq!(open.check(), Err(TruncatedReason::SearchTimeout));
        assert!(open.is_cancelled());

        let late = Budget::new(10, Duration::ZERO, Arc::new(AtomicBool::new(false)));
        assert_eq!(late.check(), Err(TruncatedReason::SearchTimeout));

        // A timeout too large for `Instant` means no deadline, not a panic.
        let endless = Budget::new(10, Duration::MAX, Arc::new(AtomicBool::new(false)));
        assert_eq!(endless.check(), Ok(()));
    }
}
