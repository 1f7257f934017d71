//! A command that kills its own supervisor: with `adopt_orphans` the
//! server (this test process, alone in its binary because the subreaper flag
//! is process-wide) inherits the tree and kills it.

use crate::common;

use common::{assert_none, spec, tag};
use serverfs_core::ErrorCode;
use serverfs_exec::{adopt_orphans, run};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_kills_its_supervisor_leaves_nothing() {
    adopt_orphans().unwrap();
    let t = tag();
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "setsid sleep 300.{t} & ( (sleep 301.{t} &) & ); setsid bash -c 'sleep 302.{t} & sleep 303.{t}' & \
         sleep 0.3; kill -9 $PPID; sleep 304.{t}"
    );
    let e = run(spec(&command, dir.path()), &CancellationToken::new(), None).await.unwrap_err();
    // No status line: the supervisor was killed.
    assert_eq!(e.code(), ErrorCode::InternalError);
    assert_none(&t);
}
