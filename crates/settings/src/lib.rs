//! The settings every ServerFS binary shares, as `clap` argument groups a
//! binary flattens into its own command line (every setting is a
//! `--flag` with an environment-variable fallback; the flag wins):
//! [`ReadSettings`] (per-call limits, admission, extra deny globs) and
//! [`HttpSettings`] (Host/Origin allowlists, body and connection caps,
//! timeouts, the optional bearer token). Each turns into the typed values
//! the libraries take ([`Limits`], [`Concurrency`], [`HttpConfig`]) once, at
//! start-up.
//!
//! Guarantees: every invalid value is refused with one line that names the
//! setting by its environment variable (never a token or a token file's
//! path); the same variable means the same thing in every binary.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ErrorKind};
use clap::{Args, Parser};
pub use serverfs_core::config::{ConfigError, setting};
use serverfs_core::config::{io_reason, tilde_hint};
use serverfs_core::policy::split_glob_list;
use serverfs_tools::{Concurrency, Limits};
use serverfs_transport::{BearerAuth, ConnectionOptions, HttpConfig, McpOptions};

/// Most calls of one class that may run at once: each holds a blocking
/// thread (and, for searches, the names of the directories it walks).
const MAX_CONCURRENT_CALLS: usize = 256;

/// Longest accepted HTTP timeout: a day. Far beyond any use, and keeps the
/// deadline arithmetic (`now + timeout`) far from overflow.
const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// File descriptors kept free beside the connections: the listener, the
/// root handles, the handles of searches and reads in flight, logs.
const FD_RESERVE: u64 = 128;

/// Limits and admission of the read tools.
#[derive(Debug, Args)]
pub struct ReadSettings {
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

    /// Seconds one call may run.
    #[arg(long, env = "SERVERFS_SEARCH_TIMEOUT_SECONDS", default_value_t = Limits::default().search_timeout.as_secs())]
    search_timeout_seconds: u64,

    /// Larger files are not searched.
    #[arg(long, env = "SERVERFS_SEARCH_MAX_FILE_BYTES", default_value_t = Limits::default().search_max_file_bytes)]
    search_max_file_bytes: u64,

    /// More deny globs, comma-separated (commas inside {a,b} belong to the glob), added to the built-in ones.
    #[arg(long, env = "SERVERFS_EXTRA_DENY_GLOBS")]
    extra_deny_globs: Vec<String>,

    /// find_files/search_text calls that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_SEARCHES", default_value_t = Concurrency::default().searches)]
    max_concurrent_searches: usize,

    /// File reads that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_READS", default_value_t = Concurrency::default().reads)]
    max_concurrent_reads: usize,

    /// Listing and stat calls that may run at once.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_LOOKUPS", default_value_t = Concurrency::default().lookups)]
    max_concurrent_lookups: usize,

    /// The text content of tool answers: compact (written for a model) or json (the JSON of structuredContent, for clients that parse text).
    #[arg(long, env = "SERVERFS_TEXT_OUTPUT", default_value = "compact", value_parser = ["compact", "json"])]
    text_output: String,

    /// Seconds a call waits for a free slot before it is refused with SERVER_BUSY.
    #[arg(long, env = "SERVERFS_BUSY_WAIT_SECONDS", default_value_t = Concurrency::default().busy_wait.as_secs())]
    busy_wait_seconds: u64,
}

impl ReadSettings {
    /// The per-call limits: every one ≥ 1, no default above its maximum.
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn limits(&self) -> Result<Limits, ConfigError> {
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
            text_output: self
                .text_output
                .parse()
                .map_err(|e: String| ConfigError::new("SERVERFS_TEXT_OUTPUT", e))?,
        };
        let named = [
            ("SERVERFS_MAX_READ_BYTES", limits.max_read_bytes),
            ("SERVERFS_MAX_READ_LINES", limits.max_read_lines),
            ("SERVERFS_DEFAULT_LIST_LIMIT", limits.default_list_limit),
            ("SERVERFS_MAX_LIST_ENTRIES", limits.max_list_entries),
            ("SERVERFS_DEFAULT_SEARCH_RESULTS", limits.default_search_results),
            ("SERVERFS_MAX_SEARCH_RESULTS", limits.max_search_results),
            ("SERVERFS_MAX_WALK_ENTRIES", limits.max_walk_entries),
            ("SERVERFS_SEARCH_TIMEOUT_SECONDS", limits.search_timeout.as_secs()),
            ("SERVERFS_SEARCH_MAX_FILE_BYTES", limits.search_max_file_bytes),
        ];
        if let Some((name, _)) = named.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::new(name, "must be at least 1"));
        }
        if limits.default_list_limit > limits.max_list_entries {
            return Err(ConfigError::new(
                "SERVERFS_DEFAULT_LIST_LIMIT",
                format!(
                    "{} is above SERVERFS_MAX_LIST_ENTRIES ({})",
                    limits.default_list_limit, limits.max_list_entries
                ),
            ));
        }
        if limits.default_search_results > limits.max_search_results {
            return Err(ConfigError::new(
                "SERVERFS_DEFAULT_SEARCH_RESULTS",
                format!(
                    "{} is above SERVERFS_MAX_SEARCH_RESULTS ({})",
                    limits.default_search_results, limits.max_search_results
                ),
            ));
        }
        Ok(limits)
    }

    /// How many calls of each class may run and how long excess ones wait.
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn concurrency(&self) -> Result<Concurrency, ConfigError> {
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
                let reason = format!("must be between 1 and {MAX_CONCURRENT_CALLS}");
                return Err(ConfigError::new(name, reason));
            }
        }
        if !(1..=600).contains(&self.busy_wait_seconds) {
            return Err(ConfigError::new(
                "SERVERFS_BUSY_WAIT_SECONDS",
                "must be between 1 and 600",
            ));
        }
        Ok(concurrency)
    }

    /// The configured deny globs, one per item (a policy compiles them).
    pub fn extra_deny_globs(&self) -> Vec<String> {
        self.extra_deny_globs.iter().flat_map(|v| split_glob_list(v)).collect()
    }
}

/// The hardening of the HTTP endpoint and its optional bearer token.
#[derive(Debug, Args)]
pub struct HttpSettings {
    /// Accepted HTTP Host names, comma-separated (default: loopback names, plus the binary's own).
    #[arg(long, env = "SERVERFS_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,

    /// Extra accepted browser origins, comma-separated (scheme://host[:port|:*]).
    #[arg(long, env = "SERVERFS_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,

    /// Largest accepted HTTP request body, in bytes.
    #[arg(long, env = "SERVERFS_MAX_BODY_BYTES", default_value_t = 1_048_576)]
    max_body_bytes: usize,

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

    /// File of named bearer tokens, one NAME:TOKEN per line (blank lines and
    /// lines starting with '#' are ignored): each holder is its own
    /// principal, token:NAME. Or SERVERFS_TOKENS=NAME:TOKEN,NAME:TOKEN;
    /// either instead of SERVERFS_TOKEN / --token-file.
    #[arg(long, env = "SERVERFS_TOKENS_FILE", value_name = "PATH")]
    tokens_file: Option<PathBuf>,
}

const TOKEN: &str = "SERVERFS_TOKEN";
const TOKEN_FILE: &str = "SERVERFS_TOKEN_FILE (--token-file)";
const TOKENS: &str = "SERVERFS_TOKENS";
const TOKENS_FILE: &str = "SERVERFS_TOKENS_FILE (--tokens-file)";

impl HttpSettings {
    /// The whole HTTP configuration: `listen`, [`Self::mcp_options`],
    /// [`Self::connection_options`], [`Self::bearer_auth`].
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn config(
        &self,
        listen: std::net::SocketAddr,
        default_hosts: &[&str],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpConfig, ConfigError> {
        Ok(HttpConfig {
            listen,
            mcp: self.mcp_options(default_hosts)?,
            connections: self.connection_options()?,
            auth: self.bearer_auth(env)?,
            bound: None,
        })
    }

    /// What `/mcp` accepts; `default_hosts` when no Host name is configured.
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn mcp_options(&self, default_hosts: &[&str]) -> Result<McpOptions, ConfigError> {
        let mut hosts = trimmed(&self.allowed_hosts);
        if self.allowed_hosts.is_empty() {
            hosts = default_hosts.iter().map(|h| (*h).to_owned()).collect();
        }
        if hosts.is_empty() {
            return Err(ConfigError::new("SERVERFS_ALLOWED_HOSTS", "must name at least one host"));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::new("SERVERFS_MAX_BODY_BYTES", "must be at least 1"));
        }
        Ok(McpOptions {
            allowed_hosts: hosts,
            extra_origins: trimmed(&self.allowed_origins),
            max_body_bytes: self.max_body_bytes,
            body_timeout: seconds(
                "SERVERFS_HTTP_BODY_TIMEOUT_SECONDS",
                self.http_body_timeout_seconds,
            )?,
        })
    }

    /// What one connection may hold; the connection cap must fit under the
    /// open-file limit.
    ///
    /// # Errors
    /// One line naming the setting.
    pub fn connection_options(&self) -> Result<ConnectionOptions, ConfigError> {
        if self.max_connections == 0 {
            return Err(ConfigError::new("SERVERFS_MAX_CONNECTIONS", "must be at least 1"));
        }
        check_fd_room(self.max_connections)?;
        Ok(ConnectionOptions {
            header_timeout: seconds(
                "SERVERFS_HTTP_HEADER_TIMEOUT_SECONDS",
                self.http_header_timeout_seconds,
            )?,
            max_connections: self.max_connections,
        })
    }

    /// The optional bearer tokens: one unnamed token from `SERVERFS_TOKEN`
    /// (looked up with `env`) or the file named by `--token-file` /
    /// `SERVERFS_TOKEN_FILE`, or named tokens (`NAME:TOKEN`) from
    /// `SERVERFS_TOKENS` (comma-separated) or the file named by
    /// `--tokens-file` / `SERVERFS_TOKENS_FILE` (a line each). One source
    /// only.
    ///
    /// # Errors
    /// One line naming the setting (and the line of a tokens file), never
    /// a token or a file's path.
    pub fn bearer_auth(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<BearerAuth>, ConfigError> {
        let (token, tokens) = (env(TOKEN), env(TOKENS));
        let set = [
            (TOKEN, token.is_some()),
            (TOKEN_FILE, self.token_file.is_some()),
            (TOKENS, tokens.is_some()),
            (TOKENS_FILE, self.tokens_file.is_some()),
        ];
        if let [(first, _), (second, _), ..] =
            set.iter().filter(|(_, set)| *set).collect::<Vec<_>>()[..]
        {
            return Err(ConfigError::named(*first, format!("{second} is set too; use one")));
        }
        if let Some(path) = &self.tokens_file {
            let text = read_secret_file(TOKENS_FILE, path)?;
            return named_tokens(TOKENS_FILE, lines_of(&text)).map(Some);
        }
        if let Some(list) = &tokens {
            // Tokens never contain ',', so it separates entries.
            let entries = list.split(',').enumerate().map(|(i, e)| (format!("entry {}", i + 1), e));
            return named_tokens(TOKENS, entries).map(Some);
        }
        let (setting, token) = match (token, &self.token_file) {
            (Some(token), _) => (TOKEN, token),
            (None, Some(path)) => {
                let mut text = read_secret_file(TOKEN_FILE, path)?;
                // Editors and `echo` end files with a newline; it is not part
                // of the token.
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                if text.contains('\n') {
                    return Err(ConfigError::named(
                        TOKEN_FILE,
                        format!(
                            "the file holds more than one line; it takes one token \
                             (for several named tokens use {TOKENS_FILE})"
                        ),
                    ));
                }
                (TOKEN_FILE, text)
            }
            (None, None) => return Ok(None),
        };
        BearerAuth::new(&token).map(Some).map_err(|e| ConfigError::named(setting, e))
    }
}

/// The text of a file of secrets, warning when group or others may read it.
fn read_secret_file(setting: &str, path: &std::path::Path) -> Result<String, ConfigError> {
    let cannot = |e: std::io::Error| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound { tilde_hint(path) } else { "" };
        ConfigError::named(setting, format!("the file {}{hint}", io_reason(&e)))
    };
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    // The mode of the file read, not of a name that may change.
    let mode = file.metadata().map_err(cannot)?.permissions().mode();
    if mode & 0o044 != 0 {
        tracing::warn!(
            event = "config_warning",
            message = %format!(
                "{setting}: the file is readable by group or others (mode {:o}); chmod 600 it",
                mode & 0o777
            ),
        );
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).map_err(cannot)?;
    Ok(text)
}

/// Named tokens from `NAME:TOKEN` entries (split at the first `:`, spaces
/// around either part ignored), each with its label for messages (`line
/// 3`); blank entries and `#` comments are skipped.
fn named_tokens<'a>(
    setting: &str,
    entries: impl Iterator<Item = (String, &'a str)>,
) -> Result<BearerAuth, ConfigError> {
    let mut parsed = Vec::new();
    for (label, entry) in entries {
        let entry = entry.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        let Some((name, token)) = entry.split_once(':') else {
            return Err(ConfigError::named(setting, format!("{label}: expected NAME:TOKEN")));
        };
        parsed.push((label, name.trim(), token.trim()));
    }
    if parsed.is_empty() {
        return Err(ConfigError::named(setting, "no NAME:TOKEN is given"));
    }
    BearerAuth::named(parsed).map_err(|e| ConfigError::named(setting, e))
}

/// The entries of a tokens file: its lines, labelled by number.
fn lines_of(text: &str) -> impl Iterator<Item = (String, &str)> {
    text.lines().enumerate().map(|(i, line)| (format!("line {}", i + 1), line))
}

/// Warns (a `config_warning` log line) when the server runs as root: it
/// needs no privilege, and every file the tools can reach is then readable
/// to it.
pub fn warn_if_root() {
    if rustix::process::geteuid().is_root() {
        tracing::warn!(
            event = "config_warning",
            message = "running as root: every file the tools reach is open to this process; run it as an ordinary user",
        );
    }
}

/// Warns (a `config_warning` log line) when `path`, served as `setting`
/// (`--workdir 'x'`, `SERVERFS_ROOT (--root)`), is the filesystem root:
/// every file this user can read is then served. Allowed (a throwaway VM
/// may want it), never recommended.
pub fn warn_if_filesystem_root(setting: &str, path: &std::path::Path) {
    if std::fs::canonicalize(path).is_ok_and(|p| p == std::path::Path::new("/")) {
        tracing::warn!(
            event = "config_warning",
            message = %format!(
                "{setting} is the filesystem root '/': every file this user can read is served; \
                 name the narrowest directory the agent needs"
            ),
        );
    }
}

/// Parses flags and environment into `C`; a bad value is one line naming
/// the setting (`SERVERFS_X (--x): invalid value '…'`) and exit 2. Help,
/// version and usage errors are clap's own.
pub fn parse_or_exit<C: Parser>(program: &str) -> C {
    match C::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::InvalidValue | ErrorKind::ValueValidation) => {
            let arg = e.get(ContextKind::InvalidArg).map(ToString::to_string).unwrap_or_default();
            let value =
                e.get(ContextKind::InvalidValue).map(ToString::to_string).unwrap_or_default();
            let flag = arg.split_whitespace().next().unwrap_or_default().to_owned();
            let command = C::command();
            let found = command
                .get_arguments()
                .chain(command.get_subcommands().flat_map(clap::Command::get_arguments))
                .find(|a| a.get_long().is_some_and(|l| flag == format!("--{l}")));
            let env = found.and_then(|a| a.get_env().map(|v| v.to_string_lossy().into_owned()));
            let setting = env.map_or(flag.clone(), |env| format!("{env} ({flag})"));
            // A value parser's own reason (e.g. the expected form) beats
            // clap's generic one; a setting with a fixed set of values
            // lists them, so the fix is in the line.
            let listed = found.map(one_of).unwrap_or_default();
            let why = match e.kind() {
                _ if !listed.is_empty() => listed,
                ErrorKind::ValueValidation => {
                    std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default()
                }
                _ => String::new(),
            };
            eprintln!("{program}: config error: {setting}: invalid value '{value}'{why}");
            std::process::exit(2);
        }
        Err(e) => e.exit(),
    }
}

/// `: expected one of on, off` for a setting with a fixed set of values;
/// empty for any other.
fn one_of(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    if values.is_empty() {
        String::new()
    } else {
        format!(": expected one of {}", values.join(", "))
    }
}

/// A listen address: `HOST:PORT` where HOST is an IP address (IPv6 in
/// brackets). Names are refused rather than resolved: `localhost` may mean
/// 127.0.0.1 or ::1, and which one would be a guess.
///
/// # Errors
/// The expected form, with an example, and what to use instead of a name.
// A `String`: the message of the `ConfigError` (or clap error) the caller
// names the setting for.
pub fn listen_address(value: &str) -> Result<std::net::SocketAddr, String> {
    const FORM: &str =
        "expected HOST:PORT with HOST an IP address, e.g. 127.0.0.1:8790 or [::1]:8790";
    if let Ok(address) = value.parse() {
        return Ok(address);
    }
    let port = value.strip_prefix(':').unwrap_or(value);
    if port.parse::<u16>().is_ok() {
        return Err(format!(
            "{FORM} (a port alone is not enough: 0.0.0.0:{port} for every interface, \
             127.0.0.1:{port} for this machine only)"
        ));
    }
    match value.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            let hint = if host.eq_ignore_ascii_case("localhost") {
                format!(" (for localhost use 127.0.0.1:{port})")
            } else {
                " (a host name is not resolved; give its address)".to_owned()
            };
            Err(format!("{FORM}{hint}"))
        }
        _ => Err(FORM.to_owned()),
    }
}

/// The connection cap exists so that the open-file limit is never hit; a cap
/// the limit cannot hold would defeat it, so it is refused at start-up.
fn check_fd_room(max_connections: usize) -> Result<(), ConfigError> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let needed = u64::try_from(max_connections).unwrap_or(u64::MAX).saturating_add(FD_RESERVE);
    match limit {
        Some(limit) if needed > limit => Err(ConfigError::new(
            "SERVERFS_MAX_CONNECTIONS",
            format!(
                "{max_connections} plus {FD_RESERVE} reserved descriptors exceeds the \
                 open-file limit ({limit}); lower it or raise `ulimit -n`"
            ),
        )),
        _ => Ok(()),
    }
}

/// A timeout setting in whole seconds, 1 ≤ n ≤ a day.
fn seconds(env: &str, n: u64) -> Result<Duration, ConfigError> {
    if (1..=MAX_TIMEOUT_SECONDS).contains(&n) {
        Ok(Duration::from_secs(n))
    } else {
        Err(ConfigError::new(env, format!("must be between 1 and {MAX_TIMEOUT_SECONDS}; got {n}")))
    }
}

/// A comma-separated setting's items, trimmed, empty ones dropped
/// (`a, b,` is `[a, b]`).
fn trimmed(items: &[String]) -> Vec<String> {
    items.iter().map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Parser)]
    struct Both {
        #[command(flatten)]
        read: ReadSettings,
        #[command(flatten)]
        http: HttpSettings,
    }

    fn parse(args: &[&str]) -> Both {
        Both::try_parse_from(std::iter::once("test").chain(args.iter().copied())).expect("parses")
    }

    #[test]
    fn a_zero_limit_is_named_by_its_variable() {
        let both = parse(&["--max-read-lines", "0"]);
        assert_eq!(
            both.read.limits().unwrap_err().to_string(),
            "SERVERFS_MAX_READ_LINES (--max-read-lines): must be at least 1"
        );
        assert_eq!(
            setting("SERVERFS_MAX_FILE_BYTES"),
            "SERVERFS_MAX_FILE_BYTES (--max-file-bytes)"
        );
    }

    #[test]
    fn text_output_is_compact_unless_json_is_asked_for() {
        use serverfs_tools::TextOutput;
        assert_eq!(parse(&[]).read.limits().unwrap().text_output, TextOutput::Compact);
        let json = parse(&["--text-output", "json"]);
        assert_eq!(json.read.limits().unwrap().text_output, TextOutput::Json);
        let argv = ["test", "--text-output", "yaml"];
        assert!(Both::try_parse_from(argv).is_err());
    }

    #[test]
    fn a_default_above_its_maximum_is_refused() {
        let both = parse(&["--default-list-limit", "600"]);
        let err = both.read.limits().unwrap_err();
        assert_eq!(err.setting(), "SERVERFS_DEFAULT_LIST_LIMIT (--default-list-limit)");
        assert!(err.reason().starts_with("600 is above SERVERFS_MAX_LIST_ENTRIES"), "{err}");
    }

    #[test]
    fn hosts_default_to_the_binarys_own_until_configured() {
        let both = parse(&[]);
        let options = both.http.mcp_options(&["localhost", "svc"]).unwrap();
        assert_eq!(options.allowed_hosts, ["localhost", "svc"]);
        let both = parse(&["--allowed-hosts", " a.example , ,b.example"]);
        let options = both.http.mcp_options(&["localhost"]).unwrap();
        assert_eq!(options.allowed_hosts, ["a.example", "b.example"]);
        let both = parse(&["--allowed-hosts", " , "]);
        assert!(both.http.mcp_options(&["localhost"]).is_err());
    }

    #[test]
    fn timeouts_are_bounded() {
        let both = parse(&["--http-header-timeout-seconds", "0"]);
        assert!(both.http.connection_options().unwrap_err().setting().contains("HEADER_TIMEOUT"));
        let both = parse(&["--http-body-timeout-seconds", "86401"]);
        assert!(
            both.http.mcp_options(&["localhost"]).unwrap_err().setting().contains("BODY_TIMEOUT")
        );
    }

    #[test]
    fn the_token_comes_from_one_place_only() {
        let both = parse(&[]);
        assert!(both.http.bearer_auth(&|_| None).unwrap().is_none());
        let token = |k: &str| (k == "SERVERFS_TOKEN").then(|| "a".repeat(32));
        assert!(both.http.bearer_auth(&token).unwrap().is_some());
        let both = parse(&["--token-file", "/nonexistent/token"]);
        let err = both.http.bearer_auth(&token).unwrap_err().to_string();
        assert!(err.contains("is set too; use one"), "{err}");
        let err = both.http.bearer_auth(&|_| None).unwrap_err().to_string();
        assert!(err.ends_with("the file does not exist") && !err.contains("/nonexistent"), "{err}");
        let both = parse(&["--tokens-file", "~/tokens"]);
        let err = both.http.bearer_auth(&|_| None).unwrap_err().to_string();
        assert!(
            err.starts_with("SERVERFS_TOKENS_FILE (--tokens-file): the file does not exist")
                && err.contains("use $HOME"),
            "{err}"
        );
        let both = parse(&["--tokens-file", "/nonexistent/tokens"]);
        let err = both.http.bearer_auth(&token).unwrap_err().to_string();
        assert!(err.contains("SERVERFS_TOKENS_FILE") && err.contains("is set too"), "{err}");
    }

    #[test]
    fn a_tokens_file_names_each_token_and_its_bad_lines() {
        let good = "# agents\n\nalice:tok-alice-0123456789\n  ci-bot : tok-ci-0123456789ab  \r\n";
        let auth = named_tokens(TOKENS_FILE, lines_of(good)).unwrap();
        assert!(format!("{auth:?}").contains("ci-bot"));
        for (text, expected) in [
            (
                "alice:tok-1-0123456789ab\nbob tok-2-0123456789ab\n",
                "SERVERFS_TOKENS_FILE (--tokens-file): line 2: expected",
            ),
            ("alice:tok-1-0123456789ab\n\n#\nbob:tok 2-0123456789ab\n", "line 4: the token may"),
            (
                "alice:tok-1-0123456789ab\nalice:tok-2-0123456789ab\n",
                "line 2: the name 'alice' is also on line 1",
            ),
            (
                "\nalice:tok-1-0123456789ab\nbob:tok-1-0123456789ab\n",
                "line 3: the same token as line 2",
            ),
            ("a b:tok-1-0123456789ab\n", "line 1: the name"),
            ("# nothing\n", "no NAME:TOKEN"),
            ("alice:tok-15-bytes-no\n", "line 1: the token is 15 bytes; use at least 16"),
        ] {
            let err = named_tokens(TOKENS_FILE, lines_of(text)).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(!err.contains("tok-") && !err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn named_tokens_from_the_environment() {
        let none = parse(&[]);
        let tokens =
            |value: &'static str| move |k: &str| (k == "SERVERFS_TOKENS").then(|| value.to_owned());
        let auth = none
            .http
            .bearer_auth(&tokens("alice:tok-a-0123456789abc, bob:tok-b-0123456789abc"))
            .unwrap();
        assert!(format!("{:?}", auth.unwrap()).contains("bob"));
        let err = none.http.bearer_auth(&tokens("alice:tok-a-0123456789abc,bob")).unwrap_err();
        assert_eq!(err.to_string(), "SERVERFS_TOKENS: entry 2: expected NAME:TOKEN");
        let err = none
            .http
            .bearer_auth(&tokens("alice:tok-a-0123456789abc,bob:tok-a-0123456789abc"))
            .unwrap_err();
        assert_eq!(err.to_string(), "SERVERFS_TOKENS: entry 2: the same token as entry 1");
        let both =
            |k: &str| matches!(k, "SERVERFS_TOKENS" | "SERVERFS_TOKEN").then(|| "a:b".to_owned());
        let err = none.http.bearer_auth(&both).unwrap_err().to_string();
        assert!(err.contains("is set too") && !err.contains("a:b"), "{err}");
    }
}
