//! Command line and environment (SPEC §2.1): every setting is a `--flag`
//! with an environment-variable fallback; the flag wins.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::error::{ContextKind, ErrorKind};
use clap::{CommandFactory, Parser, Subcommand};
use serverfs_core::Policy;
use serverfs_core::policy::split_glob_list;
use serverfs_tools::{Concurrency, Limits};

use crate::workdirs::WorkdirSpec;
use serverfs_transport::{BearerAuth, ConnectionOptions, McpOptions};

use crate::slots::{ConfigError, arg_specs, slot_specs, validate_limits};

/// Most calls of one class that may run at once: each holds a blocking
/// thread (and, for searches, the names of the directories it walks).
const MAX_CONCURRENT_CALLS: usize = 256;

/// ServerFS MCP: a secure, read-only MCP server that exposes selected Linux
/// directories as workdirs to AI agents in real time.
#[derive(Debug, Parser)]
#[command(name = "serverfs-mcp", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// HTTP listen address (endpoint /mcp).
    #[arg(long, env = "SERVERFS_LISTEN", default_value = "127.0.0.1:8000")]
    pub(crate) listen: SocketAddr,

    /// Serve one client on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub(crate) stdio: bool,

    /// Where the Docker slots 01…16 are mounted (used when no --workdir).
    #[arg(long, env = "SERVERFS_WORKDIRS_DIR", default_value = "/workdirs")]
    pub(crate) workdirs_dir: PathBuf,

    /// Name a workdir, ALIAS=PATH (repeatable); when given, slots are not read.
    #[arg(long = "workdir", value_name = "ALIAS=PATH")]
    pub(crate) workdirs: Vec<String>,

    /// Describe a --workdir, ALIAS=TEXT (repeatable).
    #[arg(long = "workdir-description", value_name = "ALIAS=TEXT")]
    pub(crate) workdir_descriptions: Vec<String>,

    /// TRACE, DEBUG, INFO, WARN or ERROR.
    #[arg(long, env = "SERVERFS_LOG_LEVEL", default_value = "INFO")]
    pub(crate) log_level: String,

    /// Bytes one read may return.
    #[arg(long, env = "SERVERFS_MAX_READ_BYTES", default_value_t = Limits::default().max_read_bytes)]
    max_read_bytes: u64,

    /// Lines one read may return.
    #[arg(long, env = "SERVERFS_MAX_READ_LINES", default_value_t = Limits::default().max_read_lines)]
    max_read_lines: u64,

    /// Default list_directory page size.
    #[arg(long, env = "SERVERFS_DEFAULT_LIST_LIMIT", default_value_t = Limits::default().default_list_limit)]
    default_list_limit: u64,

    /// Largest list_directory page.
    #[arg(long, env = "SERVERFS_MAX_LIST_ENTRIES", default_value_t = Limits::default().max_list_entries)]
    max_list_entries: u64,

    /// Default number of find/search results.
    #[arg(long, env = "SERVERFS_DEFAULT_SEARCH_RESULTS", default_value_t = Limits::default().default_search_results)]
    default_search_results: u64,

    /// Largest number of find/search results.
    #[arg(long, env = "SERVERFS_MAX_SEARCH_RESULTS", default_value_t = Limits::default().max_search_results)]
    max_search_results: u64,

    /// Entries one find/search may visit.
    #[arg(long, env = "SERVERFS_MAX_WALK_ENTRIES", default_value_t = Limits::default().max_walk_entries)]
    max_walk_entries: u64,

    /// Seconds one find/search may run.
    #[arg(long, env = "SERVERFS_SEARCH_TIMEOUT_SECONDS", default_value_t = Limits::default().search_timeout.as_secs())]
    search_timeout_seconds: u64,

    /// Larger files are not searched.
    #[arg(long, env = "SERVERFS_SEARCH_MAX_FILE_BYTES", default_value_t = Limits::default().search_max_file_bytes)]
    search_max_file_bytes: u64,

    /// Serve paths with components starting with '.' (credential deny rules still apply).
    #[arg(long, env = "SERVERFS_ALLOW_HIDDEN", default_value = "false", value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    allow_hidden: bool,

    /// More deny globs, comma-separated (commas inside {a,b} belong to the glob), added to the built-in ones.
    #[arg(long, env = "SERVERFS_EXTRA_DENY_GLOBS")]
    extra_deny_globs: Vec<String>,

    /// Accepted HTTP Host names, comma-separated.
    #[arg(long, env = "SERVERFS_ALLOWED_HOSTS", value_delimiter = ',', default_values_t = default_allowed_hosts())]
    allowed_hosts: Vec<String>,

    /// Extra accepted browser origins, comma-separated (scheme://host[:port|:*]).
    #[arg(long, env = "SERVERFS_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,

    /// Largest accepted HTTP request body, in bytes.
    #[arg(long, env = "SERVERFS_MAX_BODY_BYTES", default_value_t = 1_048_576)]
    max_body_bytes: usize,

    /// find_files/search_text calls that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_SEARCHES", default_value_t = Concurrency::default().searches)]
    max_concurrent_searches: usize,

    /// read_text_file/resources/read calls that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_READS", default_value_t = Concurrency::default().reads)]
    max_concurrent_reads: usize,

    /// list_workdirs/list_directory/stat_file calls that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_LOOKUPS", default_value_t = Concurrency::default().lookups)]
    max_concurrent_lookups: usize,

    /// Seconds a call waits for a free slot before it is refused with SERVER_BUSY.
    #[arg(long, env = "SERVERFS_BUSY_WAIT_SECONDS", default_value_t = Concurrency::default().busy_wait.as_secs())]
    busy_wait_seconds: u64,

    /// Seconds a connection may take to send a complete request head (also
    /// the keep-alive idle timeout).
    #[arg(long, env = "SERVERFS_HTTP_HEADER_TIMEOUT_SECONDS", default_value_t = 10)]
    http_header_timeout_seconds: u64,

    /// Seconds a request body may take to arrive in full.
    #[arg(long, env = "SERVERFS_HTTP_BODY_TIMEOUT_SECONDS", default_value_t = 30)]
    http_body_timeout_seconds: u64,

    /// Most HTTP connections open at once; more wait to be accepted.
    #[arg(long, env = "SERVERFS_MAX_CONNECTIONS", default_value_t = 256)]
    max_connections: usize,

    /// File holding the bearer token /mcp requires (one trailing newline is
    /// ignored). The token itself is never a flag: use this or SERVERFS_TOKEN.
    #[arg(long, env = "SERVERFS_TOKEN_FILE", value_name = "PATH")]
    token_file: Option<PathBuf>,
}

/// Longest accepted HTTP timeout: a day. Far beyond any use, and keeps the
/// deadline arithmetic (`now + timeout`) far from overflow.
const MAX_TIMEOUT_SECONDS: u64 = 86_400;

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

/// How this binary serves HTTP.
#[derive(Debug)]
pub(crate) struct HttpConfig {
    pub(crate) listen: SocketAddr,
    pub(crate) mcp: McpOptions,
    pub(crate) connections: ConnectionOptions,
    /// When set, `/mcp` requires this bearer token.
    pub(crate) auth: Option<BearerAuth>,
}

/// Loopback names plus the Compose service name, so OpenAI's tunnel-client
/// can reach `http://serverfs-mcp:8000/mcp`.
fn default_allowed_hosts() -> Vec<String> {
    ["localhost", "127.0.0.1", "::1", "serverfs-mcp"].map(String::from).to_vec()
}

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
                "listening on {} but SERVERFS_ALLOWED_HOSTS (--allowed-hosts) names only loopback hosts: requests from other machines will get 403 'Host header is not allowed'; add the host name or address clients use",
                self.http.listen
            ));
        }
        warnings
    }
}

impl Cli {
    /// Parses flags and environment; a bad value is one line and exit 2.
    pub(crate) fn parse_or_exit() -> Self {
        match Self::try_parse() {
            Ok(cli) => cli,
            Err(e) if matches!(e.kind(), ErrorKind::InvalidValue | ErrorKind::ValueValidation) => {
                let arg =
                    e.get(ContextKind::InvalidArg).map(ToString::to_string).unwrap_or_default();
                let value =
                    e.get(ContextKind::InvalidValue).map(ToString::to_string).unwrap_or_default();
                let flag = arg.split_whitespace().next().unwrap_or_default().to_owned();
                let env = Self::command()
                    .get_arguments()
                    .find(|a| a.get_long().is_some_and(|l| flag == format!("--{l}")))
                    .and_then(|a| a.get_env().map(|v| v.to_string_lossy().into_owned()));
                let setting = env.map_or(flag.clone(), |env| format!("{env} ({flag})"));
                eprintln!("serverfs-mcp: config error: {setting}: invalid value '{value}'");
                std::process::exit(2);
            }
            Err(e) => e.exit(),
        }
    }

    /// Validates limits, policy and workdirs (slots or --workdir).
    pub(crate) fn config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let limits = Limits {
            max_read_bytes: self.max_read_bytes,
            max_read_lines: self.max_read_lines,
            default_list_limit: self.default_list_limit,
            max_list_entries: self.max_list_entries,
            default_search_results: self.default_search_results,
            max_search_results: self.max_search_results,
            max_walk_entries: self.max_walk_entries,
            search_timeout: Duration::from_secs(self.search_timeout_seconds),
            search_max_file_bytes: self.search_max_file_bytes,
        };
        validate_limits(&limits)?;
        let concurrency = Concurrency {
            searches: self.max_concurrent_searches,
            reads: self.max_concurrent_reads,
            lookups: self.max_concurrent_lookups,
            busy_wait: Duration::from_secs(self.busy_wait_seconds),
        };
        for (name, value) in [
            ("SERVERFS_MAX_CONCURRENT_SEARCHES", concurrency.searches),
            ("SERVERFS_MAX_CONCURRENT_READS", concurrency.reads),
            ("SERVERFS_MAX_CONCURRENT_LOOKUPS", concurrency.lookups),
        ] {
            if !(1..=MAX_CONCURRENT_CALLS).contains(&value) {
                return Err(ConfigError::Setting(format!(
                    "{name} must be between 1 and {MAX_CONCURRENT_CALLS}"
                )));
            }
        }
        if !(1..=600).contains(&self.busy_wait_seconds) {
            return Err(ConfigError::Setting(
                "SERVERFS_BUSY_WAIT_SECONDS must be between 1 and 600".to_owned(),
            ));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::Setting(
                "SERVERFS_MAX_BODY_BYTES must be at least 1".to_owned(),
            ));
        }
        let header_timeout =
            seconds("SERVERFS_HTTP_HEADER_TIMEOUT_SECONDS", self.http_header_timeout_seconds)?;
        let body_timeout =
            seconds("SERVERFS_HTTP_BODY_TIMEOUT_SECONDS", self.http_body_timeout_seconds)?;
        if self.max_connections == 0 {
            return Err(ConfigError::Setting(
                "SERVERFS_MAX_CONNECTIONS must be at least 1".to_owned(),
            ));
        }
        check_fd_room(self.max_connections)?;
        let auth = self.bearer_auth(env)?;
        let hosts = trimmed(&self.allowed_hosts);
        if hosts.is_empty() {
            return Err(ConfigError::Setting(
                "SERVERFS_ALLOWED_HOSTS must name at least one host".to_owned(),
            ));
        }
        let globs: Vec<String> =
            self.extra_deny_globs.iter().flat_map(|v| split_glob_list(v)).collect();
        let policy = Policy::new(self.allow_hidden, &globs)
            .map_err(|e| ConfigError::Setting(format!("SERVERFS_EXTRA_DENY_GLOBS: {e}")))?;
        let workdirs = if self.workdirs.is_empty() {
            slot_specs(&self.workdirs_dir, env)?
        } else {
            arg_specs(&self.workdirs, &self.workdir_descriptions)?
        };
        Ok(Config {
            workdirs,
            policy,
            limits,
            concurrency,
            http: HttpConfig {
                listen: self.listen,
                mcp: McpOptions {
                    allowed_hosts: hosts,
                    extra_origins: trimmed(&self.allowed_origins),
                    max_body_bytes: self.max_body_bytes,
                    body_timeout,
                },
                connections: ConnectionOptions {
                    header_timeout,
                    max_connections: self.max_connections,
                },
                auth,
            },
        })
    }
}

impl Cli {
    /// The optional token: `SERVERFS_TOKEN`, or the file named by
    /// `--token-file` / `SERVERFS_TOKEN_FILE` (not both). Errors name the
    /// setting, never the token or the file's path.
    fn bearer_auth(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<BearerAuth>, ConfigError> {
        let (setting, token) = match (env("SERVERFS_TOKEN"), &self.token_file) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(ConfigError::Setting(
                    "SERVERFS_TOKEN and SERVERFS_TOKEN_FILE (--token-file) are both set; \
                            use one"
                        .to_owned(),
                ));
            }
            (Some(token), None) => ("SERVERFS_TOKEN", token),
            (None, Some(path)) => {
                let setting = "SERVERFS_TOKEN_FILE (--token-file)";
                let mut text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::Setting(format!(
                        "{setting}: cannot read the token file: {}",
                        e.kind()
                    ))
                })?;
                // Editors and `echo` end files with a newline; it is not part
                // of the token.
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                (setting, text)
            }
        };
        BearerAuth::new(&token)
            .map(Some)
            .map_err(|e| ConfigError::Setting(format!("{setting}: {e}")))
    }
}

/// File descriptors kept free beside the connections: the listener, the
/// workdir root handles, the handles of searches and reads in flight, logs.
const FD_RESERVE: u64 = 128;

/// The connection cap exists so that the open-file limit is never hit; a cap
/// the limit cannot hold would defeat it, so it is refused at start-up.
fn check_fd_room(max_connections: usize) -> Result<(), ConfigError> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let needed = u64::try_from(max_connections).unwrap_or(u64::MAX).saturating_add(FD_RESERVE);
    match limit {
        Some(limit) if needed > limit => Err(ConfigError::Setting(format!(
            "SERVERFS_MAX_CONNECTIONS ({max_connections}) plus {FD_RESERVE} reserved descriptors \
             exceeds the open-file limit ({limit}); lower it or raise `ulimit -n`"
        ))),
        _ => Ok(()),
    }
}

/// A timeout setting in whole seconds, 1 ≤ n ≤ a day.
fn seconds(setting: &str, n: u64) -> Result<Duration, ConfigError> {
    if (1..=MAX_TIMEOUT_SECONDS).contains(&n) {
        Ok(Duration::from_secs(n))
    } else {
        Err(ConfigError::Setting(format!(
            "{setting} must be between 1 and {MAX_TIMEOUT_SECONDS}; got {n}"
        )))
    }
}

/// A comma-separated setting's items, trimmed, empty ones dropped
/// (`a, b,` is `[a, b]`).
fn trimmed(items: &[String]) -> Vec<String> {
    items.iter().map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect()
}
