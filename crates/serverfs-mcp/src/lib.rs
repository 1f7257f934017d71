//! `serverfs-mcp`, the read-only server: its configuration (flags, Docker
//! slots, `--workdir`), its rmcp handler (six read-only tools and the
//! `serverfs://{workdir}/{path}` resource template, built on
//! `serverfs-tools`), its HTTP app (built on `serverfs-transport`) and the
//! `healthcheck`/`selfcheck` subcommands. The binary is [`run`].

mod cli;
mod handler;
mod selfcheck;
mod slots;
pub mod uri;
pub mod wire;
pub mod workdirs;

pub use handler::{INSTRUCTIONS, ReadOnlyFs, ReadOnlyServer};
pub use workdirs::{Workdir, WorkdirError, WorkdirSpec, Workdirs};

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, HttpConfig};

/// The whole program: parse, validate, serve; the exit code to return.
pub fn run() -> ExitCode {
    let cli = Cli::parse_or_exit();
    match cli.command {
        Some(Command::Healthcheck) => {
            if serverfs_transport::probe_health(cli.listen, Duration::from_secs(2)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some(Command::Selfcheck) => {
            if selfcheck::run(&cli.workdirs_dir, &cli.workdirs) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        None => serve(&cli),
    }
}

fn config_error(line: &str) -> ExitCode {
    eprintln!("serverfs-mcp: config error: {line}");
    ExitCode::from(2)
}

fn serve(cli: &Cli) -> ExitCode {
    if let Err(e) = serverfs_transport::init_logging(&cli.log_level) {
        return config_error(&e);
    }
    let env = |key: &str| std::env::var(key).ok();
    let config = match cli.config(&env) {
        Ok(config) => config,
        Err(e) => return config_error(&e.to_string()),
    };
    if !cli.stdio {
        for warning in config.warnings() {
            tracing::warn!(event = "config_warning", message = %warning);
        }
    }
    let workdirs = match Workdirs::open(config.workdirs, config.policy) {
        Ok(workdirs) => workdirs,
        Err(e) => return config_error(&e.to_string()),
    };
    tracing::info!(
        event = "starting",
        workdirs = workdirs.workdirs().len(),
        resolver = ?workdirs.mode(),
        reopen_in_place = workdirs.reopens_in_place(),
        allow_hidden = workdirs.allow_hidden(),
        transport = if cli.stdio { "stdio" } else { "http" },
    );
    let fs = Arc::new(ReadOnlyFs::new(workdirs, config.limits));
    // Every admitted call holds one blocking thread; the rest is for stdio.
    let blocking_threads = config.concurrency.blocking_threads() + 4;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("serverfs-mcp: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        if cli.stdio {
            serverfs_transport::serve_stdio(ReadOnlyServer::new(fs, &config.concurrency)).await
        } else {
            let shutdown = CancellationToken::new();
            tokio::spawn(serverfs_transport::cancel_on_signal(shutdown.clone()));
            let server = ReadOnlyServer::new(fs, &config.concurrency);
            serve_http(server, config.http, shutdown).await
        }
    });
    // Blocking reads of a closed stdin must not hold the process open.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => {
            tracing::info!(event = "stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(event = "failed", error = %e);
            ExitCode::FAILURE
        }
    }
}

/// `/mcp` (behind the optional token) and `/healthz`, on the hardened accept
/// loop.
async fn serve_http(
    server: ReadOnlyServer,
    http: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    use serverfs_transport::{health_router, mcp_router, serve, with_header_checks};
    let mut mcp = mcp_router(move || server.clone(), &http.mcp, &shutdown);
    let auth = if let Some(token) = http.auth {
        // Added after the body limits, so it runs first: no body is read
        // for a stranger.
        mcp = mcp.route_layer(token);
        "bearer"
    } else {
        "none"
    };
    let app = with_header_checks(health_router().merge(mcp));
    let listener = tokio::net::TcpListener::bind(http.listen).await?;
    tracing::info!(event = "http_endpoint", endpoint = "/mcp", auth);
    serve(listener, app, &http.connections, shutdown).await
}
