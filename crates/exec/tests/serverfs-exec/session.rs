//! Shell sessions against real shells.

use crate::common;

use std::time::{Duration, Instant};

use common::{assert_none, supervisor, tag, wait_alive, wait_gone};
use serverfs_core::ErrorCode;
use serverfs_exec::{Owner, ReadOutput, SessionConfig, Sessions};
use tokio_util::sync::CancellationToken;

fn sessions(cfg: impl FnOnce(&mut SessionConfig)) -> Sessions {
    let mut c = SessionConfig::new(supervisor());
    cfg(&mut c);
    Sessions::new(c)
}

fn me() -> Owner {
    Owner::new("stdio")
}

/// Reads from `offset` until `needle` is in the collected output or the
/// shell exits; returns the text and the last answer.
async fn read_until(s: &Sessions, id: &str, mut offset: u64, needle: &str) -> (String, ReadOutput) {
    let start = Instant::now();
    let mut text = String::new();
    loop {
        let r = s.read(&me(), id, offset, 2_000, &CancellationToken::new()).await.unwrap();
        assert!(r.next_offset >= r.offset);
        text.push_str(&r.output);
        offset = r.next_offset;
        if text.contains(needle) || (r.exited && !r.more) {
            return (text, r);
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no {needle:?} in {text:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn state_persists_within_a_session_and_output_is_merged() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    s.write(&me(), &id, "cd /; X=42\n").await.unwrap();
    s.write(&me(), &id, "echo \"$PWD $X\"; echo to-stderr >&2; echo END\n").await.unwrap();
    let (text, r) = read_until(&s, &id, 0, "END").await;
    assert_eq!(text, "/ 42\nto-stderr\nEND\n");
    assert_eq!(r.next_offset, text.len() as u64);
    assert!(!r.exited);
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_code_is_reported() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, "echo bye; exit 3\n").await.unwrap();
    let (text, r) = read_until(&s, &id, 0, "\u{0}never").await;
    assert_eq!(text, "bye\n");
    assert!(r.exited);
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.signal, None);
    let e = s.write(&me(), &id, "echo again\n").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shell_killed_by_a_signal_reports_it_and_leaves_nothing() {
    let t = tag();
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, &format!("setsid sleep 300.{t} &\necho started\n")).await.unwrap();
    read_until(&s, &id, 0, "started").await;
    wait_alive(&t).await;
    s.write(&me(), &id, "kill -9 $$\n").await.unwrap();
    let (_, r) = read_until(&s, &id, 0, "\u{0}never").await;
    assert!(r.exited);
    assert_eq!(r.exit_code, None);
    assert_eq!(r.signal.as_deref(), Some("SIGKILL"));
    // The supervisor killed the rest of the tree when bash died.
    assert_none(&t);
    let listed = s.list(&me());
    assert_eq!(listed.len(), 1);
    assert!(listed[0].exited);
    assert_eq!(listed[0].signal.as_deref(), Some("SIGKILL"));
}

#[tokio::test(flavor = "multi_thread")]
async fn close_kills_the_whole_tree() {
    let t = tag();
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(
        &me(),
        &id,
        &format!(
            "sleep 300.{t} &\nsetsid sleep 301.{t} &\n( (sleep 302.{t} &) & )\nnohup sleep 303.{t} >/dev/null 2>&1 &\necho started\n"
        ),
    )
    .await
    .unwrap();
    read_until(&s, &id, 0, "started").await;
    for n in 300..=303 {
        wait_alive(&format!("{n}.{t}")).await;
    }
    // A command in the foreground too.
    s.write(&me(), &id, &format!("sleep 304.{t}\n")).await.unwrap();
    wait_alive(&format!("304.{t}")).await;
    let info = s.close(&me(), &id).await.unwrap();
    assert!(info.exited);
    assert_none(&t);
    assert!(s.list(&me()).is_empty());
    let e = s.read(&me(), &id, 0, 0, &CancellationToken::new()).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn offsets_stay_right_across_a_trimmed_buffer() {
    let s = sessions(|c| {
        c.buffer_cap = 1000;
        c.max_read = 300;
    });
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    // 5000 bytes of 'x', then a marker: the first 4000+ bytes are dropped.
    s.write(&me(), &id, "head -c 5000 /dev/zero | tr '\\0' x; echo; echo END\n").await.unwrap();
    // Wait until all of it is buffered.
    let start = Instant::now();
    loop {
        if s.list(&me())[0].end_offset == 5005 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = s.read(&me(), &id, 10, 0, &CancellationToken::new()).await.unwrap();
    // Asked for 10, got the buffer's start: 5005 - 1000.
    assert_eq!(r.offset, 4005);
    assert_eq!(r.dropped, 3995);
    assert_eq!(r.output.len(), 300);
    assert_eq!(r.next_offset, 4305);
    assert!(r.more);
    // Continuing from next_offset is exact, and reaches the end.
    let (text, last) = read_until(&s, &id, r.next_offset, "END").await;
    assert_eq!(last.next_offset, 5005);
    assert_eq!(text, format!("{}\nEND\n", "x".repeat(5000 - 4305)));
    // An offset inside the buffer is honoured as is.
    let r = s.read(&me(), &id, 5000, 0, &CancellationToken::new()).await.unwrap();
    assert_eq!((r.offset, r.dropped, r.output.as_str()), (5000, 0, "\nEND\n"));
    // Past the end is an error.
    let e = s.read(&me(), &id, 6000, 0, &CancellationToken::new()).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_never_split_a_character() {
    let s = sessions(|c| c.max_read = 1001);
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, "printf 'é%.0s' $(seq 1 3000); echo END\n").await.unwrap();
    let start = Instant::now();
    let mut offset = 0;
    let mut text = String::new();
    while !text.ends_with("END\n") {
        let r = s.read(&me(), &id, offset, 2_000, &CancellationToken::new()).await.unwrap();
        assert!(!r.output.contains('\u{FFFD}'), "split at {offset}");
        assert_eq!(r.next_offset - r.offset, r.output.len() as u64);
        offset = r.next_offset;
        text.push_str(&r.output);
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    assert_eq!(text, format!("{}END\n", "é".repeat(3000)));
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_read_waits_for_output_and_is_cancellable() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    // Cancelled: returns with nothing, long before the 50 s wait.
    let token = CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        t2.cancel();
    });
    let start = Instant::now();
    let r = s.read(&me(), &id, 0, serverfs_exec::MAX_WAIT_MS, &token).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!((r.output.as_str(), r.next_offset, r.exited), ("", 0, false));
    // Woken by output that arrives while waiting.
    let s2 = s.clone();
    let id2 = id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        s2.write(&me(), &id2, "echo late\n").await.unwrap();
    });
    let r =
        s.read(&me(), &id, 0, serverfs_exec::MAX_WAIT_MS, &CancellationToken::new()).await.unwrap();
    assert_eq!(r.output, "late\n");
    assert!(s.read(&me(), &id, 0, serverfs_exec::MAX_WAIT_MS + 1, &token).await.is_err());
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn another_owner_cannot_touch_a_session() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    let other = Owner::new("mcp-session-b");
    let cancel = CancellationToken::new();
    let unknown = "0".repeat(32);
    let wrong_owner = s.read(&other, &id, 0, 0, &cancel).await.unwrap_err();
    let wrong_id = s.read(&me(), &unknown, 0, 0, &cancel).await.unwrap_err();
    assert_eq!(wrong_owner, wrong_id, "the errors must not reveal that the session exists");
    assert_eq!(s.write(&other, &id, "echo x\n").await.unwrap_err(), wrong_id);
    assert_eq!(s.close(&other, &id).await.unwrap_err(), wrong_id);
    assert!(s.list(&other).is_empty());
    // Still alive and usable by its owner.
    s.write(&me(), &id, "echo mine\n").await.unwrap();
    let (text, _) = read_until(&s, &id, 0, "mine").await;
    assert_eq!(text, "mine\n");
    assert_eq!(s.list(&me()).len(), 1);
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn session_count_is_capped() {
    let s = sessions(|c| {
        c.max_per_owner = 2;
        c.max_sessions = 3;
    });
    let dir = tempfile::tempdir().unwrap();
    let a = s.open(&me(), dir.path(), None).unwrap();
    let _b = s.open(&me(), dir.path(), None).unwrap();
    let e = s.open(&me(), dir.path(), None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ServerBusy);
    let other = Owner::new("other");
    let _c = s.open(&other, dir.path(), None).unwrap();
    let e = s.open(&Owner::new("third"), dir.path(), None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ServerBusy);
    s.close(&me(), &a).await.unwrap();
    s.open(&me(), dir.path(), None).unwrap();
    s.close_all().await;
    assert!(s.list(&me()).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_are_reaped_with_their_tree() {
    let t = tag();
    // Idle long enough for a busy machine to start the tree below; the
    // test does not wait on that clock otherwise.
    let s = sessions(|c| c.idle_timeout = Duration::from_secs(5));
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    // The shell says "up" once the survivor-to-be runs (its cmdline holds
    // the tag); reading that is activity, so the idle clock starts after.
    let up = format!(
        "setsid sleep 300.{t} & until tr '\\0' ' ' </proc/$!/cmdline | grep -q 300.{t}; do :; done; echo up\n"
    );
    s.write(&me(), &id, &up).await.unwrap();
    read_until(&s, &id, 0, "up").await;
    wait_alive(&t).await;
    // The background reaper closes it once it has been idle long enough.
    wait_gone(&t).await;
    assert!(s.list(&me()).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_registry_kills_every_session() {
    let t = tag();
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, &format!("( (sleep 300.{t} &) & )\nsleep 301.{t}\n")).await.unwrap();
    wait_alive(&format!("301.{t}")).await;
    wait_alive(&format!("300.{t}")).await;
    drop(s);
    wait_gone(&t).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_environment_is_minimal() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, "env | grep -c '^CARGO' ; echo END\n").await.unwrap();
    let (text, _) = read_until(&s, &id, 0, "END").await;
    assert_eq!(text, "0\nEND\n");
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn close_works_while_the_shell_does_not_read_its_input() {
    let t = tag();
    let s = sessions(|c| {
        c.max_input = 4 << 20;
        c.write_timeout = Duration::from_millis(500);
    });
    let dir = tempfile::tempdir().unwrap();
    let id = s.open(&me(), dir.path(), None).unwrap();
    s.write(&me(), &id, &format!("sleep 300.{t}\n")).await.unwrap();
    wait_alive(&t).await;
    // The shell is busy: 4 MiB of input fill every buffer on the way and
    // the write gives up.
    let e = s.write(&me(), &id, &"x".repeat(4 << 20)).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
    // The supervisor may be stuck handing input to the shell; close still
    // ends the whole tree (SIGTERM goes out with the end of file).
    let info = s.close(&me(), &id).await.unwrap();
    assert!(info.exited);
    assert_none(&t);
}

/// `while [ ! -e GATE ]`: a command that waits for the test, not a clock.
fn wait_for(gate: &std::path::Path) -> String {
    format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_yielded_command_goes_on_as_its_owner_s_session() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("go");
    let command = format!("echo first; echo oops >&2; {}; echo rest; exit 3", wait_for(&gate));
    let cancel = CancellationToken::new();
    let spec = common::spec(&command, dir.path());
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    assert!(out.running, "{out:?}");
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("first\n", "oops\n"));
    assert_eq!((out.exit_code, out.next_offset), (None, Some(11)));
    let id = out.session_id.clone().unwrap();
    // The call's cancellation no longer reaches it once it has yielded.
    cancel.cancel();
    // Not another owner's, and it takes no input.
    let other = Owner::new("other");
    let unknown = s.read(&me(), &"0".repeat(32), 0, 0, &cancel).await.unwrap_err();
    assert_eq!(s.read(&other, &id, 0, 0, &cancel).await.unwrap_err(), unknown);
    assert_eq!(s.close(&other, &id).await.unwrap_err(), unknown);
    let e = s.write(&me(), &id, "echo x\n").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert_eq!(s.list(&me()).len(), 1);
    std::fs::write(&gate, "").unwrap();
    let (text, r) = read_until(&s, &id, 11, "never printed").await;
    assert_eq!(text, "rest\n");
    assert_eq!((r.exited, r.exit_code, r.signal), (true, Some(3), None));
    // Offset 0 is the command's first byte: both streams, merged.
    let all = s.read(&me(), &id, 0, 0, &CancellationToken::new()).await.unwrap();
    assert_eq!((all.output.len(), all.next_offset), (16, 16));
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_character_split_at_the_yield_point_is_read_whole_from_the_session() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("go");
    // "é" is C3 A9: its first byte comes before the yield, its second after.
    let command = format!(r"printf 'a\303'; {}; printf '\251\n'", wait_for(&gate));
    let spec = common::spec(&command, dir.path());
    let out = s.run(&me(), spec, Duration::from_secs(1), &CancellationToken::new(), None).await;
    let out = out.unwrap();
    assert!(out.running, "{out:?}");
    assert_eq!((out.stdout.as_str(), out.next_offset), ("a", Some(1)));
    std::fs::write(&gate, "").unwrap();
    let id = out.session_id.unwrap();
    let (text, _) = read_until(&s, &id, 1, "\n").await;
    assert_eq!(text, "é\n");
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_yielded_command_still_times_out_and_leaves_nothing() {
    let t = tag();
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let mut spec = common::spec(&format!("sleep 300.{t} & setsid sleep 300.{t}"), dir.path());
    spec.timeout_seconds = 2;
    let cancel = CancellationToken::new();
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    assert!(out.running, "{out:?}");
    let id = out.session_id.unwrap();
    let (_, r) = read_until(&s, &id, 0, "never printed").await;
    assert_eq!((r.exited, r.exit_code, r.signal.as_deref()), (true, None, Some("SIGKILL")));
    assert_none(&t);
    s.close(&me(), &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_or_dropping_a_yielded_command_kills_its_tree() {
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let t = tag();
    let spec = common::spec(&format!("sleep 300.{t} & setsid sleep 300.{t}"), dir.path());
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    let id = out.session_id.unwrap();
    wait_alive(&t).await;
    let info = s.close(&me(), &id).await.unwrap();
    assert!(info.exited && info.signal.is_some(), "{info:?}");
    assert_none(&t);
    // The registry going away (shutdown) kills a yielded command too.
    let t = tag();
    let spec = common::spec(&format!("sleep 300.{t}"), dir.path());
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    assert!(out.running);
    wait_alive(&t).await;
    drop(s);
    wait_gone(&t).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_room_for_a_session_a_command_runs_to_its_end() {
    let s = sessions(|c| c.max_per_owner = 1);
    let dir = tempfile::tempdir().unwrap();
    let shell = s.open(&me(), dir.path(), None).unwrap();
    let cancel = CancellationToken::new();
    // Outlasts the yield point by a second (a command's own clock).
    let spec = common::spec("sleep 2; echo done", dir.path());
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    assert_eq!((out.running, out.exit_code, out.stdout.as_str()), (false, Some(0), "done\n"));
    assert_eq!(out.session_id, None);
    s.close(&me(), &shell).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_yield_point_at_the_timeout_never_comes() {
    let t = tag();
    let s = sessions(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let mut spec = common::spec(&format!("sleep 300.{t}"), dir.path());
    spec.timeout_seconds = 1;
    let cancel = CancellationToken::new();
    let out = s.run(&me(), spec, Duration::from_secs(1), &cancel, None).await.unwrap();
    assert_eq!((out.running, out.timed_out, out.session_id), (false, true, None));
    assert!(s.list(&me()).is_empty());
    assert_none(&t);
}
