//! Per-path locks: mutations of one path are serialised.
//!
//! Guarantees:
//! - A transaction takes the locks of all its paths at once, under one
//!   mutex: it waits until none of them is held, then holds them all. No
//!   transaction ever holds some of its locks while waiting for others, so
//!   no two transactions can deadlock, whatever order they name paths in.
//! - Locks are released when the [`Held`] guard drops, also on panic.
//! - Keys are normalised relative paths (`a/b/c`), so two spellings of one
//!   path (`a/./b/c`, `a/x/../b/c`) take the same lock.
//!
//! Readers never take these locks (reads never wait); they see
//! either the old or the new file because every write is a rename.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Condvar, Mutex, PoisonError};

/// The set of paths currently being mutated.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    held: Mutex<HashSet<String>>,
    freed: Condvar,
}

impl LockTable {
    /// Blocks until every key is free, then holds them all.
    pub(crate) fn lock(&self, keys: BTreeSet<String>) -> Held<'_> {
        // A panic while the mutex was held cannot leave the set half
        // updated (insert/remove are single calls), so poison is ignored.
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while keys.iter().any(|k| held.contains(k)) {
            held = self.freed.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
        held.extend(keys.iter().cloned());
        Held { table: self, keys }
    }
}

/// Locks held by one transaction; dropping releases them.
#[derive(Debug)]
pub(crate) struct Held<'t> {
    table: &'t LockTable,
    keys: BTreeSet<String>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.table.held.lock().unwrap_or_else(PoisonError::into_inner);
        for k in &self.keys {
            held.remove(k);
        }
        self.table.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn keys(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Overlapping key sets named in opposite orders never deadlock, and
    /// never hold one key twice at once.
    #[test]
    fn overlapping_sets_are_serialised_without_deadlock() {
        let table = Arc::new(LockTable::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (table, inside) = (Arc::clone(&table), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let set = if i % 2 == 0 { keys(&["a", "b"]) } else { keys(&["b", "a"]) };
                        let _held = table.lock(set);
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn disjoint_sets_do_not_wait() {
        let table = LockTable::default();
        let _a = table.lock(keys(&["a"]));
        let _b = table.lock(keys(&["b"]));
    }
}
