//! The command settings of serverfs-dev: every one a `--flag` with an
//! environment-variable fallback (the flag wins), checked once at start-up
//! into a [`CommandConfig`]; a bad value is one line naming the setting.

use std::path::{Path, PathBuf};

use serverfs_core::ConfigError;

use crate::limit::DEFAULT_RUNNING;
use crate::policy::Policy;
use serverfs_egress::{Allowlist, Egress};
use serverfs_supervisor::{Keep, Network, SandboxConfig};

/// The command flags (flattened into serverfs-dev's command line).
#[derive(Debug, clap::Args)]
pub struct CommandSettings {
    /// Programs bash and shell sessions may run, comma-separated; when set,
    /// nothing else runs and shell metacharacters are refused.
    #[arg(
        long = "allow",
        env = "SERVERFS_ALLOW_COMMANDS",
        value_delimiter = ',',
        value_name = "PROGRAMS"
    )]
    allow_commands: Option<Vec<String>>,

    /// Programs bash and shell sessions may never run, in any segment, comma-separated.
    #[arg(
        long = "deny",
        env = "SERVERFS_DENY_COMMANDS",
        value_delimiter = ',',
        value_name = "PROGRAMS"
    )]
    deny_commands: Vec<String>,

    /// bash calls that may run at once; more wait (bounded), then get SERVER_BUSY.
    #[arg(long, env = "SERVERFS_MAX_CONCURRENT_COMMANDS", default_value_t = DEFAULT_RUNNING)]
    max_concurrent_commands: usize,

    /// The Landlock sandbox around every command and shell session: `on`
    /// (the default; the server refuses to start on a kernel without
    /// Landlock) or `off` (commands can write anywhere this user can; they
    /// still run without a controlling terminal, capabilities or new
    /// privileges, under the seccomp filter).
    #[arg(long, env = "SERVERFS_SANDBOX", default_value = "on", value_parser = ["on", "off"])]
    sandbox: String,

    /// Paths commands may write below besides the root, their TMPDIR and
    /// /tmp (e.g. build caches), comma-separated or repeated.
    #[arg(
        long = "command-writable",
        env = "SERVERFS_COMMAND_WRITABLE",
        value_delimiter = ',',
        value_name = "PATHS"
    )]
    command_writable: Vec<PathBuf>,

    /// When set, commands may read and execute only below these paths (plus
    /// the root and the writable paths), comma-separated or repeated.
    #[arg(
        long = "command-readable",
        env = "SERVERFS_COMMAND_READABLE",
        value_delimiter = ',',
        value_name = "PATHS"
    )]
    command_readable: Option<Vec<PathBuf>>,

    /// `on` (the default, unless --command-network-allow is given): the
    /// host's network. `off`: commands may not open TCP connections nor
    /// listen (Landlock ABI 4+), nor make any socket but a Unix one (the
    /// seccomp filter), in a network namespace of their own where the
    /// kernel allows one.
    #[arg(long, env = "SERVERFS_COMMAND_NETWORK", value_parser = ["on", "off"])]
    command_network: Option<String>,

    /// Commands reach the network only through the server's proxy, and
    /// only these hosts (comma-separated): `example.org`, `*.example.org`,
    /// a literal address (`192.0.2.7`, `[2001:db8::7]`), each optionally
    /// `:PORT` (default 443 and 80). A name must resolve to public
    /// addresses. Each command runs in a network namespace of its own with
    /// loopback only; its proxy variables (HTTPS_PROXY, …) name the proxy.
    #[arg(
        long = "command-network-allow",
        env = "SERVERFS_COMMAND_NETWORK_ALLOW",
        value_delimiter = ',',
        value_name = "HOSTS"
    )]
    command_network_allow: Option<Vec<String>>,

    /// `on`: commands may make namespaces (user, mount, network, …: what
    /// bubblewrap, rootless podman and Chromium's sandbox build on). `off`,
    /// the default: refused, so a command can neither use up the user's
    /// namespaces (every later command's sandbox needs one) nor reach the
    /// kernel surface they open.
    #[arg(long, env = "SERVERFS_COMMAND_NAMESPACES", default_value = "off", value_parser = ["on", "off"])]
    command_namespaces: String,

    /// Ask Landlock for at most this ABI (tests simulate older kernels; 0:
    /// none).
    #[arg(long, env = "SERVERFS_SANDBOX_MAX_ABI", hide = true)]
    sandbox_max_abi: Option<i32>,

    /// Capabilities commands keep when the server runs as root (default: none), comma-separated: CAP_NET_BIND_SERVICE, CAP_CHOWN, … Each is a way around a layer: CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH opens the commit lock to commands.
    #[arg(
        long = "command-capabilities",
        env = "SERVERFS_COMMAND_CAPABILITIES",
        value_delimiter = ',',
        value_name = "CAPS"
    )]
    command_capabilities: Vec<String>,

    /// Put the command text in the audit line of each bash call and shell_write (true), or leave it out (false).
    #[arg(long, env = "SERVERFS_AUDIT_COMMAND_TEXT", default_value_t = true, action = clap::ArgAction::Set)]
    audit_command_text: bool,
}

/// The command settings, validated: what [`crate::commands::Commands`] runs under.
#[derive(Debug)]
pub struct CommandConfig {
    /// The `--allow`/`--deny` policy.
    pub policy: Policy,
    /// One slot is kept from any single principal (a server with several:
    /// HTTP with authentication); set by the server, not a flag.
    pub fair_share: bool,
    /// bash calls that may run at once.
    pub max_concurrent: usize,
    /// The commands' sandbox; `None` with `--sandbox off`.
    pub sandbox: Option<SandboxConfig>,
    /// Whether audit lines carry the command text.
    pub audit_text: bool,
    /// The capabilities commands of a root server keep.
    pub capabilities: Keep,
    /// The proxy of commands on the network by allowlist
    /// (`--command-network-allow`); `None` otherwise.
    pub egress: Option<Egress>,
}

impl CommandSettings {
    /// Checks every command setting; the sandbox is around `root` (the
    /// project root as given).
    ///
    /// # Errors
    /// The setting that is wrong, and why.
    pub fn config(&self, root: &Path) -> Result<CommandConfig, ConfigError> {
        if !(1..=64).contains(&self.max_concurrent_commands) {
            return Err(ConfigError::new(
                "SERVERFS_MAX_CONCURRENT_COMMANDS",
                "must be between 1 and 64",
            ));
        }
        let names = |list: &[String]| -> Vec<String> {
            list.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect()
        };
        let policy = Policy {
            allow: self.allow_commands.as_deref().map(names),
            deny: names(&self.deny_commands),
        };
        let egress = self.egress()?;
        if egress.is_some() && self.sandbox != "on" {
            return Err(ConfigError::new(
                "SERVERFS_COMMAND_NETWORK_ALLOW",
                "needs the sandbox (SERVERFS_SANDBOX=on): its network namespace is the only way commands are kept off the host's network",
            ));
        }
        let sandbox = (self.sandbox == "on").then(|| self.sandbox_config(root)).transpose()?;
        Ok(CommandConfig {
            policy,
            fair_share: false,
            max_concurrent: self.max_concurrent_commands,
            sandbox,
            audit_text: self.audit_command_text,
            capabilities: Keep::parse(&self.command_capabilities)
                .map_err(|e| ConfigError::new("SERVERFS_COMMAND_CAPABILITIES", e.to_string()))?,
            egress,
        })
    }

    /// The proxy for `--command-network-allow`, if given (and not empty);
    /// with `--command-network` also given, that is a contradiction.
    fn egress(&self) -> Result<Option<Egress>, ConfigError> {
        const ALLOW: &str = "SERVERFS_COMMAND_NETWORK_ALLOW";
        let Some(entries) = &self.command_network_allow else { return Ok(None) };
        let allow = Allowlist::parse(entries).map_err(|why| ConfigError::new(ALLOW, why))?;
        if allow.is_empty() {
            return Err(ConfigError::new(
                ALLOW,
                "is empty; for no network at all use SERVERFS_COMMAND_NETWORK=off",
            ));
        }
        if let Some(network) = &self.command_network {
            return Err(ConfigError::new(
                ALLOW,
                format!(
                    "cannot be combined with SERVERFS_COMMAND_NETWORK={network} (the allowlist is a third way: give one of the two)"
                ),
            ));
        }
        Ok(Some(Egress::new(allow)))
    }

    fn sandbox_config(&self, root: &Path) -> Result<SandboxConfig, ConfigError> {
        let mut cfg = SandboxConfig::new(root);
        cfg.writable = existing("SERVERFS_COMMAND_WRITABLE", &self.command_writable)?;
        if let Some(list) = &self.command_readable {
            cfg.readable = Some(existing("SERVERFS_COMMAND_READABLE", list)?);
        }
        cfg.network = match (self.command_network.as_deref(), &self.command_network_allow) {
            (Some("off"), _) => Network::Off,
            (None, Some(_)) => Network::Proxy,
            _ => Network::On,
        };
        cfg.namespaces = self.command_namespaces == "on";
        cfg.max_abi = self.sandbox_max_abi;
        Ok(cfg)
    }
}

/// `paths` made absolute (against the working directory at start), each
/// of which must exist: Landlock cannot grant a missing path, and silently
/// granting less than asked would be worse than refusing. The error names
/// the setting and which path by position, never the path itself.
fn existing(env: &str, paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigError> {
    let which = |i: usize| {
        if paths.len() == 1 {
            "the path".to_owned()
        } else {
            format!("path {} of {}", i + 1, paths.len())
        }
    };
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| match std::path::absolute(p) {
            Ok(p) if p.exists() => Ok(p),
            Ok(_) => {
                let hint = serverfs_core::config::tilde_hint(p);
                let reason = format!("{} does not exist (each must exist){hint}", which(i));
                Err(ConfigError::new(env, reason))
            }
            Err(_) => Err(ConfigError::new(env, format!("{} is empty", which(i)))),
        })
        .collect()
}
