//! The forged-status attack: a command copies its supervisor's control
//! socket with `pidfd_getfd`, writes `exit 0` on it, SIGKILLs the
//! supervisor and leaves a `setsid sleep` behind. With `adopt_orphans`
//! (this test process is the "server", alone in its binary because the
//! subreaper flag is process-wide) nothing may survive, and the forged line
//! must not be believed. Without a sandbox the attack itself works (we run
//! as root here, or the same user); inside the sandbox it does not even
//! reach the supervisor.

use crate::common;

use common::{assert_none, spec, supervisor, tag, wait_alive};
use serverfs_core::ErrorCode;
use serverfs_exec::{Owner, SandboxConfig, SessionConfig, Sessions, adopt_orphans, run};
use tokio_util::sync::CancellationToken;

/// The attack script (shared with serverfs-dev's end-to-end test).
const FORGE: &str = include_str!("../forge.py");

/// Leaves `setsid sleep 300.<t>`, attacks the supervisor (bash's parent),
/// then runs `sleep 301.<t>` in the foreground.
fn attack(t: &str) -> String {
    format!("setsid sleep 300.{t} & /usr/bin/python3 -c '{FORGE}' $PPID; sleep 301.{t}")
}

fn sandbox(root: &std::path::Path) -> SandboxConfig {
    SandboxConfig::new(root)
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_status_after_bash_leaves_no_survivor_and_is_not_believed() {
    adopt_orphans().unwrap();

    // Unsandboxed: the attack reaches the supervisor; the server still
    // sweeps and does not believe the forged line.
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let e = run(spec(&attack(&t), dir.path()), &CancellationToken::new(), None).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InternalError, "{e:?}");
    assert_none(&t);

    // Sandboxed: pidfd_getfd is refused; the command goes on to the end
    // (killed by the timeout) and reports truthfully.
    let t = tag();
    let mut s = spec(&attack(&t), dir.path());
    s.sandbox = Some(sandbox(dir.path()));
    s.timeout_seconds = 3;
    let out = run(s, &CancellationToken::new(), None).await.unwrap();
    assert!(out.stdout.contains("pidfd_getfd failed"), "{out:?}");
    assert!(out.stdout.contains("kill failed"), "{out:?}");
    assert!(out.timed_out, "{out:?}");
    assert_none(&t);

    // The same in a shell session, closed by shell_close.
    for sandboxed in [false, true] {
        let t = tag();
        let mut cfg = SessionConfig::new(supervisor());
        if sandboxed {
            cfg.sandbox = Some(sandbox(dir.path()));
        }
        let sessions = Sessions::new(cfg);
        let owner = Owner::new("o");
        let id = sessions.open(&owner, dir.path(), None).unwrap();
        // In a session, bash's parent is the supervisor.
        sessions.write(&owner, &id, &format!("{}\n", attack(&t))).await.unwrap();
        if sandboxed {
            wait_alive(&format!("301.{t}")).await;
        } else {
            // The forged supervisor is gone: the session ends by itself.
            let mut offset = 0;
            loop {
                let r = sessions
                    .read(&owner, &id, offset, 30_000, &CancellationToken::new())
                    .await
                    .unwrap();
                offset = r.next_offset;
                if r.exited {
                    assert_eq!((r.exit_code, r.signal), (None, None), "forged status believed");
                    break;
                }
            }
        }
        let info = sessions.close(&owner, &id).await.unwrap();
        assert!(info.exited);
        assert_none(&t);
    }
}
