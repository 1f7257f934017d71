//! `serverfs-dev`, the server a coding agent works in: one project root,
//! the shared read tools over it, read_file, write_file and apply_patch
//! (atomic, crash-safe), bash and shell sessions (nothing a call starts
//! outlives it), and signed file links, over stdio or stateless Streamable
//! HTTP behind a bearer token and/or Cloudflare Access.
//!
//! Start-up order is part of the contract: the configuration is checked,
//! the root opened, and any patch a crash interrupted is settled from the
//! journal in the state directory (wholly undone or wholly finished, and
//! logged) before the first call is served. The binary is [`run`].
//!
//! The code that confines commands is the code that was installed: the
//! supervisor is copied into sealed memory at start (replacing the file
//! later changes nothing for this server), and the server refuses to start
//! (exit 2) when its program or the supervisor beside it lies where
//! commands may write, where one could replace it before the next start.

mod cli;
mod handler;
mod local_token;
pub mod project;
mod tasks;

pub use handler::{DevServer, INSTRUCTIONS, SessionOwner};
pub use project::Project;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serverfs_core::{ConfigError, ErrorCode, Root, RootOptions, SymlinkRule};
use serverfs_exec::{Commands, ViewProbe};
use serverfs_tools::ReadTools;
use serverfs_transport::McpGuard;
use serverfs_write::{Writer, WriterConfig};
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Config};

/// How the root is named in messages (`project:/src/main.rs`).
const ROOT_NAME: &str = "project";

/// The hidden subcommand under which the binary is a command's supervisor
/// (see `serverfs-exec`).
pub const SUPERVISE: &str = "__supervise";

/// The supervisor program installed beside `serverfs-dev`.
pub const SUPERVISOR_PROGRAM: &str = "serverfs-dev-supervisor";

/// The supervisor every command runs under: [`SUPERVISOR_PROGRAM`] when it
/// is an executable file beside the server binary `exe` (a small program,
/// so a command starts sooner), else `exe` itself under the hidden
/// [`SUPERVISE`] subcommand (same code, the whole binary to load). Either
/// is copied into sealed memory now and started from there, so replacing
/// the file later (a command can, where it lies in a writable place) never
/// runs a command unconfined.
fn supervisor_beside(exe: std::path::PathBuf) -> std::io::Result<serverfs_exec::Supervisor> {
    let beside = exe.with_file_name(SUPERVISOR_PROGRAM);
    let runnable = beside.metadata().is_ok_and(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.is_file() && m.permissions().mode() & 0o111 != 0
    });
    tracing::info!(
        event = "supervisor",
        program = %if runnable { beside.display() } else { exe.display() },
    );
    if runnable {
        serverfs_exec::Supervisor::sealed(&beside, Vec::<std::ffi::OsString>::new())
    } else {
        serverfs_exec::Supervisor::sealed(&exe, [SUPERVISE])
    }
}

/// Refuses to start when this program or the supervisor beside it lies
/// where commands may write ([`Config::commands_may_write`]: below the
/// root, `/tmp`, `/dev/shm`, the commands' `TMPDIR` parent or a
/// `--command-writable` path): a command could replace it, and the next
/// start would run that, unconfined. The error names the place and the fix.
/// A program whose place cannot be told is refused too (fail closed).
fn check_programs_out_of_reach(config: &Config) -> Result<(), ConfigError> {
    let unknown = |program: &Path, e: std::io::Error| {
        ConfigError::named(
            program.display().to_string(),
            format!(
                "cannot tell whether this program lies where commands may write ({e}), so the server does not start"
            ),
        )
    };
    let exe = std::env::current_exe().map_err(|e| unknown(Path::new("serverfs-dev"), e))?;
    let beside = exe.with_file_name(SUPERVISOR_PROGRAM);
    let programs = std::iter::once(exe).chain(beside.exists().then_some(beside));
    let reach = config.commands_may_write(true);
    for program in programs {
        let reached =
            serverfs_write::program_reached(&program, &reach).map_err(|e| unknown(&program, e))?;
        if let Some(place) = reached {
            return Err(ConfigError::named(
                place,
                format!(
                    "the program {} lies below it, where commands may write: a command could replace it, and the next start would run that unconfined; install serverfs-dev where commands cannot write (e.g. /usr/local/bin), or build it there (CARGO_TARGET_DIR)",
                    program.file_name().unwrap_or_default().to_string_lossy()
                ),
            ));
        }
    }
    Ok(())
}

/// The whole program: parse, validate, recover, serve; the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse_or_exit();
    if let Err(e) = serverfs_transport::init_logging(&cli.log_level) {
        return config_error(&ConfigError::new("SERVERFS_LOG_LEVEL", e));
    }
    serverfs_settings::warn_if_root();
    let env = |key: &str| std::env::var(key).ok();
    let mut config = match cli.config(&env) {
        Ok(config) => config,
        Err(e) => return config_error(&e),
    };
    if config.root_was_relative {
        tracing::info!(
            event = "relative_path_resolved",
            setting = "SERVERFS_ROOT (--root)",
            message = "the path was relative: resolved against the working directory at start",
        );
    }
    serverfs_settings::warn_if_filesystem_root("SERVERFS_ROOT (--root)", &config.root);
    // Before anything reads like a good start (the supervisor, the root,
    // `starting`): an address in use is the first thing said.
    if !cli.stdio
        && let Err(e) = config.http.bind()
    {
        return serverfs_transport::config_error("serverfs-dev", &e.to_string());
    }
    if let (false, Some(egress)) = (cli.stdio, config.commands.egress.as_mut()) {
        // A command's proxy never leads back to this server's /mcp.
        egress.refuse_own(config.http.listen);
    }
    let supervisor = match std::env::current_exe().and_then(supervisor_beside) {
        Ok(supervisor) => supervisor,
        Err(e) => {
            eprintln!("serverfs-dev: cannot load the supervisor program: {e}");
            return ExitCode::FAILURE;
        }
    };
    let project = match open_project(&config, if cli.stdio { "stdio" } else { "http" }) {
        Ok(project) => Arc::new(project),
        Err(e) => return config_error(&e),
    };
    // After the root and its rendezvous (a root of `/` is refused there,
    // saying why), before any command.
    if let Err(e) = check_programs_out_of_reach(&config) {
        return config_error(&e);
    }
    // After the root (so a missing root is named as such), before any
    // command: every layer that confines commands, checked once.
    match serverfs_exec::check_confinement(&supervisor, config.commands.sandbox.as_mut()) {
        Ok(notices) => notices.iter().for_each(serverfs_exec::Notice::log),
        Err(e) => match e.setting() {
            Some(setting) => return config_error(&ConfigError::new(setting, e.to_string())),
            None => {
                eprintln!("serverfs-dev: {e}");
                return ExitCode::FAILURE;
            }
        },
    }
    // Published once the state dir is ready and the port known; removed
    // when the server ends.
    let _local_token = match publish_local_token(&config) {
        Ok(published) => published,
        Err(e) => return config_error(&e),
    };
    let runtime = match serverfs_transport::runtime(config.concurrency.blocking_threads()) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("serverfs-dev: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stdio = cli.stdio;
    let result = runtime.block_on(async move {
        let commands = Arc::new(Commands::new(supervisor, config.commands));
        let owner = if stdio { SessionOwner::Connection } else { SessionOwner::Http };
        let server =
            DevServer::new(Arc::clone(&project), Arc::clone(&commands), owner, &config.concurrency);
        let shutdown = CancellationToken::new();
        tokio::spawn(serverfs_transport::cancel_on_signal(shutdown.clone()));
        let tasks = server.clone();
        let served = if stdio {
            // SIGTERM/SIGINT end a stdio server cleanly too (exit 0).
            tokio::select! {
                served = serverfs_transport::serve_stdio(server) => served,
                () = shutdown.cancelled() => Ok(()),
            }
        } else {
            // File transfer: file_link and /files (HTTP only), guarded by
            // their signatures or the bearer token.
            let links = match serverfs_transfer::Links::new(config.links) {
                Ok(links) => Arc::new(links),
                Err(e) => {
                    commands.close_all().await;
                    return Err(std::io::Error::other(e));
                }
            };
            let server = server.with_file_links(Arc::clone(&links));
            let writer = Arc::clone(project.writer());
            let routes = serverfs_transfer::router(writer, links, config.http.auth.clone());
            let http = config.http;
            let guard = McpGuard::from(config.auth);
            let factory = move || server.clone();
            serverfs_transport::serve_guarded_mcp(factory, http, guard, routes, shutdown).await
        };
        tasks.shutdown_tasks();
        commands.close_all().await;
        served
    });
    let code = serverfs_transport::finish("serverfs-dev", runtime, result);
    // The runtime is gone with every command and the supervisor started
    // ahead (their TMPDIRs removed): their directory goes too.
    serverfs_exec::remove_tmpdir_parent();
    code
}

/// Writes this start's local token (if it has one) to the state dir and
/// says where, with a WARN where commands could read it there.
fn publish_local_token(config: &Config) -> Result<Option<local_token::Published>, ConfigError> {
    let (Some(token), Some(address)) = (&config.local_token, config.http.bound_address()) else {
        return Ok(None);
    };
    let published = token
        .publish(&config.state_dir, address.port())
        .map_err(|e| ConfigError::named(&config.state_dir_named, format!("local token: {e}")))?;
    tracing::info!(
        event = "local_token",
        file = %published.path().display(),
        message = "no credential is configured: /mcp admits the token in this file (Authorization: Bearer, or ?token= in the URL), drawn for this start",
    );
    let view = config.commands.sandbox.as_ref().and_then(|s| s.view);
    if !matches!(view, Some(ViewProbe::Own | ViewProbe::OwnWithProc)) {
        tracing::warn!(
            event = "config_warning",
            message = "commands get no view of their own here (or no sandbox), so they can read the local token's file and call this server's /mcp: configure SERVERFS_TOKEN (commands get a cleared environment and cannot read the server's), or narrow their reads (--command-readable)",
        );
    }
    Ok(Some(published))
}

fn config_error(e: &ConfigError) -> ExitCode {
    serverfs_transport::config_error("serverfs-dev", &e.to_string())
}

/// Opens the root, settles what a crash left (logged), and builds the
/// project. Errors name the setting, never a host path or the OS's text.
fn open_project(config: &Config, transport: &str) -> Result<Project, ConfigError> {
    let options =
        RootOptions::new(ROOT_NAME, config.policy.clone()).symlinks(SymlinkRule::FollowWithinRoot);
    let root = Root::open(&config.root, options)
        .map_err(|e| ConfigError::new("SERVERFS_ROOT", e.to_string()))?;
    // The rendezvous first: a root that contains it (`/`, `/var`) cannot
    // be served whatever the state dir, and its error says so.
    let base = Path::new(serverfs_write::RENDEZVOUS_BASE);
    serverfs_write::prepare_rendezvous(base, &config.out_of_reach(false))?;
    serverfs_write::prepare_state_dir(
        &config.state_dir_named,
        &config.state_dir,
        &config.out_of_reach(true),
    )?;
    serverfs_write::check_root_record("SERVERFS_ROOT", &config.state_dir, &config.root)?;
    let writer_config = WriterConfig::new(&config.root, &config.state_dir)
        .rendezvous(base)
        .max_file_bytes(config.max_file_bytes);
    let (writer, recovery) =
        Writer::open(Arc::new(root), writer_config).map_err(|e| match e.code() {
            // Another user's server on this root: a fact about the root.
            ErrorCode::ServerBusy => ConfigError::new("SERVERFS_ROOT", e.message()),
            _ => ConfigError::named(&config.state_dir_named, e.to_string()),
        })?;
    for settled in &recovery.recovered {
        tracing::warn!(
            event = "patch_recovered",
            txid = %settled.txid,
            outcome = ?settled.outcome,
            paths = ?settled.paths,
        );
    }
    for kept in &recovery.kept {
        tracing::warn!(event = "journal_kept", detail = %kept);
    }
    for journal in &recovery.foreign {
        tracing::info!(event = "journal_of_another_root_left_alone", journal = %journal);
    }
    tracing::info!(
        event = "starting",
        root = %config.root.display(),
        transport,
        recovered = recovery.recovered.len(),
        resolver = ?writer.root().mode(),
        max_file_bytes = config.max_file_bytes,
    );
    Ok(Project::new(Arc::new(writer), ReadTools::new(config.limits.clone()), config.max_file_bytes))
}
