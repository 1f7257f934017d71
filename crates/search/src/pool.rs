//! The per-call worker pool of search_text: jobs handed out in submission
//! order to a few scoped threads, results taken back in that same order.
//!
//! Guarantees:
//! - Results come back in the order the jobs were submitted, whatever
//!   order the workers finish them in: the caller's answer is the one a
//!   single thread doing the jobs one after the other would give.
//! - Bounded: the caller decides how many jobs are in flight
//!   ([`Pool::in_flight`]); results waiting to be taken are at most that
//!   many.
//! - Scoped: the workers are threads of a [`std::thread::scope`] the call
//!   opens, so they borrow the call's data (the root, the matcher) and are
//!   all joined before the call returns: a search holds its admission
//!   permit until every thread it started has stopped. The threads are
//!   started on the first job, so a call that submits none starts none.
//! - With no worker threads (`threads == 0`), a job runs inside
//!   [`Pool::submit`] on the caller's thread: the sequential reference.
//! - A worker that panics does not hang the caller: the panic is carried
//!   back with the job's result and resumed on the caller's thread.
//! - Stopping: dropping the pool (or [`Pool::abandon`]) closes the job queue
//!   and raises the flag workers pass to each job, so a job in progress
//!   can stop at its next check; jobs still queued are never started.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::Scope;

type Outcome<R> = std::thread::Result<R>;

/// The shared job queue.
struct Queue<J> {
    jobs: Mutex<(VecDeque<(u64, J)>, bool)>,
    ready: Condvar,
}

impl<J> Queue<J> {
    fn push(&self, seq: u64, job: J) {
        let mut q = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        q.0.push_back((seq, job));
        drop(q);
        self.ready.notify_one();
    }

    /// The next job, or `None` once the queue is closed.
    fn pop(&self) -> Option<(u64, J)> {
        let mut q = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if q.1 {
                return None;
            }
            if let Some(job) = q.0.pop_front() {
                return Some(job);
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn close(&self) {
        let mut q = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        q.1 = true;
        q.0.clear();
        drop(q);
        self.ready.notify_all();
    }
}

/// A pool of `threads` workers inside a scope; see the module docs.
pub(crate) struct Pool<'scope, 'env, J, R, S, I, W>
where
    J: Send + 'env,
    R: Send + 'env,
    I: Fn() -> S + Sync + 'env,
    W: Fn(&mut S, J, &AtomicBool) -> R + Sync + 'env,
{
    scope: &'scope Scope<'scope, 'env>,
    threads: usize,
    init: &'env I,
    work: &'env W,
    queue: Arc<Queue<J>>,
    abandon: Arc<AtomicBool>,
    results_tx: Option<Sender<(u64, Outcome<R>)>>,
    results: Receiver<(u64, Outcome<R>)>,
    started: bool,
    /// Results that came back ahead of an older job's.
    early: BTreeMap<u64, Outcome<R>>,
    /// The inline state, when `threads == 0`.
    inline: Option<S>,
    next_seq: u64,
    next_out: u64,
}

impl<'scope, 'env, J, R, S, I, W> Pool<'scope, 'env, J, R, S, I, W>
where
    J: Send + 'env,
    R: Send + 'env,
    I: Fn() -> S + Sync + 'env,
    W: Fn(&mut S, J, &AtomicBool) -> R + Sync + 'env,
{
    /// A pool of `threads` workers (0: jobs run inline), each with state
    /// from `init`, running `work`.
    pub(crate) fn new(
        scope: &'scope Scope<'scope, 'env>,
        threads: usize,
        init: &'env I,
        work: &'env W,
    ) -> Self {
        let (results_tx, results) = channel();
        Self {
            scope,
            threads,
            init,
            work,
            queue: Arc::new(Queue {
                jobs: Mutex::new((VecDeque::new(), false)),
                ready: Condvar::new(),
            }),
            abandon: Arc::new(AtomicBool::new(false)),
            results_tx: Some(results_tx),
            results,
            started: false,
            early: BTreeMap::new(),
            inline: None,
            next_seq: 0,
            next_out: 0,
        }
    }

    /// Jobs submitted whose results were not taken yet.
    pub(crate) fn in_flight(&self) -> usize {
        usize::try_from(self.next_seq - self.next_out).unwrap_or(usize::MAX)
    }

    /// Hands `job` to the workers (or runs it, with no workers).
    pub(crate) fn submit(&mut self, job: J) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.threads == 0 {
            let state = self.inline.get_or_insert_with(self.init);
            let out = catch_unwind(AssertUnwindSafe(|| (self.work)(state, job, &self.abandon)));
            self.early.insert(seq, out);
            return;
        }
        if !self.started {
            self.start();
        }
        self.queue.push(seq, job);
    }

    fn start(&mut self) {
        let Some(tx) = &self.results_tx else { return };
        for _ in 0..self.threads {
            let tx = tx.clone();
            let queue = Arc::clone(&self.queue);
            let abandon = Arc::clone(&self.abandon);
            let (init, work) = (self.init, self.work);
            self.scope.spawn(move || {
                let mut state = init();
                while let Some((seq, job)) = queue.pop() {
                    let out = catch_unwind(AssertUnwindSafe(|| work(&mut state, job, &abandon)));
                    if tx.send((seq, out)).is_err() {
                        break;
                    }
                }
            });
        }
        self.started = true;
        // Only the workers hold senders now: should they all be gone, a
        // wait for a result ends instead of hanging.
        self.results_tx = None;
    }

    /// The result of the oldest job not taken yet, if it is ready.
    pub(crate) fn try_next(&mut self) -> Option<R> {
        if self.in_flight() == 0 {
            return None;
        }
        while let Ok((seq, out)) = self.results.try_recv() {
            self.early.insert(seq, out);
        }
        self.take()
    }

    /// The result of the oldest job not taken yet, waiting for it; `None`
    /// when nothing is in flight.
    pub(crate) fn next(&mut self) -> Option<R> {
        if self.in_flight() == 0 {
            return None;
        }
        while !self.early.contains_key(&self.next_out) {
            match self.results.recv() {
                Ok((seq, out)) => {
                    self.early.insert(seq, out);
                }
                // Every worker is gone without this result: not possible
                // unless one died outside a job.
                Err(_) => panic!("search worker threads ended early"),
            }
        }
        self.take()
    }

    fn take(&mut self) -> Option<R> {
        let out = self.early.remove(&self.next_out)?;
        self.next_out += 1;
        Some(out.unwrap_or_else(|panic| resume_unwind(panic)))
    }

    /// Stops the workers: queued jobs are dropped, running ones see the
    /// flag raised.
    pub(crate) fn abandon(&self) {
        self.abandon.store(true, Ordering::Relaxed);
        self.queue.close();
    }
}

impl<J, R, S, I, W> Drop for Pool<'_, '_, J, R, S, I, W>
where
    J: Send,
    R: Send,
    I: Fn() -> S + Sync,
    W: Fn(&mut S, J, &AtomicBool) -> R + Sync,
{
    fn drop(&mut self) {
        self.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn squares(threads: usize) -> Vec<u64> {
        let init = || 0u64;
        let work = |calls: &mut u64, n: u64, _: &AtomicBool| {
            *calls += 1;
            // Later jobs finish first.
            std::thread::sleep(Duration::from_micros((50 - n % 50) * 20));
            n * n
        };
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, threads, &init, &work);
            let mut out = Vec::new();
            for n in 0..200 {
                pool.submit(n);
                if pool.in_flight() >= 8 {
                    out.push(pool.next().unwrap());
                }
                while let Some(r) = pool.try_next() {
                    out.push(r);
                }
            }
            while let Some(r) = pool.next() {
                out.push(r);
            }
            out
        })
    }

    #[test]
    fn results_in_submission_order() {
        let want: Vec<u64> = (0..200).map(|n| n * n).collect();
        assert_eq!(squares(0), want);
        assert_eq!(squares(1), want);
        assert_eq!(squares(3), want);
    }

    #[test]
    fn abandoning_stops_workers() {
        let init = || ();
        let work = |(): &mut (), n: u64, stop: &AtomicBool| {
            while n == 0 && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            n
        };
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, 2, &init, &work);
            for n in 0..10 {
                pool.submit(n);
            }
            // Job 0 never finishes by itself; dropping the pool ends it and
            // the scope then joins every worker.
            drop(pool);
        });
    }

    #[test]
    #[should_panic(expected = "job 3")]
    fn a_worker_panic_reaches_the_caller() {
        let init = || ();
        let work = |(): &mut (), n: u64, _: &AtomicBool| {
            assert!(n != 3, "job 3");
            n
        };
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, 2, &init, &work);
            for n in 0..5 {
                pool.submit(n);
            }
            while pool.next().is_some() {}
        });
    }
}
