//! Command line and environment: every setting is a `--flag`
//! with an environment-variable fallback; the flag wins.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Parser, Subcommand};
use serverfs_core::{ConfigError, Policy};
use serverfs_settings::{HttpSettings, ReadSettings};
use serverfs_tools::{Concurrency, Limits};
use serverfs_transport::HttpConfig;

use crate::slots::{arg_specs, slot_specs};
use crate::workdirs::WorkdirSpec;

/// ServerFS MCP: a secure, read-only MCP server that exposes selected Linux
/// directories as workdirs to AI agents in real time.
#[derive(Debug, Parser)]
#[command(name = "serverfs-mcp", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// HTTP listen address (endpoint /mcp).
    // `global`: also after a subcommand (`healthcheck --listen …`).
    #[arg(long, global = true, env = "SERVERFS_LISTEN", value_parser = serverfs_settings::listen_address, default_value = "127.0.0.1:8000")]
    pub(crate) listen: SocketAddr,

    /// Serve one client on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub(crate) stdio: bool,

    /// Where the Docker slots 01…16 are mounted (used when no --workdir).
    #[arg(long, global = true, env = "SERVERFS_WORKDIRS_DIR", default_value = "/workdirs")]
    pub(crate) workdirs_dir: PathBuf,

    /// Name a workdir, ALIAS=PATH (repeatable); when given, slots are not read.
    #[arg(long = "workdir", global = true, value_name = "ALIAS=PATH")]
    pub(crate) workdirs: Vec<String>,

    /// Describe a --workdir, ALIAS=TEXT (repeatable).
    #[arg(long = "workdir-description", value_name = "ALIAS=TEXT")]
    pub(crate) workdir_descriptions: Vec<String>,

    /// TRACE, DEBUG, INFO, WARN or ERROR.
    #[arg(long, env = "SERVERFS_LOG_LEVEL", default_value = "INFO")]
    pub(crate) log_level: String,

    #[command(flatten)]
    read: ReadSettings,

    /// Serve paths with components starting with '.' (credential deny rules still apply).
    #[arg(long, env = "SERVERFS_ALLOW_HIDDEN", default_value = "false", value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    allow_hidden: bool,

    #[command(flatten)]
    http: HttpSettings,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Probe GET /healthz on the loopback port of SERVERFS_LISTEN (exit 0 if healthy).
    Healthcheck,
    /// Report uid/gid, writability of / and the workdirs, and visible secrets, as JSON.
    Selfcheck,
}

/// Everything the server needs, validated.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) workdirs: Vec<WorkdirSpec>,
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) concurrency: Concurrency,
    pub(crate) http: HttpConfig,
}

/// Loopback names plus the Compose service name, so OpenAI's tunnel-client
/// can reach `http://serverfs-mcp:8000/mcp`.
const DEFAULT_ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1", "serverfs-mcp"];

impl Config {
    /// Settings that are valid but almost certainly not what was meant.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let loopback_name = |h: &str| {
            let host = h.rsplit_once(':').filter(|_| !h.contains("::")).map_or(h, |(n, _)| n);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        };
        let mut warnings = Vec::new();
        if !self.http.listen.ip().is_loopback()
            && self.http.mcp.allowed_hosts.iter().all(|h| loopback_name(h))
        {
            warnings.push(format!(
                "listening on {} but SERVERFS_ALLOWED_HOSTS (--allowed-hosts) names only loopback hosts: requests from other machines will get 403 'Host ... is not allowed'; add the host name or address clients use",
                self.http.listen
            ));
        }
        // Warned, not refused: Compose listens on 0.0.0.0 inside an
        // internal network that only the tunnel reaches, without a token.
        if !self.http.listen.ip().is_loopback() && self.http.auth.is_none() {
            warnings.push(format!(
                "listening on {} without a token: anyone who can reach this address can read every workdir; set SERVERFS_TOKEN or SERVERFS_TOKEN_FILE (--token-file), or listen on loopback with SERVERFS_LISTEN (--listen)",
                self.http.listen
            ));
        }
        warnings
    }
}

impl Cli {
    /// Parses flags and environment; a bad value is one line and exit 2.
    pub(crate) fn parse_or_exit() -> Self {
        serverfs_settings::parse_or_exit("serverfs-mcp")
    }

    /// Validates limits, policy and workdirs (slots or --workdir).
    pub(crate) fn config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let limits = self.read.limits()?;
        let concurrency = self.read.concurrency()?;
        let policy = Policy::new(self.allow_hidden, &self.read.extra_deny_globs())
            .map_err(|e| ConfigError::new("SERVERFS_EXTRA_DENY_GLOBS", e))?;
        let http = self.http.config(self.listen, DEFAULT_ALLOWED_HOSTS, env)?;
        let workdirs = if self.workdirs.is_empty() {
            slot_specs(&self.workdirs_dir, env)?
        } else {
            arg_specs(&self.workdirs, &self.workdir_descriptions)?
        };
        Ok(Config { workdirs, policy, limits, concurrency, http })
    }
}
