//! The Landlock sandbox every command and shell session runs in.
//!
//! The supervisor applies it, for each command, in a short-lived thread of
//! its own that then starts `bash` and ends: Landlock without
//! `all_threads` restricts only the calling thread, and a child inherits
//! the domain of the thread that forked it. So `bash` and everything it
//! starts live in a fresh Landlock domain of their own, while the server
//! and the supervisor (whose remaining threads never entered it) stay
//! outside. What that gives, by kernel Landlock ABI:
//!
//! - ABI 1+ (Linux 5.13): writes only below the project root, the
//!   command's private `TMPDIR`, `/tmp`, a few devices (`/dev/null`,
//!   `/dev/zero`, `/dev/full`, `/dev/tty`, `/dev/pts`, `/dev/ptmx`, `/dev/shm`) and the
//!   operator's `--command-writable` paths; reads and execution everywhere,
//!   or only below the `--command-readable` paths (plus the writable ones).
//!   Also ptrace scoping: a process in a domain cannot ptrace, nor open
//!   `/proc/<pid>/fd/*`, `mem`, `environ` of, nor `pidfd_getfd` from, a
//!   process outside it — the server, the supervisors, another command or
//!   session (each one is its own sibling domain).
//! - ABI 2 (5.19): renames and links across directories (`Refer`) handled.
//! - ABI 3 (6.2): truncation handled.
//! - ABI 4 (6.7): with `--command-network off`, TCP `bind` and `connect`
//!   denied; with `--command-network-allow`, `connect` only to the proxy's
//!   port, `bind` denied. UDP and Unix-domain sockets are not covered by ABI 4–7.
//! - ABI 5 (6.10): device ioctls handled (allowed on the writable devices).
//! - ABI 6 (6.12): scoping: no signal to a process outside the domain (the
//!   server, the supervisors, other sessions), no connection to an abstract
//!   Unix socket created outside it.
//! - ABI 7 (6.15): audit logging controls only; nothing more is enforced.
//!
//! Requests are best effort: on an older kernel the missing rights are
//! dropped (the start-up probe, [`probe`], says which are active). A
//! kernel without Landlock is refused unless the sandbox is explicitly off.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};

use crate::Error;
use crate::network::{Network, PROXY_PORT};
use crate::protocol::ViewProbe;

/// The newest ABI whose rules this module was written and tested against.
const TESTED_ABI: ABI = ABI::V7;

/// Paths every command may write to, beside the root, its `TMPDIR` and the
/// operator's list (bash and common tools need them). In the view (see the
/// mounts module) `/dev/pts` and `/dev/ptmx` are the command's own
/// terminals: it opens new ones (`script`, Python's `pty`), not others'.
const ALWAYS_WRITABLE: &[&str] = [
    "/tmp",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
    "/dev/shm",
]
.as_slice();

/// What commands may touch. Paths must be absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The project root: writable.
    pub root: PathBuf,
    /// More writable paths (`--command-writable`), e.g. build caches.
    pub writable: Vec<PathBuf>,
    /// When set, reads (and execution) only below these paths, the root
    /// and the writable ones; `None`: everywhere.
    pub readable: Option<Vec<PathBuf>>,
    /// How commands reach the network (see the network module).
    pub network: Network,
    /// Commands may make namespaces (`--command-namespaces on`); refused
    /// by default (see the confine module).
    pub namespaces: bool,
    /// Ask for at most this ABI (tests simulate an older kernel with it;
    /// 0 simulates a kernel without Landlock). `None`: the newest tested.
    pub max_abi: Option<i32>,
    /// The view of the file system start-up found (see the mounts
    /// module), required of every command from then on: a supervisor that
    /// cannot build as much refuses to start the command. `None`: not
    /// probed yet (the probe itself), nothing required.
    pub view: Option<ViewProbe>,
    /// What the root and the writable and readable paths were when the
    /// server started ([`SandboxConfig::pin_identities`]): a supervisor
    /// builds its rules and its view only from a path that still leads to
    /// the same directory, so renaming or replacing the path or any of its
    /// ancestors changes nothing for later commands (they are refused).
    pub identities: Vec<(PathBuf, FileId)>,
    /// Directories the view covers with an empty read-only file system,
    /// so commands read nothing in them: the server's state directory
    /// (its local token, journals, records). Pinned like the others.
    pub hidden: Vec<PathBuf>,
}

/// A file's identity: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// The device it is on.
    pub dev: u64,
    /// Its inode on that device.
    pub ino: u64,
}

impl FileId {
    fn of(stat: &rustix::fs::Stat) -> Self {
        Self { dev: stat.st_dev, ino: stat.st_ino }
    }

    fn word(self) -> String {
        format!("{}:{}", self.dev, self.ino)
    }

    fn from_word(word: &str) -> Option<Self> {
        let (dev, ino) = word.split_once(':')?;
        Some(Self { dev: dev.parse().ok()?, ino: ino.parse().ok()? })
    }
}

impl SandboxConfig {
    /// Writes only below `root` (and the defaults), reads everywhere,
    /// network on.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            writable: Vec::new(),
            readable: None,
            network: Network::On,
            namespaces: false,
            max_abi: None,
            view: None,
            identities: Vec::new(),
            hidden: Vec::new(),
        }
    }

    /// Records what the root and the writable and readable paths are now
    /// (see [`SandboxConfig::identities`]): called once, at the server's
    /// start.
    ///
    /// # Errors
    /// A path cannot be looked up.
    pub fn pin_identities(&mut self) -> Result<(), Error> {
        let paths: Vec<PathBuf> = std::iter::once(&self.root)
            .chain(&self.writable)
            .chain(self.readable.iter().flatten())
            .chain(&self.hidden)
            .cloned()
            .collect();
        self.identities = paths
            .into_iter()
            .map(|path| match rustix::fs::stat(&path) {
                Ok(stat) => Ok((path, FileId::of(&stat))),
                Err(errno) => Err(Error::Os { step: "identity", path: Some(path), errno }),
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// The identity `path` had at the server's start, if it was recorded.
    pub(crate) fn identity(&self, path: &Path) -> Option<FileId> {
        self.identities.iter().find(|(p, _)| p == path).map(|(_, id)| *id)
    }

    /// Opens `path` (`O_PATH`, following links as Landlock would) and
    /// checks it is what it was at the server's start; `Ok(None)` when it
    /// does not exist and nothing was recorded for it.
    ///
    /// # Errors
    /// [`Error::Moved`]: it leads elsewhere now (or nowhere).
    pub(crate) fn open_pinned(&self, path: &Path) -> Result<Option<OwnedFd>, Error> {
        use rustix::fs::{Mode, OFlags};
        let expected = self.identity(path);
        let fd = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(_) if expected.is_none() => return Ok(None),
            Err(_) => return Err(Error::Moved(path.to_path_buf())),
        };
        let now = rustix::fs::fstat(&fd).map_err(|e| Error::os_at("identity", path, e))?;
        match expected {
            Some(id) if id != FileId::of(&now) => Err(Error::Moved(path.to_path_buf())),
            _ => Ok(Some(fd)),
        }
    }

    fn abi(&self) -> ABI {
        match self.max_abi {
            Some(n) => ABI::from(n.min(TESTED_ABI as i32)),
            None => TESTED_ABI,
        }
    }

    /// The supervisor's arguments that carry this configuration (parsed
    /// back by [`SandboxConfig::from_args`]).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from("--landlock"), self.root.clone().into()];
        for p in &self.writable {
            args.push("--write".into());
            args.push(p.into());
        }
        for p in self.readable.iter().flatten() {
            args.push("--read".into());
            args.push(p.into());
        }
        match self.network {
            Network::On => {}
            Network::Off => args.push("--no-network".into()),
            Network::Proxy => args.push("--network-proxy".into()),
        }
        if self.namespaces {
            args.push("--namespaces".into());
        }
        if let Some(n) = self.max_abi {
            args.push("--max-abi".into());
            args.push(n.to_string().into());
        }
        if let Some(view) = self.view {
            args.push("--view".into());
            args.push(view.word().into());
        }
        for p in &self.hidden {
            args.push("--hide".into());
            args.push(p.into());
        }
        for (path, id) in &self.identities {
            args.push("--identity".into());
            args.push(path.into());
            args.push(id.word().into());
        }
        args
    }

    /// Takes the sandbox options off the front of the supervisor's
    /// arguments; `Ok(None)` when there are none (sandbox off).
    pub(crate) fn from_args(
        args: &mut std::iter::Peekable<impl Iterator<Item = OsString>>,
    ) -> Result<Option<Self>, ()> {
        if args.next_if(|a| a == "--landlock").is_none() {
            return Ok(None);
        }
        let mut cfg = Self::new(args.next().ok_or(())?);
        loop {
            if args.next_if(|a| a == "--write").is_some() {
                cfg.writable.push(args.next().ok_or(())?.into());
            } else if args.next_if(|a| a == "--read").is_some() {
                cfg.readable.get_or_insert_with(Vec::new).push(args.next().ok_or(())?.into());
            } else if args.next_if(|a| a == "--no-network").is_some() {
                cfg.network = Network::Off;
            } else if args.next_if(|a| a == "--network-proxy").is_some() {
                cfg.network = Network::Proxy;
            } else if args.next_if(|a| a == "--namespaces").is_some() {
                cfg.namespaces = true;
            } else if args.next_if(|a| a == "--max-abi").is_some() {
                let n = args.next().ok_or(())?;
                cfg.max_abi = Some(n.to_str().and_then(|s| s.parse().ok()).ok_or(())?);
            } else if args.next_if(|a| a == "--view").is_some() {
                let view = args.next().ok_or(())?;
                cfg.view = Some(view.to_str().and_then(ViewProbe::from_word).ok_or(())?);
            } else if args.next_if(|a| a == "--hide").is_some() {
                cfg.hidden.push(args.next().ok_or(())?.into());
            } else if args.next_if(|a| a == "--identity").is_some() {
                let path = PathBuf::from(args.next().ok_or(())?);
                let id = args.next().ok_or(())?;
                cfg.identities.push((path, id.to_str().and_then(FileId::from_word).ok_or(())?));
            } else {
                return Ok(Some(cfg));
            }
        }
    }

    /// Restricts the calling thread (and so every process it starts from
    /// now on). Call it in a thread that does nothing else.
    pub(crate) fn restrict_this_thread(&self) -> Result<Active, Error> {
        self.prepare()?.restrict_this_thread(None)
    }

    /// Creates the Landlock ruleset with every rule of this configuration,
    /// without enforcing it yet: a supervisor started ahead of its command
    /// does this before the command comes.
    pub(crate) fn prepare(&self) -> Result<Prepared, Error> {
        let abi = self.abi();
        if abi == ABI::Unsupported {
            return Err(Error::LandlockUnavailable("Landlock is disabled (max ABI 0)".to_owned()));
        }
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let mut ruleset =
            Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(all)?;
        let net = AccessNet::from_all(abi);
        let net_handled = self.network != Network::On && !net.is_empty();
        if net_handled {
            ruleset = ruleset.handle_access(net)?;
        }
        let scope = Scope::from_all(abi);
        if !scope.is_empty() {
            ruleset = ruleset.scope(scope)?;
        }
        let writable: Vec<&Path> = std::iter::once(self.root.as_path())
            .chain(self.writable.iter().map(PathBuf::as_path))
            .chain(ALWAYS_WRITABLE.iter().map(Path::new))
            .collect();
        let readable: Vec<&Path> = match &self.readable {
            Some(paths) => paths.iter().map(PathBuf::as_path).collect(),
            None => vec![Path::new("/")],
        };
        let mut ruleset = ruleset
            .create()?
            .add_rules(self.pinned_rules(&readable, read, abi)?)?
            .add_rules(self.pinned_rules(&writable, all, abi)?)?;
        if net_handled && self.network == Network::Proxy {
            // TCP connects reach only the proxy's port (the namespace has
            // nothing else on it anyway), and nothing may listen.
            ruleset = ruleset.add_rule(NetPort::new(PROXY_PORT, AccessNet::ConnectTcp))?;
        }
        Ok(Prepared { ruleset, abi, network: self.network })
    }

    /// The rules giving `access` beneath each of `paths`, each built from
    /// the directory [`SandboxConfig::open_pinned`] checked (a file gets
    /// the rights that apply to files). A path that does not exist and was
    /// not recorded is skipped, as Landlock's own helper does.
    fn pinned_rules(
        &self,
        paths: &[&Path],
        access: BitFlags<AccessFs>,
        abi: ABI,
    ) -> Result<Vec<Result<PathBeneath<OwnedFd>, RulesetError>>, Error> {
        let mut rules = Vec::with_capacity(paths.len());
        for path in paths {
            let Some(fd) = self.open_pinned(path)? else { continue };
            let is_file = rustix::fs::fstat(&fd)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
            let access = if is_file { access & AccessFs::from_file(abi) } else { access };
            rules.push(Ok(PathBeneath::new(fd, access)));
        }
        Ok(rules)
    }
}

/// A sandbox's ruleset, created but not yet enforced (see
/// [`SandboxConfig::prepare`]).
pub(crate) struct Prepared {
    ruleset: landlock::RulesetCreated,
    abi: ABI,
    network: Network,
}

impl Prepared {
    /// Adds `writable` (a command's private `TMPDIR`) with every right,
    /// then restricts the calling thread (and so every process it starts
    /// from now on). Call it in a thread that does nothing else.
    pub(crate) fn restrict_this_thread(self, writable: Option<&Path>) -> Result<Active, Error> {
        let Prepared { ruleset, abi, network } = self;
        let status = ruleset
            .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))?
            .restrict_self()?;
        let kernel_abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
            LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
        };
        if status.ruleset == RulesetStatus::NotEnforced || kernel_abi == 0 {
            return Err(Error::LandlockUnavailable(format!(
                "Landlock is not available on this kernel ({:?})",
                status.landlock
            )));
        }
        let abi = kernel_abi.min(abi as i32);
        let tcp = match network {
            Network::On => TcpRule::Allowed,
            _ if abi < 4 => TcpRule::Allowed,
            Network::Off => TcpRule::Denied,
            Network::Proxy => TcpRule::ProxyOnly,
        };
        Ok(Active { abi, tcp, scoped: abi >= 6 })
    }
}

/// What a sandbox enforces on this kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Active {
    /// The Landlock ABI in use (the kernel's, capped at the tested one).
    pub abi: i32,
    /// What Landlock lets TCP `bind`/`connect` do (ABI 4+).
    pub tcp: TcpRule,
    /// Signals and abstract Unix sockets scoped to the command (ABI 6+).
    pub scoped: bool,
}

/// What Landlock lets a command's TCP sockets do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpRule {
    /// Not handled (the network on, or ABI < 4).
    Allowed,
    /// No `bind`, no `connect`.
    Denied,
    /// `connect` to the proxy's port only, no `bind`.
    ProxyOnly,
}

impl std::fmt::Display for Active {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "landlock ABI {}: fs writes confined, ptrace/proc scoped; tcp {}; signals/abstract sockets {}",
            self.abi,
            match self.tcp {
                TcpRule::Allowed => "allowed",
                TcpRule::Denied => "denied",
                TcpRule::ProxyOnly => "only to the proxy",
            },
            if self.scoped { "scoped" } else { "not scoped (ABI < 6)" },
        )
    }
}

/// Checks at start-up that the sandbox can be applied here, in a thread
/// that ends right after (the caller stays unrestricted), and says what it
/// enforces. The paths were checked to exist when the settings were read
/// (`CommandSettings::config`).
///
/// # Errors
/// Why Landlock cannot be applied here.
pub fn probe(cfg: &SandboxConfig) -> Result<Active, Error> {
    let cfg = cfg.clone();
    std::thread::spawn(move || cfg.restrict_this_thread())
        .join()
        .map_err(|_| Error::ProbePanicked)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip() {
        let mut cfg = SandboxConfig::new("/r");
        cfg.writable = vec!["/w".into()];
        cfg.readable = Some(vec!["/a".into(), "/b".into()]);
        cfg.network = Network::Proxy;
        cfg.namespaces = true;
        cfg.max_abi = Some(3);
        cfg.view = Some(ViewProbe::Own);
        cfg.identities = vec![("/r".into(), FileId { dev: 2049, ino: 12 })];
        cfg.hidden = vec!["/state".into()];
        let mut args = cfg.to_args();
        args.extend(["run".into(), "x".into()]);
        let mut it = args.into_iter().peekable();
        assert_eq!(SandboxConfig::from_args(&mut it), Ok(Some(cfg)));
        assert_eq!(it.next().as_deref(), Some(std::ffi::OsStr::new("run")));
        let mut none = vec![OsString::from("session")].into_iter().peekable();
        assert_eq!(SandboxConfig::from_args(&mut none), Ok(None));
    }
}
