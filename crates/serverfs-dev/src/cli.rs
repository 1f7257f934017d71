//! Command line and environment: every setting is a `--flag` with an
//! environment-variable fallback; the flag wins. The settings shared with
//! serverfs-mcp (read limits, admission, HTTP hardening, the token) come
//! from `serverfs-settings` and mean the same thing here.
//!
//! Guarantees: the configuration is parsed and checked once, before
//! anything is served; a bad value is one line naming the setting and exit
//! 2. serverfs-dev never listens beyond loopback without authentication
//! (a bearer token and/or Cloudflare Access),
//! and its state directory (the patch journal) and the servers' rendezvous
//! (each root's commit lock, in `/var/tmp`, whatever `HOME` says) are
//! never below a path its commands can reach (see [`Config::out_of_reach`]).
//! `HOME` and `XDG_STATE_HOME` matter only for the default state directory,
//! and an error about that default names it and where it came from.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use serverfs_auth::AccessSettings;
use serverfs_core::config::tilde_hint;
use serverfs_core::{ConfigError, Policy};
use serverfs_settings::{HttpSettings, ReadSettings};
use serverfs_tools::{Concurrency, Limits};
use serverfs_transport::{Auth, HttpConfig};

use crate::local_token::LocalToken;

/// Host names `/mcp` answers to unless configured.
const DEFAULT_ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// Paths no file tool of serverfs-dev serves, beside the built-in
/// credential rules: `.git` internals at any depth (use `git` through a
/// command), and the writer's temporaries and backups, which exist only
/// while a write is in flight.
const WORKING_TREE_DENY_GLOBS: &[&str] = &[".git/**", ".serverfs-tmp-*", ".serverfs-bak-*"];

/// ServerFS dev: an MCP server that lets a coding agent read, patch and
/// write files, run commands and move large files in one project root.
#[derive(Debug, Parser)]
#[command(name = "serverfs-dev", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The project root every path is relative to.
    #[arg(long, env = "SERVERFS_ROOT", value_name = "DIR")]
    pub(crate) root: PathBuf,

    /// HTTP listen address (endpoint /mcp). Loopback only unless authentication (token or Cloudflare Access) is configured.
    #[arg(long, env = "SERVERFS_LISTEN", value_parser = serverfs_settings::listen_address, default_value = "127.0.0.1:8790")]
    pub(crate) listen: SocketAddr,

    /// Serve one client on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub(crate) stdio: bool,

    /// Where the patch journal lives: never inside the root, /tmp or any path commands may write (or, with --command-readable, read). Default:
    /// $XDG_STATE_HOME/serverfs-dev, else ~/.local/state/serverfs-dev.
    #[arg(long, env = "SERVERFS_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// TRACE, DEBUG, INFO, WARN or ERROR.
    #[arg(long, env = "SERVERFS_LOG_LEVEL", default_value = "INFO")]
    pub(crate) log_level: String,

    /// Largest file read_file reads and write_file/apply_patch write or replace, in bytes.
    #[arg(long, env = "SERVERFS_MAX_FILE_BYTES", default_value_t = serverfs_write::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,

    /// bash and shell sessions: policy, cap, sandbox, audit text.
    #[command(flatten)]
    commands: serverfs_exec::CommandSettings,

    #[command(flatten)]
    read: ReadSettings,

    #[command(flatten)]
    http: HttpSettings,

    #[command(flatten)]
    access: AccessSettings,

    /// File transfer (file_link, /files).
    #[command(flatten)]
    links: serverfs_transfer::LinkSettings,
}

/// Everything the server needs, validated.
#[derive(Debug)]
pub(crate) struct Config {
    /// Absolute: a relative `--root` is resolved against the working
    /// directory at start.
    pub(crate) root: PathBuf,
    /// `--root` was given as a relative path (logged once, without it).
    pub(crate) root_was_relative: bool,
    pub(crate) state_dir: PathBuf,
    /// How errors about the state dir name it: the setting, or the
    /// default with where it came from and how to choose another.
    pub(crate) state_dir_named: String,
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) max_file_bytes: u64,
    pub(crate) concurrency: Concurrency,
    pub(crate) commands: serverfs_exec::CommandConfig,
    pub(crate) http: HttpConfig,
    /// Who may call /mcp: the bearer token and/or Cloudflare Access, or
    /// the local token.
    pub(crate) auth: Option<Auth>,
    /// Over HTTP without a configured credential: this start's token.
    pub(crate) local_token: Option<LocalToken>,
    pub(crate) links: serverfs_transfer::LinkConfig,
}

/// How errors name an explicit state dir.
const STATE_DIR: &str = "SERVERFS_STATE_DIR (--state-dir)";

/// How [`Config::out_of_reach`] names the commands' `TMPDIR` parent.
const TMPDIR_PARENT: &str = "the commands' TMPDIR parent ($TMPDIR)";

impl Cli {
    /// Parses flags and environment; a bad value is one line and exit 2.
    pub(crate) fn parse_or_exit() -> Self {
        serverfs_settings::parse_or_exit("serverfs-dev")
    }

    /// Validates every setting; `env` looks up environment variables.
    pub(crate) fn config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let limits = self.read.limits()?;
        let concurrency = self.read.concurrency()?;
        let mut globs: Vec<String> =
            WORKING_TREE_DENY_GLOBS.iter().map(|g| (*g).to_owned()).collect();
        globs.extend(self.read.extra_deny_globs());
        let policy = Policy::new(true, &globs)
            .map_err(|e| ConfigError::new("SERVERFS_EXTRA_DENY_GLOBS", e))?;
        if self.max_file_bytes == 0 {
            return Err(ConfigError::new("SERVERFS_MAX_FILE_BYTES", "must be at least 1"));
        }
        // The bearer token stays in `http` too: /files accepts it beside
        // link signatures.
        let mut http = self.http.config(self.listen, DEFAULT_ALLOWED_HOSTS, env)?;
        let access = self.access.verifier()?;
        if !self.stdio {
            let configured = http.auth.is_some() || access.is_some();
            serverfs_auth::require_auth_for_listen(self.listen, configured)?;
        }
        // On loopback without a configured credential: a token of this
        // start's own (see the local_token module).
        let local_token = if self.stdio || http.auth.is_some() || access.is_some() {
            None
        } else {
            let token = LocalToken::draw().map_err(|e| {
                ConfigError::new("SERVERFS_LISTEN", format!("cannot draw the local token: {e}"))
            })?;
            http.auth = Some(token.auth());
            Some(token)
        };
        let auth = serverfs_auth::combined(http.auth.clone(), access);
        let (state_dir, state_dir_named) = match &self.state_dir {
            Some(dir) => (dir.clone(), STATE_DIR.to_owned()),
            None => {
                let (dir, from) = serverfs_write::default_state_dir("serverfs-dev", env)
                    .ok_or_else(|| {
                        ConfigError::named(
                            STATE_DIR,
                            "not set, and neither XDG_STATE_HOME nor HOME is",
                        )
                    })?;
                let named = format!(
                    "the default state directory {} (from {from}; set {STATE_DIR} to choose \
                     another)",
                    dir.display()
                );
                (dir, named)
            }
        };
        if !state_dir.is_absolute() {
            let hint = tilde_hint(&state_dir);
            return Err(ConfigError::new(
                "SERVERFS_STATE_DIR",
                format!("must be an absolute path{hint}"),
            ));
        }
        // `absolute` fails only on an empty path.
        let root = std::path::absolute(&self.root)
            .map_err(|_| ConfigError::new("SERVERFS_ROOT", "the path is empty"))?;
        // Said here, where the path as typed is known (opening the root
        // later says only "does not exist").
        let hint = tilde_hint(&self.root);
        if !hint.is_empty() && !root.exists() {
            let reason = format!("the directory does not exist{hint}");
            return Err(ConfigError::new("SERVERFS_ROOT", reason));
        }
        let mut commands = self.commands.config(&root)?;
        if let Some(sandbox) = commands.sandbox.as_mut() {
            // Commands' views cover the state dir: what they work in cannot
            // lie in it.
            if let Some(inside) = std::iter::once(&root)
                .chain(&sandbox.writable)
                .find(|path| path.starts_with(&state_dir))
            {
                return Err(ConfigError::named(
                    &state_dir_named,
                    format!(
                        "{} lies in it, and commands see the state directory empty; choose a state directory outside the root and the --command-writable paths",
                        inside.display()
                    ),
                ));
            }
            sandbox.hidden.push(state_dir.clone());
        }
        // Over authenticated HTTP clients are several principals: none may
        // hold every command slot (stdio has one client).
        commands.fair_share = !self.stdio && auth.is_some();
        Ok(Config {
            root_was_relative: self.root.is_relative(),
            root,
            state_dir,
            state_dir_named,
            policy,
            limits,
            max_file_bytes: self.max_file_bytes,
            concurrency,
            commands,
            http,
            auth,
            local_token,
            links: self.links.config()?,
        })
    }
}

impl Config {
    /// Where commands may write: the root, `/tmp`, `/dev/shm`, the parent
    /// of their private `TMPDIR`s (`tmpdir`: `$TMPDIR`, else `/tmp`) and
    /// every `--command-writable` path, each named as errors say it.
    /// Neither serverfs-dev's program ([`crate::run`] refuses to start from
    /// there) nor its state may lie below any of them. Without `$TMPDIR`
    /// for the rendezvous (`tmpdir: false`): commands write only their own
    /// `serverfs-cmd-*` directories there, never the rendezvous's
    /// `serverfs-roots.*` (`TMPDIR=/var/tmp` is common).
    pub(crate) fn commands_may_write(&self, tmpdir: bool) -> Vec<serverfs_write::Reach> {
        use serverfs_write::Reach;
        let mut reach = vec![
            Reach::new(&self.root, "the project root"),
            Reach::new("/tmp", "/tmp"),
            Reach::new("/dev/shm", "/dev/shm"),
        ];
        if tmpdir {
            reach.push(Reach::new(std::env::temp_dir(), TMPDIR_PARENT));
        }
        for p in self.commands.sandbox.iter().flat_map(|s| &s.writable) {
            reach.push(Reach::new(p, "a --command-writable path (SERVERFS_COMMAND_WRITABLE)"));
        }
        reach
    }

    /// The paths the state dir and the rendezvous must not be below:
    /// [`Config::commands_may_write`] and, when reads are narrowed, what
    /// commands may read (`--command-readable` paths).
    pub(crate) fn out_of_reach(&self, tmpdir: bool) -> Vec<serverfs_write::Reach> {
        let mut reach = self.commands_may_write(tmpdir);
        for p in self.commands.sandbox.iter().flat_map(|s| s.readable.iter().flatten()) {
            reach.push(serverfs_write::Reach::new(
                p,
                "a --command-readable path (SERVERFS_COMMAND_READABLE)",
            ));
        }
        reach
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let cli = Cli::try_parse_from(
            ["serverfs-dev", "--root", "/tmp"].iter().chain(args.iter()).copied(),
        )
        .expect("parses");
        let lookup = |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned());
        cli.config(&lookup)
    }

    #[test]
    fn a_network_listen_needs_authentication() {
        let err = config(&["--listen", "0.0.0.0:8790"], &[("HOME", "/home/u")]).unwrap_err();
        assert_eq!(err.setting(), "SERVERFS_LISTEN (--listen)");
        assert!(err.reason().contains("not a loopback address"), "{err}");
        let token = "t".repeat(32);
        let ok =
            config(&["--listen", "0.0.0.0:8790"], &[("HOME", "/h"), ("SERVERFS_TOKEN", &token)]);
        assert!(ok.is_ok());
        assert!(config(&["--listen", "[::1]:8790"], &[("HOME", "/h")]).is_ok());
        // stdio never listens.
        assert!(config(&["--stdio", "--listen", "0.0.0.0:1"], &[("HOME", "/h")]).is_ok());
    }

    #[test]
    fn a_local_token_is_drawn_only_where_nothing_else_guards_mcp() {
        let home = [("HOME", "/h")];
        let local = config(&[], &home).unwrap();
        assert!(local.local_token.is_some() && local.auth.is_some());
        assert!(config(&["--stdio"], &home).unwrap().local_token.is_none());
        let token = "t".repeat(32);
        let configured = config(&[], &[("HOME", "/h"), ("SERVERFS_TOKEN", &token)]).unwrap();
        assert!(configured.local_token.is_none());
    }

    #[test]
    fn the_root_cannot_lie_in_the_state_dir_commands_see_empty() {
        let err = config(&["--state-dir", "/"], &[]).unwrap_err();
        assert!(err.reason().contains("/tmp lies in it"), "{err}");
    }

    #[test]
    fn the_state_dir_follows_xdg() {
        let c = config(&[], &[("HOME", "/home/u")]).unwrap();
        assert_eq!(c.state_dir, Path::new("/home/u/.local/state/serverfs-dev"));
        let c = config(&[], &[("HOME", "/home/u"), ("XDG_STATE_HOME", "/s")]).unwrap();
        assert_eq!(c.state_dir, Path::new("/s/serverfs-dev"));
        let c = config(&[], &[("HOME", "/home/u"), ("XDG_STATE_HOME", "rel")]).unwrap();
        assert_eq!(c.state_dir, Path::new("/home/u/.local/state/serverfs-dev"));
        assert!(config(&[], &[]).is_err());
        // An explicit state dir needs neither HOME nor XDG_STATE_HOME.
        let c = config(&["--state-dir", "/elsewhere"], &[]).unwrap();
        assert_eq!(c.state_dir, Path::new("/elsewhere"));
        assert_eq!(c.state_dir_named, STATE_DIR);
        assert!(config(&["--state-dir", "rel"], &[]).is_err());
        // A default is named with where it came from, and the fix.
        let c = config(&[], &[("HOME", "/home/u")]).unwrap();
        assert_eq!(
            c.state_dir_named,
            "the default state directory /home/u/.local/state/serverfs-dev (from HOME; set \
             SERVERFS_STATE_DIR (--state-dir) to choose another)"
        );
        let c = config(&[], &[("HOME", "/home/u"), ("XDG_STATE_HOME", "/s")]).unwrap();
        assert!(c.state_dir_named.contains("/s/serverfs-dev (from XDG_STATE_HOME;"));
    }

    #[test]
    fn git_internals_and_write_temporaries_are_denied_hidden_files_are_not() {
        let c = config(&[], &[("HOME", "/h")]).unwrap();
        let denied = |p: &str| c.policy.check(&serverfs_core::RelPath::parse(p, "t").unwrap());
        assert!(denied(".git/config").is_some());
        assert!(denied("sub/.git").is_some());
        assert!(denied(".serverfs-tmp-1-0").is_some());
        assert!(denied(".env").is_some());
        assert!(denied(".gitignore").is_none());
        assert!(denied(".github/workflows/ci.yml").is_none());
    }
}
