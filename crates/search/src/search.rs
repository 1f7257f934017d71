//! search_text: lines holding a literal string, with
//! ripgrep's searcher.
//!
//! Guarantees:
//! - The query is literal (regex metacharacters are plain characters);
//!   case-insensitive matching uses Unicode simple case folding (`ÄBC`
//!   finds `äbc`). One match per line, files in walk order, lines
//!   ascending: the same tree and query give the same result.
//! - Only regular files that are visible under the policy are searched, and
//!   only through a handle [`Root::open_file`] opened beneath the root
//!   under its symlink rule; symlinks met by the walk, FIFOs, sockets and
//!   devices are never opened for reading. Files larger than `max_file_bytes` (by
//!   `fstat` on that handle) are skipped, and no file is read past
//!   `max_file_bytes` even if it grows meanwhile.
//! - Binary files — a NUL byte anywhere in what is read — yield no match at
//!   all: a file's matches are held back until the file is known to be
//!   text, and when the limit is reached inside a file the rest of that
//!   file is still scanned for NUL before its matches count. UTF-16 files
//!   (NUL-laden) are therefore binary, as in read_text_file.
//! - `text` is the matching line without its terminator (and without a
//!   UTF-8 BOM on line 1), cut to at most [`MAX_TEXT_BYTES`] bytes around
//!   the match on character boundaries, so a minified 2 MB line gives a
//!   short snippet. Bytes of the snippet that are not valid UTF-8 are
//!   *marked* with U+FFFD (the path and line number stay exact; read_text_file
//!   will refuse such a file with `UNSUPPORTED_TEXT_ENCODING`).
//! - Memory is bounded: one reusable buffer per searching thread, grown to
//!   the longest line but never past [`MAX_LINE_BYTES`]; a file with a
//!   longer line is skipped.
//! - Every core, one answer: below a directory, files are searched by
//!   [`Budget::workers`] threads ahead of the walk, which takes their
//!   verdicts back in walk order (bounded read-ahead, dropped once the
//!   answer is complete); matches, `skipped`, `truncated_reason` and
//!   `next_cursor` are those of a search one file after the other.
//! - The deadline and cancel flag are checked per walked entry and per read
//!   inside a file.
//! - Paged: whenever it stops early the outcome has a `next_cursor` naming
//!   a file and a line. After a limit stop the next page starts at the
//!   first matching line not returned, inside the same file if that is
//!   where the surplus match was; after a deadline stop inside a file (whose
//!   matches were held back) the file is searched again on the next page;
//!   after a walk-limit stop the walk resumes after the last entry visited.
//!   Pages concatenate to the unlimited answer (see the `cursor` module).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkFinish, SinkMatch};
use serverfs_core::{EntryKind, ErrorCode, FsError, Location, RelPath, Root};

use serverfs_core::deadline::{DeadlineReader, is_deadline_stop};

use crate::budget::{Budget, Outcome, Skipped, TruncatedReason};
use crate::cursor::{Position, QueryKey};
use crate::pool::Pool;
use crate::walk::{NameGlob, Step, TreeWalk};

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Longest `text` returned for one match, in bytes.
pub const MAX_TEXT_BYTES: usize = 500;
/// Longest line the searcher buffers; a file with a longer line is skipped
/// (bounded memory per concurrent search).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// One matching line (also its wire form).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct TextMatch {
    /// Path relative to the workdir root.
    pub path: String,
    /// Line number, from 1.
    pub line: u64,
    /// The line without its terminator, cut to at most 500 bytes around the
    /// match.
    pub text: String,
}

/// `path:line:text`, as grep prints it.
impl serverfs_core::ToText for TextMatch {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        out.push_str(&format!("{}:{}:{}\n", self.path, self.line, self.text));
    }
}

/// What search_text returns: files in walk order, lines ascending.
pub type SearchOutcome = Outcome<TextMatch>;

/// The arguments of one search besides where it starts.
#[derive(Clone, Copy, Debug)]
pub struct SearchQuery<'q> {
    /// Literal text, 1..=1000 characters, on one line.
    pub query: &'q str,
    /// Optional glob on file names (or relative paths, with `/`).
    pub glob: Option<&'q str>,
    /// Exact case, or Unicode case-insensitive.
    pub case_sensitive: bool,
    /// Matches wanted, ≥ 1.
    pub limit: u64,
    /// Larger files are skipped.
    pub max_file_bytes: u64,
    /// Continue after a previous page: its `next_cursor`, from a call with
    /// the same query, glob, case and start.
    pub cursor: Option<&'q str>,
}

/// Searches the files below `start` (a directory), or `start` itself when
/// it is a regular file (`glob` then applies to its name).
///
/// # Errors
/// `INVALID_ARGUMENT` (query empty, too long, with a line break or NUL; bad
/// glob; `limit` 0; a cursor that is malformed or from another query); for
/// `start`: `SYMLINK_NOT_ALLOWED`,
/// `UNSUPPORTED_FILE_TYPE` (FIFO, socket, device), `PATH_NOT_FOUND`, ….
/// Files that fail during the walk are counted in `skipped`, never an error;
/// when `start` is a file that cannot be searched, the reason is the error
/// (`READ_LIMIT_EXCEEDED`, `BINARY_FILE`, `ACCESS_DENIED`, `LINE_TOO_LARGE`).
pub fn search_text(
    root: &Root,
    start: &Location<'_>,
    args: &SearchQuery<'_>,
    budget: &Budget,
) -> Result<SearchOutcome, FsError> {
    if args.limit == 0 {
        return Err(FsError::invalid("limit must be at least 1."));
    }
    let matcher = build_matcher(args.query, args.case_sensitive)?;
    let glob = args.glob.map(|g| NameGlob::new(g, "glob")).transpose()?;
    let case = if args.case_sensitive { "case-sensitive" } else { "case-insensitive" };
    let key = QueryKey::new("search_text", start, &[Some(args.query), args.glob, Some(case)]);
    let resume = args.cursor.map(|c| Position::decode(c, key, start)).transpose()?;
    let mut run = Run {
        root,
        matcher: &matcher,
        searcher: searcher(),
        budget,
        limit: usize::try_from(args.limit).unwrap_or(usize::MAX),
        max_file_bytes: args.max_file_bytes,
        matches: Vec::new(),
        skipped: Skipped::default(),
    };

    // Where a stop that is not at a match resumes: the last entry dealt
    // with, or the file the deadline interrupted.
    let start_path = start.path().as_relative();
    let mut last = resume.clone().unwrap_or(Position { path: start_path.clone(), line: None });

    let start_kind = root.inspect(start)?.kind;
    if start_kind == EntryKind::File {
        let from_line = match &resume {
            None => 0,
            Some(pos) if pos.path != start_path => {
                return Err(FsError::invalid(
                    "cursor: it names a position outside the searched file.",
                ));
            }
            Some(Position { line: Some(n), .. }) => *n,
            // Past the file: nothing is left.
            Some(Position { line: None, .. }) => return Ok(run.finish(None, last, key)),
        };
        let name = start.path().file_name().unwrap_or_default();
        let stop = match &glob {
            Some(g) if !g.is_match(name, name) => None,
            // The one file asked for: why it cannot be searched is the answer.
            _ => run.search_file(start.clone(), from_line).map_err(NotSearched::into_error)?,
        };
        last.line = Some(from_line);
        return Ok(run.finish(stop, last, key));
    }
    if start_kind == EntryKind::Special {
        return Err(FsError::new(
            ErrorCode::UnsupportedFileType,
            format!("{start} is a FIFO, socket or device; only regular files can be searched."),
        ));
    }
    // Directories pass; symlinks get the resolver's error.
    let dir = root.walk_root(start)?;
    let walk = TreeWalk::new(root.policy(), start, &dir, budget, resume.as_ref());
    // Only the first entry can be the cursor's file, searched again from a
    // line on.
    let resume = resume.filter(|pos| pos.line.is_some());
    let (stop, last) = run.search_tree(walk, glob.as_ref(), resume, last);
    Ok(run.finish(stop, last, key))
}

/// Most batches of files handed to the workers and not yet taken back,
/// per worker: with [`MAX_BATCH`], how far the search reads ahead of the
/// answer.
const BATCHES_PER_WORKER: usize = 2;
/// Most files in one batch. Files go to the workers in batches, so that a
/// full scan pays for a hand-over (and a thread wake-up) once per batch,
/// not once per file; batches start at one file and double up to this, so
/// that a search that stops early has read little ahead.
const MAX_BATCH: usize = 32;
/// Most walked entries waiting for the answer to reach them (bounded
/// memory, however many entries lie between two searched files).
const MAX_WAITING_ENTRIES: usize = 4096;

/// One walked entry, in walk order, waiting for the answer to reach it.
enum Waiting {
    /// Not searched (not a file, or not matching the glob): dealt with
    /// once reached.
    Passed(String),
    /// Handed to the workers, searched from line `from_line + 1`; the job
    /// was given room for `room` matches.
    Searched { relative: String, from_line: u64, room: usize },
    /// The walk ended (`None`) or stopped.
    End(Option<TruncatedReason>),
}

/// A file for a worker to search.
struct Job {
    relative: String,
    from_line: u64,
    room: usize,
}

/// What a worker found in one file (`None`: not a path the resolver
/// accepts, passed over as the sequential search does).
type FileResult = Option<Result<Scanned, NotSearched>>;

/// Literal, line-oriented, optionally Unicode case-insensitive./// Literal, line-oriented, optionally Unicode case-insensitive.
fn build_matcher(query: &str, case_sensitive: bool) -> Result<RegexMatcher, FsError> {
    let chars = query.chars().count();
    if chars == 0 {
        return Err(FsError::invalid("query must not be empty."));
    }
    if chars > MAX_QUERY_CHARS {
        return Err(FsError::invalid(format!(
            "query is longer than {MAX_QUERY_CHARS} characters."
        )));
    }
    if query.contains(['\n', '\r']) {
        return Err(FsError::invalid("query must be on one line (matches never span lines)."));
    }
    if query.contains('\0') {
        return Err(FsError::invalid(
            "query must not contain NUL (files holding NUL are binary and skipped).",
        ));
    }
    RegexMatcherBuilder::new()
        .fixed_strings(true)
        .case_insensitive(!case_sensitive)
        .unicode(true)
        // With the terminator declared, the searcher scans whole buffers
        // for the literal instead of going line by line.
        .line_terminator(Some(b'\n'))
        .build(query)
        .map_err(|e| FsError::invalid("query cannot be searched for.").with_detail(e.to_string()))
}

/// State of one search_text call.
struct Run<'r, 's> {
    root: &'s Root,
    matcher: &'r RegexMatcher,
    searcher: Searcher,
    budget: &'r Budget,
    limit: usize,
    max_file_bytes: u64,
    matches: Vec<TextMatch>,
    skipped: Skipped,
}

/// Why one file was not searched; each carries the error a search of that
/// single file answers with.
#[derive(Debug)]
enum NotSearched {
    /// Removed since the walk saw it (not counted: the tree changed).
    Gone(FsError),
    /// Refused by the resolver, unreadable, or a line over [`MAX_LINE_BYTES`].
    Unreadable(FsError),
    /// Larger than the search size cap.
    TooLarge(FsError),
    /// Holds NUL bytes.
    Binary(FsError),
}

impl NotSearched {
    fn into_error(self) -> FsError {
        match self {
            Self::Gone(e) | Self::Unreadable(e) | Self::TooLarge(e) | Self::Binary(e) => e,
        }
    }
}

impl Run<'_, '_> {
    /// Searches one file, reporting matching lines after `from_line`;
    /// `Ok(Some(reason))` when the whole search must stop.
    fn search_file(
        &mut self,
        loc: Location<'_>,
        from_line: u64,
    ) -> Result<Option<TruncatedReason>, NotSearched> {
        let room = self.room();
        let never = AtomicBool::new(false);
        let scanned = search_one(
            self.root,
            &mut self.searcher,
            self.matcher,
            self.budget,
            self.max_file_bytes,
            &loc,
            from_line,
            room,
            &never,
        )?;
        self.take(scanned, &|| loc.to_string())
    }

    /// Matches still wanted: up to match `limit + 1`.
    fn room(&self) -> usize {
        (self.limit + 1).saturating_sub(self.matches.len())
    }

    /// Adds one file's verdict to the answer.
    /// `loc` names the file in messages (`alias:/path`).
    fn take(
        &mut self,
        scanned: Scanned,
        loc: &dyn Fn() -> String,
    ) -> Result<Option<TruncatedReason>, NotSearched> {
        match scanned {
            Scanned::Text(found) => {
                self.matches.extend(found);
                Ok((self.matches.len() > self.limit).then_some(TruncatedReason::SearchLimitReached))
            }
            Scanned::Binary => Err(NotSearched::Binary(FsError::new(
                ErrorCode::BinaryFile,
                format!(
                    "{} contains NUL bytes and is treated as binary; it is not searched.",
                    loc()
                ),
            ))),
            Scanned::Unreadable => Err(NotSearched::Unreadable(FsError::new(
                ErrorCode::LineTooLarge,
                format!(
                    "{} could not be searched: it has a line over {MAX_LINE_BYTES} bytes or could not be read.",
                    loc()
                ),
            ))),
            Scanned::Stop(reason) => Ok(Some(reason)),
        }
    }

    /// Walks and searches the files of `walk` in walk order: on this thread
    /// alone with one worker, else with the files searched by
    /// `budget.workers()` scoped threads ahead of this one, which walks
    /// and puts their verdicts together in walk order (see [`Waiting`]).
    /// Returns why it stopped and the position a cursor resumes at.
    fn search_tree(
        &mut self,
        mut walk: TreeWalk<'_>,
        glob: Option<&NameGlob>,
        mut resume: Option<Position>,
        mut last: Position,
    ) -> (Option<TruncatedReason>, Position) {
        let workers = self.budget.workers();
        let threads = if workers > 1 { workers } else { 0 };
        let max_batches = workers * BATCHES_PER_WORKER;
        // Inline (one thread), a file is searched as soon as it is walked,
        // with exactly the room left.
        let mut batch_size = if threads == 0 { 1 } else { 0 };
        let (root, matcher, budget, max_file_bytes) =
            (self.root, self.matcher, self.budget, self.max_file_bytes);
        let init = searcher;
        let one = |searcher: &mut Searcher, job: Job, abandon: &AtomicBool| -> FileResult {
            let loc = RelPath::from_components(job.relative.split('/'))
                .and_then(|p| root.locate_walked(p).ok())?;
            Some(search_one(
                root,
                searcher,
                matcher,
                budget,
                max_file_bytes,
                &loc,
                job.from_line,
                job.room,
                abandon,
            ))
        };
        let work = |searcher: &mut Searcher, batch: Vec<Job>, abandon: &AtomicBool| {
            let mut out = Vec::with_capacity(batch.len());
            for job in batch {
                if abandon.load(Ordering::Relaxed) {
                    break;
                }
                out.push(one(searcher, job, abandon));
            }
            out
        };
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, threads, &init, &work);
            // Walked entries the answer has not reached yet, and the walk's
            // unreadable count when each was walked (what a search that
            // stops there reports).
            let mut waiting: VecDeque<(Waiting, u64)> = VecDeque::new();
            // Files walked and not handed over yet, and verdicts taken back
            // and not put in the answer yet.
            let mut batch: Vec<Job> = Vec::new();
            let mut verdicts: VecDeque<FileResult> = VecDeque::new();
            let mut walk_done = false;
            loop {
                // Put together what is ready, in walk order.
                while let Some((front, _)) = waiting.front() {
                    let result = match front {
                        Waiting::Passed(_) | Waiting::End(_) => None,
                        Waiting::Searched { .. } => {
                            if verdicts.is_empty() {
                                match pool.try_next() {
                                    Some(ready) => verdicts.extend(ready),
                                    None => break,
                                }
                            }
                            verdicts.pop_front()
                        }
                    };
                    let (item, unreadable) = waiting.pop_front().unwrap_or((Waiting::End(None), 0));
                    if let Some(stop) = self.settle(item, result, &mut last) {
                        self.skipped.unreadable += unreadable;
                        return (stop, last);
                    }
                }
                if !walk_done
                    && waiting.len() < MAX_WAITING_ENTRIES
                    && pool.in_flight() < max_batches
                {
                    let item = match walk.next_step() {
                        Step::Entry(entry) => {
                            let from_line = match resume.take() {
                                Some(Position { path, line: Some(n) })
                                    if path == entry.relative =>
                                {
                                    n
                                }
                                _ => 0,
                            };
                            // The walker's type is only a hint for skipping
                            // cheaply; the type that counts is checked on
                            // the opened handle.
                            let wanted = entry.looks_like_file()
                                && glob
                                    .is_none_or(|g| g.is_match(entry.below_start(), entry.name()));
                            if wanted {
                                // At most this many matches can still be
                                // wanted from this file.
                                let room = self.room();
                                batch.push(Job {
                                    relative: entry.relative.clone(),
                                    from_line,
                                    room,
                                });
                                if batch.len() >= batch_size {
                                    pool.submit(std::mem::take(&mut batch));
                                    if threads > 0 {
                                        batch_size = (batch_size * 2).clamp(1, MAX_BATCH);
                                    }
                                }
                                Waiting::Searched { relative: entry.relative, from_line, room }
                            } else {
                                Waiting::Passed(entry.relative)
                            }
                        }
                        Step::Stop(reason) => {
                            walk_done = true;
                            Waiting::End(Some(reason))
                        }
                        Step::Done => {
                            walk_done = true;
                            Waiting::End(None)
                        }
                    };
                    waiting.push_back((item, walk.unreadable()));
                    continue;
                }
                // Nothing more may be walked: wait for the oldest file.
                if !batch.is_empty() {
                    pool.submit(std::mem::take(&mut batch));
                }
                if verdicts.is_empty() {
                    verdicts.extend(pool.next().unwrap_or_default());
                }
                let result = verdicts.pop_front();
                let (item, unreadable) = waiting.pop_front().unwrap_or((Waiting::End(None), 0));
                if let Some(stop) = self.settle(item, result, &mut last) {
                    self.skipped.unreadable += unreadable;
                    return (stop, last);
                }
            }
            // Leaving the scope drops the pool: the workers stop at their
            // next read, and are joined.
        })
    }

    /// Adds the entry the answer reached (with its file's result, for a
    /// searched one) and moves `last` past it; `Some` when the search ends
    /// there, with why it stopped (`None`: the walk is complete).
    fn settle(
        &mut self,
        item: Waiting,
        result: Option<FileResult>,
        last: &mut Position,
    ) -> Option<Option<TruncatedReason>> {
        match item {
            Waiting::Passed(relative) => {
                *last = Position { path: relative, line: None };
                None
            }
            Waiting::End(stop) => Some(stop),
            Waiting::Searched { relative, from_line, room } => {
                let root = self.root;
                let verdict = result.flatten().map(|scanned| match scanned {
                    // Given more room than is left, a file the worker could
                    // not read to the end (a line too long) may hold enough
                    // matches before that point: searched again here with
                    // the room a sequential search has.
                    Ok(Scanned::Unreadable) if room > self.room() => {
                        match RelPath::from_components(relative.split('/'))
                            .and_then(|p| root.locate_walked(p).ok())
                        {
                            Some(loc) => self.search_file(loc, from_line),
                            None => Ok(None),
                        }
                    }
                    Ok(scanned) => self.take(scanned, &|| format!("{}:/{relative}", root.name())),
                    Err(not_searched) => Err(not_searched),
                });
                match verdict {
                    Some(Ok(Some(reason))) => {
                        *last = Position { path: relative, line: Some(from_line) };
                        return Some(Some(reason));
                    }
                    Some(Err(not_searched)) => self.count(&not_searched),
                    Some(Ok(None)) | None => {}
                }
                *last = Position { path: relative, line: None };
                None
            }
        }
    }

    fn count(&mut self, not_searched: &NotSearched) {
        match not_searched {
            NotSearched::Gone(_) => {}
            NotSearched::Unreadable(_) => self.skipped.unreadable += 1,
            NotSearched::TooLarge(_) => self.skipped.too_large += 1,
            NotSearched::Binary(_) => self.skipped.binary += 1,
        }
    }

    /// The outcome of a search that stopped for `stop` (`None`: the end)
    /// with `last` dealt with.
    fn finish(
        mut self,
        stop: Option<TruncatedReason>,
        last: Position,
        key: QueryKey,
    ) -> SearchOutcome {
        self.matches.truncate(self.limit);
        let next_cursor = stop.map(|reason| {
            let at = match (reason, self.matches.last()) {
                // Resume right after the last line returned: the surplus
                // match may be further down the same file.
                (TruncatedReason::SearchLimitReached, Some(m)) => {
                    Position { path: m.path.clone(), line: Some(m.line) }
                }
                _ => last,
            };
            at.encode(key)
        });
        SearchOutcome {
            matches: self.matches,
            truncated_reason: stop,
            skipped: self.skipped,
            next_cursor,
        }
    }
}

/// Opens the file at `loc` (a regular file, within the size cap) and
/// scans it for at most `room` matches after line `from_line`; a raised
/// `abandon` flag stops the scan like the deadline does.
#[allow(clippy::too_many_arguments)]
fn search_one(
    root: &Root,
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    budget: &Budget,
    max_file_bytes: u64,
    loc: &Location<'_>,
    from_line: u64,
    room: usize,
    abandon: &AtomicBool,
) -> Result<Scanned, NotSearched> {
    let (file, meta) = root.open_file(loc).map_err(|e| match e.code() {
        ErrorCode::PathNotFound => NotSearched::Gone(e),
        _ => NotSearched::Unreadable(e),
    })?;
    if meta.size > max_file_bytes {
        return Err(NotSearched::TooLarge(FsError::new(
            ErrorCode::ReadLimitExceeded,
            format!(
                "{loc} is larger than the {max_file_bytes}-byte search limit (SERVERFS_SEARCH_MAX_FILE_BYTES); read it in pages with read_text_file."
            ),
        )));
    }
    let path = loc.path().as_relative();
    let file = Abandonable { inner: file.take(max_file_bytes), abandon };
    let reader = DeadlineReader::new(file, budget.deadline());
    Ok(scan(searcher, matcher, reader, &path, from_line, room))
}

/// A reader that fails once `abandon` is raised: a worker's file whose
/// verdict nobody needs any more (the answer is complete) stops at its
/// next read.
struct Abandonable<'a, R> {
    inner: R,
    abandon: &'a AtomicBool,
}

impl<R: Read> Read for Abandonable<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.abandon.load(Ordering::Relaxed) {
            return Err(io::Error::other("search abandoned"));
        }
        self.inner.read(buf)
    }
}

/// The searcher every file is scanned with: one per thread, reused.
fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        // No transcoding: a UTF-16 file is NUL-laden, hence binary, as
        // in read_text_file. A UTF-8 BOM is stripped from the snippet.
        .bom_sniffing(false)
        .heap_limit(Some(MAX_LINE_BYTES))
        .build()
}

/// The verdict on one file.
#[derive(Debug, PartialEq, Eq)]
enum Scanned {
    /// A text file and its matches (at most `room`).
    Text(Vec<TextMatch>),
    /// A NUL byte was read.
    Binary,
    /// A read failed, or a line is over [`MAX_LINE_BYTES`].
    Unreadable,
    /// The budget ran out inside the file.
    Stop(TruncatedReason),
}

/// Searches `reader` for at most `room` matching lines after line
/// `from_line`, then makes sure the file is text.
fn scan<R: Read>(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    reader: DeadlineReader<'_, R>,
    path: &str,
    from_line: u64,
    room: usize,
) -> Scanned {
    let mut reader = reader;
    let mut sink =
        FileSink { matcher, path, from_line, room, found: Vec::new(), full: false, binary: false };
    if let Err(err) = searcher.search_reader(matcher, &mut reader, &mut sink) {
        return if is_deadline_stop(&err) {
            Scanned::Stop(TruncatedReason::SearchTimeout)
        } else {
            Scanned::Unreadable
        };
    }
    if sink.binary {
        return Scanned::Binary;
    }
    if sink.full {
        // The searcher stopped early; the matches count only if no NUL
        // follows. Everything it read was already checked for NUL.
        match contains_nul(&mut reader) {
            Ok(false) => {}
            Ok(true) => return Scanned::Binary,
            Err(err) if is_deadline_stop(&err) => {
                return Scanned::Stop(TruncatedReason::SearchTimeout);
            }
            Err(_) => return Scanned::Unreadable,
        }
    }
    Scanned::Text(sink.found)
}

fn contains_nul<R: Read>(reader: &mut R) -> io::Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                if memchr::memchr(0, &buf[..n]).is_some() {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Collects one file's matches, held back until the file is known to be
/// text.
struct FileSink<'a> {
    matcher: &'a RegexMatcher,
    path: &'a str,
    /// Lines up to this one were returned by an earlier page.
    from_line: u64,
    room: usize,
    found: Vec<TextMatch>,
    full: bool,
    binary: bool,
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let line_number = mat.line_number().unwrap_or(0);
        if line_number <= self.from_line {
            return Ok(true);
        }
        let mut line = strip_terminator(mat.bytes());
        if line_number == 1 {
            line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        }
        let hit = match self.matcher.find(line) {
            Ok(Some(m)) => m.start()..m.end(),
            // Not expected (the searcher reported this line); show its head.
            _ => 0..0,
        };
        self.found.push(TextMatch {
            path: self.path.to_owned(),
            line: line_number,
            text: snippet(line, hit),
        });
        self.full = self.found.len() >= self.room;
        Ok(!self.full)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }

    fn finish(&mut self, _searcher: &Searcher, finish: &SinkFinish) -> Result<(), io::Error> {
        self.binary |= finish.binary_byte_offset().is_some();
        Ok(())
    }
}

fn strip_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// At most [`MAX_TEXT_BYTES`] of `line` around `hit`: the whole line when
/// it fits, otherwise a window centred on the match (starting at the match
/// when the match alone is longer), moved inwards to character boundaries.
fn snippet(line: &[u8], hit: Range<usize>) -> String {
    let window = if line.len() <= MAX_TEXT_BYTES {
        line
    } else {
        let hit = hit.start.min(line.len())..hit.end.min(line.len());
        let (mut s, mut e) = if hit.len() >= MAX_TEXT_BYTES {
            (hit.start, hit.start + MAX_TEXT_BYTES)
        } else {
            let before = (MAX_TEXT_BYTES - hit.len()) / 2;
            let s = hit.start.saturating_sub(before);
            let e = (s + MAX_TEXT_BYTES).min(line.len());
            (e.saturating_sub(MAX_TEXT_BYTES), e)
        };
        // A UTF-8 sequence has at most three continuation bytes; past that
        // the bytes are not UTF-8 anyway and get marked below.
        for _ in 0..3 {
            if s < e && is_continuation(line[s]) {
                s += 1;
            }
            if e < line.len() && e > s && is_continuation(line[e]) {
                e -= 1;
            }
        }
        &line[s..e]
    };
    match std::str::from_utf8(window) {
        Ok(text) => text.to_owned(),
        Err(_) => {
            // Marked, not silently dropped: U+FFFD takes 3 bytes where the
            // invalid byte took 1, so cut again to stay within the cap.
            let mut text = String::from_utf8_lossy(window).into_owned();
            if text.len() > MAX_TEXT_BYTES {
                let mut cut = MAX_TEXT_BYTES;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    fn run_scan(data: &[u8], query: &str, room: usize) -> Scanned {
        let matcher = build_matcher(query, true).unwrap();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .bom_sniffing(false)
            .heap_limit(Some(MAX_LINE_BYTES))
            .build();
        let budget = Budget::new(1, Duration::from_secs(60), Arc::new(AtomicBool::new(false)));
        scan(&mut searcher, &matcher, DeadlineReader::new(data, budget.deadline()), "f", 0, room)
    }

    fn lines(s: &Scanned) -> Vec<(u64, String)> {
        match s {
            Scanned::Text(v) => v.iter().map(|m| (m.line, m.text.clone())).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_match_per_line_without_terminators() {
        let s = run_scan(b"x\nab ab\r\nc\nab\n", "ab", 10);
        assert_eq!(lines(&s), vec![(2, "ab ab".to_owned()), (4, "ab".to_owned())]);
    }

    #[test]
    fn bom_is_not_part_of_the_text() {
        let s = run_scan(b"\xEF\xBB\xBFhello\n", "hello", 10);
        assert_eq!(lines(&s), vec![(1, "hello".to_owned())]);
    }

    #[test]
    fn binary_after_matches_discards_them() {
        let mut data = b"needle\n".repeat(10);
        data.extend(vec![b'x'; 300_000]);
        data.push(0);
        assert_eq!(run_scan(&data, "needle", 100), Scanned::Binary);
        // Also when the room is filled long before the NUL.
        assert_eq!(run_scan(&data, "needle", 2), Scanned::Binary);
        data.pop();
        assert_eq!(lines(&run_scan(&data, "needle", 2)).len(), 2);
    }

    #[test]
    fn overlong_line_skips_the_file() {
        let mut data = vec![b'a'; MAX_LINE_BYTES + 10];
        data.extend(b"needle\n");
        assert_eq!(run_scan(&data, "needle", 1), Scanned::Unreadable);
    }

    #[test]
    fn query_validation() {
        for bad in ["", "a\nb", "a\rb", "a\0b"] {
            assert_eq!(
                build_matcher(bad, true).unwrap_err().code(),
                ErrorCode::InvalidArgument,
                "{bad:?}"
            );
        }
        assert!(build_matcher(&"é".repeat(MAX_QUERY_CHARS), true).is_ok());
        assert!(build_matcher(&"é".repeat(MAX_QUERY_CHARS + 1), true).is_err());
    }

    #[test]
    fn snippet_short_line_is_whole() {
        assert_eq!(snippet(b"hello world", 6..11), "hello world");
    }

    #[test]
    fn snippet_centres_on_the_match_within_the_cap() {
        let mut line = "ä".repeat(1000).into_bytes(); // 2000 bytes, 2-byte chars
        let at = line.len();
        line.extend(b"NEEDLE");
        line.extend("ö".repeat(1000).into_bytes());
        let text = snippet(&line, at..at + 6);
        assert!(text.len() <= MAX_TEXT_BYTES && text.len() >= MAX_TEXT_BYTES - 2, "{}", text.len());
        assert!(text.contains("NEEDLE"));
        assert!(text.starts_with('ä') && text.ends_with('ö'));
        // Match at either end of a long line.
        let long = [b"NEEDLE".as_slice(), &[b'x'; 2000]].concat();
        assert!(snippet(&long, 0..6).starts_with("NEEDLE"));
        let long = [&[b'x'; 2000], b"NEEDLE".as_slice()].concat();
        assert!(snippet(&long, 2000..2006).ends_with("NEEDLE"));
    }

    #[test]
    fn snippet_of_a_huge_match_starts_at_it() {
        let line = [&[b'x'; 100], "é".repeat(600).as_bytes()].concat();
        let text = snippet(&line, 100..line.len());
        assert!(text.len() <= MAX_TEXT_BYTES);
        assert!(text.starts_with('é'));
    }

    #[test]
    fn invalid_utf8_is_marked() {
        assert_eq!(snippet(b"caf\xE9 needle", 5..11), "caf\u{FFFD} needle");
        let line = [&[0xE9u8; 1000], b"needle".as_slice(), &[0xE9u8; 1000]].concat();
        let text = snippet(&line, 1000..1006);
        assert!(text.len() <= MAX_TEXT_BYTES);
    }

    /// The timeout/cancel must hold inside one endless file.
    #[test]
    fn cancel_stops_inside_a_file() {
        let matcher = build_matcher("needle", true).unwrap();
        let mut searcher = SearcherBuilder::new().line_number(true).build();
        let flag = Arc::new(AtomicBool::new(false));
        let budget = Budget::new(1, Duration::from_secs(600), flag.clone());
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                flag.store(true, Ordering::Relaxed);
            })
        };
        let t = Instant::now();
        let endless = io::repeat(b'\n').take(u64::MAX);
        let out = scan(
            &mut searcher,
            &matcher,
            DeadlineReader::new(endless, budget.deadline()),
            "f",
            0,
            1,
        );
        assert_eq!(out, Scanned::Stop(TruncatedReason::SearchTimeout));
        assert!(t.elapsed() < Duration::from_secs(5));
        setter.join().unwrap();
    }
}
