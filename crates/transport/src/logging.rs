//! Flat JSON log lines on stderr: one object per event, fields
//! at the top level.
//!
//! Logging never blocks a call and never fails one: each line goes through
//! a bounded queue to one thread that writes stderr, in batches (a line is
//! written at most [`BATCH_PAUSE`] after it was logged). When stderr's reader
//! is slow or stopped, lines beyond the queue are dropped; when it is gone
//! (EPIPE, EIO), lines are dropped silently — tracing-subscriber's own
//! fallback (`eprintln!`) would panic the calling thread.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Lines waiting for stderr at most; more are dropped.
const QUEUE_LINES: usize = 4096;

enum Item {
    Line(Vec<u8>),
    /// Answered once every line queued before it was written.
    Flush(SyncSender<()>),
}

/// The sending side of the queue (cloned into each event's writer).
#[derive(Clone)]
struct Queue(SyncSender<Item>);

static QUEUE: OnceLock<Queue> = OnceLock::new();

impl Queue {
    /// The queue and its writer thread (if the thread cannot start, the
    /// queue fills and lines are dropped: logging still never blocks).
    fn start() -> Self {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        let _ = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(&rx, &mut std::io::stderr()));
        Self(tx)
    }
}

/// After each batch the writer rests this long before it waits again.
/// Lines logged meanwhile queue up without waking it (a futex wake and a
/// `write` per line cost a busy server more than formatting the lines) and
/// go out together in one `write`. So a line reaches stderr at most this
/// much later; at 20,000 lines/s a pause holds about 100 of the queue's
/// [`QUEUE_LINES`].
const BATCH_PAUSE: Duration = Duration::from_millis(5);

/// Writes what `rx` brings to `out` (stderr; not `stderr().lock()` held
/// for the thread's life, so a panic message on another thread still gets
/// through) until every sender is gone. A failed write drops its batch.
fn write_lines(rx: &Receiver<Item>, out: &mut impl Write) {
    let mut batch = Vec::new();
    let mut flushed = Vec::new();
    while let Ok(first) = rx.recv() {
        // At most a queue's worth per batch, so it stays bounded even if
        // lines keep coming as fast as they are taken.
        for item in std::iter::once(first).chain(rx.try_iter().take(QUEUE_LINES)) {
            match item {
                Item::Line(line) => batch.extend_from_slice(&line),
                Item::Flush(done) => flushed.push(done),
            }
        }
        let _ = out.write_all(&batch);
        batch.clear();
        for done in flushed.drain(..) {
            let _ = done.try_send(());
        }
        std::thread::sleep(BATCH_PAUSE);
    }
}

/// One event's writer: buffers the formatted line, queues it when dropped.
struct EventWriter {
    queue: Queue,
    line: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let _ = self.queue.0.try_send(Item::Line(std::mem::take(&mut self.line)));
    }
}

impl<'a> MakeWriter<'a> for Queue {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> EventWriter {
        EventWriter { queue: self.clone(), line: Vec::new() }
    }
}

/// Waits (at most about `timeout`) until the lines logged so far are
/// written; called before exiting so the last lines are not lost.
pub fn flush_logs(timeout: Duration) {
    let Some(queue) = QUEUE.get() else { return };
    let deadline = Instant::now() + timeout;
    let (done_tx, done_rx) = sync_channel(1);
    let mut item = Item::Flush(done_tx);
    loop {
        match queue.0.try_send(item) {
            Ok(()) => break,
            Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                item = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
    let _ = done_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
}

/// Installs the global subscriber at `level` (`TRACE` … `ERROR`, any case).
/// rmcp's own chatter is kept at WARN unless DEBUG or TRACE is asked for.
///
/// # Errors
/// An unknown level name: what the level must be (the caller names the
/// setting).
// A `String`: the message of the `ConfigError` the caller names the
// setting for.
pub fn init_logging(level: &str) -> Result<(), String> {
    let level = level.to_ascii_lowercase();
    let directive = match level.as_str() {
        "trace" | "debug" => level.clone(),
        "info" | "warn" | "error" => format!("{level},rmcp=warn"),
        _ => {
            return Err(format!("must be TRACE, DEBUG, INFO, WARN or ERROR; got '{level}'"));
        }
    };
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_writer(QUEUE.get_or_init(Queue::start).clone())
        .with_env_filter(EnvFilter::new(directive))
        .try_init()
        .map_err(|e| format!("logging: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records each `write` call; fails them all when `broken` (a reader
    /// that is gone).
    #[derive(Clone, Default)]
    struct Sink {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        broken: bool,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.broken {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            self.writes.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Queues `lines` then a flush, runs the writer, and returns what
    /// reached `sink` once the flush was answered.
    fn run(mut sink: Sink, lines: &[&str]) -> Vec<Vec<u8>> {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        for line in lines {
            tx.send(Item::Line(line.as_bytes().to_vec())).unwrap();
        }
        let (done_tx, done_rx) = sync_channel(1);
        tx.send(Item::Flush(done_tx)).unwrap();
        let writes = Arc::clone(&sink.writes);
        let writer = std::thread::spawn(move || write_lines(&rx, &mut sink));
        done_rx.recv().expect("the flush is answered");
        drop(tx);
        writer.join().unwrap();
        std::mem::take(&mut *writes.lock().unwrap())
    }

    #[test]
    fn queued_lines_go_out_in_order_in_one_write_before_the_flush_is_answered() {
        let writes = run(Sink::default(), &["a\n", "b\n", "c\n"]);
        assert_eq!(writes, vec![b"a\nb\nc\n".to_vec()]);
    }

    #[test]
    fn a_gone_reader_drops_lines_and_still_answers_the_flush() {
        let writes = run(Sink { broken: true, ..Sink::default() }, &["a\n", "b\n"]);
        assert!(writes.is_empty());
    }
}
