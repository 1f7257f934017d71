//! Transport plumbing shared by the ServerFS binaries: stateless Streamable
//! HTTP at `/mcp` behind Host/Origin checks and a body cap, `GET /healthz`,
//! the bounded accept loop, the authentication layer (bearer tokens, and
//! any other [`Verify`] a binary brings), stdio, the
//! `healthcheck` probe, and flat JSON logs on stderr. Nothing here knows
//! which tools a binary serves or which host names it answers to: each
//! binary composes its own app from these pieces.
//!
//! Guarantees: HTTP is stateless (no session is created or required) and
//! answers JSON; a request with a foreign `Host` or `Origin` gets 403, a body
//! over the cap 413, anything else malformed a 4xx — and the server keeps
//! serving. Every path but `/mcp`, `/healthz` and the routes a binary adds
//! (serverfs-dev's `/files`, which guard themselves) is 404, which tells
//! OpenAI's tunnel-client that no OAuth is involved. Logs never go to stdout, which
//! carries the protocol under stdio.

mod auth;
mod cancel;
mod health;
mod http;
mod logging;
mod stdio_end;
mod task_name;

pub use auth::{Auth, BearerAuth, Principal, Refusal, RequireAuth, Verdict, Verify};
/// The router type binaries add their own routes with.
pub use axum::Router;
pub use cancel::{CANCEL_GRACE, ClientCancel, call_tool, with_client_cancel};
pub use health::probe_health;
pub use http::{
    ConnectionOptions, HttpConfig, ListenError, McpGuard, McpOptions, SHUTDOWN_GRACE,
    health_router, mcp_router, serve, serve_guarded_mcp, serve_mcp, with_header_checks,
};
pub use logging::{flush_logs, init_logging};

use tokio_util::sync::CancellationToken;

/// The multi-threaded runtime of a server whose admitted calls need at
/// most `blocking_threads` blocking threads (tokio's default of 512 is far
/// above what may run); a few more are kept for stdio.
///
/// # Errors
/// If the runtime cannot start.
pub fn runtime(blocking_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads + 4)
        .build()
}

/// Ends a server: shuts `runtime` down (a blocking read of a closed stdin
/// must not hold the process open), logs how serving ended, and gives the
/// exit code: 2 for an address that cannot be listened on (a
/// configuration error, [`ListenError`], said as [`config_error`] says
/// every other start-up error), 1 for other failures.
pub fn finish(
    program: &str,
    runtime: tokio::runtime::Runtime,
    served: std::io::Result<()>,
) -> std::process::ExitCode {
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    let code = match served {
        Ok(()) => {
            tracing::info!(event = "stopped");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => match e.get_ref().and_then(|inner| inner.downcast_ref::<ListenError>()) {
            Some(listen) => return config_error(program, &listen.to_string()),
            None => {
                tracing::error!(event = "failed", error = %e);
                std::process::ExitCode::FAILURE
            }
        },
    };
    flush_logs(std::time::Duration::from_secs(1));
    code
}

/// Ends start-up with a configuration error: the log lines queued so far,
/// then one plain line `<program>: config error: <line>` on stderr, exit
/// code 2. Never a panic if stderr is gone.
pub fn config_error(program: &str, line: &str) -> std::process::ExitCode {
    use std::io::Write;
    flush_logs(std::time::Duration::from_secs(1));
    let _ = writeln!(std::io::stderr(), "{program}: config error: {line}");
    std::process::ExitCode::from(2)
}

/// Cancels `shutdown` on SIGTERM or SIGINT (the HTTP server then drains).
pub async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!(event = "shutdown_signal");
    shutdown.cancel();
}

/// How long calls in flight when stdin ends may still finish: a script
/// that writes its requests and closes stdin still gets the quick answers.
pub const STDIN_END_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Serves one client on stdin/stdout until stdin closes.
///
/// stdin's end cancels every call still in flight [`STDIN_END_GRACE`]
/// later (a command's tree is killed): rmcp alone would wait up to 5 s for
/// answers the client has said it will not read.
///
/// # Errors
/// If the transport fails before the client is served.
pub async fn serve_stdio<S>(server: S) -> std::io::Result<()>
where
    S: rmcp::ServerHandler,
{
    use rmcp::ServiceExt;
    use rmcp::service::ServerInitializeError;
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let ended = CancellationToken::new();
    let stdin = stdio_end::CancelAtEnd::new(stdin, ended.clone());
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            ended.cancelled().await;
            tokio::time::sleep(STDIN_END_GRACE).await;
            stop.cancel();
        }
    });
    match server.serve_with_ct((stdin, stdout), stop).await {
        Ok(running) => running.waiting().await.map(drop).map_err(std::io::Error::other),
        // The client went away before saying anything: a normal end.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            Ok(())
        }
        Err(e) => Err(std::io::Error::other(e)),
    }
}
