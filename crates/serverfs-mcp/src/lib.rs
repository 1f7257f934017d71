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

use serverfs_core::ConfigError;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command};

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

fn config_error(e: &ConfigError) -> ExitCode {
    serverfs_transport::config_error("serverfs-mcp", &e.to_string())
}

fn serve(cli: &Cli) -> ExitCode {
    if let Err(e) = serverfs_transport::init_logging(&cli.log_level) {
        return config_error(&ConfigError::new("SERVERFS_LOG_LEVEL", e));
    }
    serverfs_settings::warn_if_root();
    let env = |key: &str| std::env::var(key).ok();
    let mut config = match cli.config(&env) {
        Ok(config) => config,
        Err(e) => return config_error(&e),
    };
    if !cli.stdio {
        for warning in config.warnings() {
            tracing::warn!(event = "config_warning", message = %warning);
        }
        // Before anything reads like a good start.
        if let Err(e) = config.http.bind() {
            return serverfs_transport::config_error("serverfs-mcp", &e.to_string());
        }
    }
    for spec in &config.workdirs {
        serverfs_settings::warn_if_filesystem_root(&spec.origin, &spec.host_path);
    }
    for spec in config.workdirs.iter().filter(|s| s.relative) {
        tracing::info!(
            event = "relative_path_resolved",
            workdir = %spec.alias,
            message = "the path was relative: resolved against the working directory at start",
        );
    }
    let workdirs = match Workdirs::open(config.workdirs, config.policy) {
        Ok(workdirs) => workdirs,
        Err(e) => return config_error(&e.into()),
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
    let runtime = match serverfs_transport::runtime(config.concurrency.blocking_threads()) {
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
            let routes = serverfs_transport::Router::new();
            serverfs_transport::serve_mcp(move || server.clone(), config.http, routes, shutdown)
                .await
        }
    });
    serverfs_transport::finish("serverfs-mcp", runtime, result)
}
