//! Hostile connections over raw TCP: half-sent headers, idle keep-alive,
//! stalled and endlessly trickled bodies are cut; the connection cap stops
//! accepting and recovers; SIGTERM shuts down with connections open.
//!
//! Every assertion waits for an event (the server closing the socket, an
//! answer arriving) under a generous bound, never for a duration, so a busy
//! machine makes these tests slower, not flaky.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// Far beyond every timeout configured below.
const GENEROUS: Duration = Duration::from_secs(30);

fn start(extra: &[&str]) -> (HttpServer, Fixture) {
    let fx = Fixture::new();
    let workdir = fx.workdir_arg();
    let mut args = vec!["--workdir", &workdir];
    args.extend_from_slice(extra);
    (HttpServer::start(&args), fx)
}

fn connect(server: &HttpServer) -> TcpStream {
    let stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(GENEROUS)).unwrap();
    stream
}

/// Everything the server sends until it closes the connection; panics if it
/// is still open after [`GENEROUS`].
fn until_closed(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            // A reset is a close too (the server may drop unread input).
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("connection still open ({e}); got so far: {seen:?}"),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
const HEALTHZ_CLOSE: &[u8] =
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

#[test]
fn half_sent_headers_are_cut() {
    let (server, _fx) = start(&["--http-header-timeout-seconds", "1"]);
    let mut s = connect(&server);
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl").unwrap();
    let answer = until_closed(&mut s);
    assert!(!answer.contains(" 200 "), "{answer}");
    // a silent connection is cut the same way
    let mut s = connect(&server);
    until_closed(&mut s);
}

#[test]
fn idle_keep_alive_is_closed() {
    let (server, _fx) = start(&["--http-header-timeout-seconds", "1"]);
    let mut s = connect(&server);
    s.write_all(HEALTHZ).unwrap();
    let answer = until_closed(&mut s);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
}

#[test]
fn stalled_body_is_cut() {
    let (server, _fx) = start(&["--http-body-timeout-seconds", "1"]);
    let mut s = connect(&server);
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, text/event-stream\r\n\
          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":",
    )
    .unwrap();
    let answer = until_closed(&mut s);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[test]
fn endlessly_trickled_body_is_cut() {
    // One chunk every 200 ms never leaves a gap as long as the 1 s timeout:
    // only a deadline on the whole body stops it.
    let (server, _fx) = start(&["--http-body-timeout-seconds", "1"]);
    let mut s = connect(&server);
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, text/event-stream\r\n\
          Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let mut writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for _ in 0..(GENEROUS.as_millis() / 200) {
            if writer.write_all(b"1\r\n \r\n").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let answer = until_closed(&mut s);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    drop(s);
    trickle.join().unwrap();
}

#[test]
fn connection_cap_stops_accepting_and_recovers() {
    let (server, _fx) = start(&["--max-connections", "4", "--http-header-timeout-seconds", "600"]);
    // Four connections, each proven accepted and held idle (keep-alive).
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = connect(&server);
            s.write_all(HEALTHZ).unwrap();
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"HTTP/1.1 200");
            s
        })
        .collect();
    // A fifth is queued by the kernel but not served.
    let mut fifth = connect(&server);
    fifth.write_all(HEALTHZ_CLOSE).unwrap();
    fifth.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    let mut buf = [0u8; 1];
    match fifth.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("a fifth connection was served over the cap: {other:?}"),
    }
    // One held connection closes: the fifth is served.
    drop(held.pop());
    fifth.set_read_timeout(Some(GENEROUS)).unwrap();
    let answer = until_closed(&mut fifth);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // And /healthz answers new connections again.
    let mut again = connect(&server);
    again.write_all(HEALTHZ_CLOSE).unwrap();
    let answer = until_closed(&mut again);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn sigterm_stops_the_server_with_connections_open() {
    let (mut server, _fx) = start(&["--http-header-timeout-seconds", "600"]);
    let mut idle = connect(&server);
    idle.write_all(HEALTHZ).unwrap();
    let mut buf = [0u8; 12];
    idle.read_exact(&mut buf).unwrap();
    // A half-sent head keeps its connection busy: shutdown waits for it up to
    // the grace period (10 s), then returns anyway.
    let _half = {
        let mut s = connect(&server);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHo").unwrap();
        s
    };
    let status =
        std::process::Command::new("kill").args(["-TERM", &server.pid().to_string()]).status();
    assert!(status.unwrap().success());
    let deadline = std::time::Instant::now() + GENEROUS;
    let code = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(std::time::Instant::now() < deadline, "server still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    until_closed(&mut idle);
}
