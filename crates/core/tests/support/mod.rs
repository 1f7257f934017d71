//! The one constructor the core's integration tests open roots with.

use std::path::Path;

use serverfs_core::{Policy, ResolveMode, Root, RootOptions, SymlinkRule};

/// `dir` as a root named `a`, under the built-in policy (hidden paths
/// off), resolved in `mode` with the symlink rule `rule`.
pub(crate) fn root(dir: &Path, mode: ResolveMode, rule: SymlinkRule) -> Root {
    let options = RootOptions::new("a", Policy::new(false, &[]).unwrap());
    Root::open(dir, options.resolve_mode(mode).symlinks(rule)).unwrap()
}

/// A thread that swaps pairs of names below a directory with
/// `RENAME_EXCHANGE` (atomically, so every lookup meets one or the other)
/// until stopped: the race every swap test runs against.
pub(crate) struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Swapper {
    /// Starts swapping each `(a, b)` of `pairs` below `dir`, in a loop.
    pub(crate) fn start(dir: &Path, pairs: &[(&str, &str)]) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pairs: Vec<_> = pairs.iter().map(|(a, b)| (dir.join(a), dir.join(b))).collect();
        let running = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !running.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        a,
                        rustix::fs::CWD,
                        b,
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
                rounds += 1;
            }
            rounds
        });
        Self { stop, thread }
    }

    /// Stops the thread; how many rounds of swaps it made.
    pub(crate) fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}
