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
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

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
    subscriber(EnvFilter::new(directive), QUEUE.get_or_init(Queue::start).clone())
        .try_init()
        .map_err(|e| format!("logging: {e}"))
}

/// The JSON subscriber writing to `writer`, with [`ClientGone`] on top.
fn subscriber<W>(filter: EnvFilter, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Clone + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_writer(writer.clone())
        .with_env_filter(filter)
        .finish()
        .with(ClientGone(writer))
}

/// rmcp logs an ERROR when it cannot send an answer because the client
/// has gone (over HTTP: the connection closed before the answer, so the
/// channel the answer goes into is closed). A client leaving is its own
/// choice, not the server's failure: that line is replaced by an INFO line
/// `client_gone`, written here (an event logged from inside the subscriber
/// would be dropped: tracing does not dispatch re-entrantly). Every other
/// line passes as it is.
struct ClientGone<W>(W);

/// rmcp 3.11's words for an answer its client is no longer there to take.
const ANSWER_UNSENT: &str = "failed to send pending response during drain";
const CHANNEL_CLOSED: &str = "channel closed";

impl<S, W> Layer<S> for ClientGone<W>
where
    S: tracing::Subscriber,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn event_enabled(&self, event: &tracing::Event<'_>, _: Context<'_, S>) -> bool {
        let meta = event.metadata();
        if *meta.level() != tracing::Level::ERROR || !meta.target().starts_with("rmcp") {
            return true;
        }
        let mut fields = MessageAndError::default();
        event.record(&mut fields);
        if fields.message != ANSWER_UNSENT || fields.error != CHANNEL_CLOSED {
            return true;
        }
        if tracing::level_filters::LevelFilter::current() >= tracing::Level::INFO {
            let mut timestamp = String::new();
            let _ = tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp));
            let line = serde_json::json!({
                "timestamp": timestamp,
                "level": "INFO",
                "event": "client_gone",
                "reason": "the client closed its connection before its answer was sent",
            });
            let _ = writeln!(self.0.make_writer(), "{line}");
        }
        false
    }
}

/// An event's `message` and `error` fields, as text.
#[derive(Default)]
struct MessageAndError {
    message: String,
    error: String,
}

impl tracing::field::Visit for MessageAndError {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "error" => self.error = format!("{value:?}"),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "message" => value.clone_into(&mut self.message),
            "error" => value.clone_into(&mut self.error),
            _ => {}
        }
    }
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

    /// Collects every line written, for a subscriber under test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Self;

        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    #[test]
    fn an_answer_its_client_left_is_info_and_other_rmcp_errors_stay_errors() {
        let lines = Lines::default();
        let subscriber = subscriber(EnvFilter::new("info,rmcp=warn"), lines.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "rmcp::service", error = %CHANNEL_CLOSED, "{ANSWER_UNSENT}");
            tracing::error!(target: "rmcp::service", error = %"broken pipe", "{ANSWER_UNSENT}");
            tracing::error!(target: "serverfs", error = %CHANNEL_CLOSED, "{ANSWER_UNSENT}");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let levels: Vec<(String, String)> = text
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let what = v["event"].as_str().or(v["error"].as_str()).unwrap_or_default();
                (v["level"].as_str().unwrap().to_owned(), what.to_owned())
            })
            .collect();
        let expected =
            [("INFO", "client_gone"), ("ERROR", "broken pipe"), ("ERROR", "channel closed")];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(l, w)| ((*l).to_owned(), (*w).to_owned())).collect();
        assert_eq!(levels, expected, "{text}");
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
