//! What every command runs under besides Landlock, sandbox on or off: no
//! controlling terminal, no new privileges, no capabilities when the server
//! is root, and a seccomp filter.
//!
//! - **No terminal.** The supervisor starts a session of its own (see the
//!   supervisor module), so bash and everything it starts have no
//!   controlling terminal: `/dev/tty` does not open, and `TIOCSTI` on a
//!   terminal that is not the caller's own is refused by the kernel to all
//!   but `CAP_SYS_ADMIN`. On kernels with `dev.tty.legacy_tiocsti=0`
//!   (Linux 6.2+, off by default in most distributions) the ioctl is gone
//!   anyway. The filter refuses `TIOCSTI` and `TIOCLINUX` as well, so the
//!   layers do not depend on each other.
//! - **No new privileges** (`PR_SET_NO_NEW_PRIVS`): a set-user-ID or
//!   file-capability program gains nothing.
//! - **IPC of its own**: each command gets an IPC namespace (SysV objects
//!   and POSIX message queues; removed when it ends) where the kernel lets
//!   the supervisor make one: as root, or in the user namespace of the
//!   sandbox's view (see the mounts module, which also gives each command
//!   its own `/dev/shm`, where POSIX shared memory lives).
//! - **No capabilities as root**: the bounding and ambient sets are emptied
//!   and the thread that starts bash drops every capability, so a command of
//!   a root server is root without privileges: no device nodes, raw
//!   sockets, mounts, module loads, clock or hostname changes, no reading
//!   other users' files past their modes.
//! - **The seccomp filter** (each refused call fails with `EPERM`):
//!   - `ioctl` `TIOCSTI`, `TIOCLINUX`: typing into a terminal.
//!   - `mount`, `umount2`, `pivot_root`, the new mount API (`fsopen`,
//!     `fsconfig`, `fsmount`, `move_mount`, `fspick`, `open_tree`,
//!     `mount_setattr`),
//!     `setns`: changing what the file system is, or entering another
//!     process's namespaces.
//!   - `init_module`, `finit_module`, `delete_module`, `kexec_load`,
//!     `kexec_file_load`, `reboot`, `bpf`, `perf_event_open`, `acct`,
//!     `swapon`, `swapoff`: the kernel itself.
//!   - `open_by_handle_at`: opening a file by handle bypasses the path
//!     (and so Landlock).
//!   - `prctl(PR_SET_DUMPABLE)`: a non-dumpable command hides its open
//!     files from the server, which looks there to refuse a command's
//!     connection to its own anonymous `/mcp` (see the peer module).
//!   - `settimeofday`, `clock_settime`, `clock_adjtime`, `adjtimex`,
//!     `sethostname`, `setdomainname`: machine-wide state.
//!   - `keyctl`, `add_key`, `request_key`: kernel keyrings outlive the
//!     command and are shared by the user's processes.
//!   - `socket` of `AF_PACKET`, or of type `SOCK_RAW`: sniffing loopback
//!     (another caller's bearer token) and forging packets.
//!   - `prlimit64`, `sched_setattr`, `sched_setscheduler`,
//!     `sched_setparam`, `sched_setaffinity` on any process but the
//!     caller (pid 0), `setpriority` and `ioprio_set` on anything but the
//!     caller (`PRIO_PROCESS`/`IOPRIO_WHO_PROCESS` with 0): starving or
//!     killing (`RLIMIT_CPU`) the server and other callers' commands. Naming
//!     oneself by pid is refused too (`renice -n 5 $$`; use 0).
//!   - `unshare` and `clone` making any namespace (`CLONE_NEWUSER`,
//!     `CLONE_NEWNS`, `CLONE_NEWNET`, …), and `clone3` as unknown
//!     (`ENOSYS`: libc falls back to `clone`), unless
//!     `--command-namespaces on`: a command can neither use up the user's
//!     namespaces, which every later command's view needs (the view fails
//!     closed: commands would be refused), nor reach the kernel surface a
//!     user namespace opens. Tools that build their own sandbox from
//!     namespaces (bubblewrap, rootless podman, Chromium's sandbox) need
//!     that setting (or their own way off: `--no-sandbox`).
//!   - With `--command-network off`: every `socket` family but `AF_UNIX`
//!     (TCP, UDP, MPTCP, SCTP, ICMP; `listen` without `bind` included,
//!     since the socket cannot be made), and `io_uring_setup` (its
//!     `IORING_OP_SOCKET` makes sockets past the filter).
//!
//! The filter is compiled once per supervisor, before its command comes.

use rustix::thread::CapabilitySet;

use crate::Error;
use crate::network::Network;
use crate::sandbox::SandboxConfig;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// The capabilities a root server's commands keep
/// (`--command-capabilities`): none by default. Without root there are none
/// to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep(CapabilitySet);

impl Default for Keep {
    fn default() -> Self {
        Self(CapabilitySet::empty())
    }
}

impl Keep {
    /// `names` (`CAP_MKNOD` or `mknod`, any case).
    ///
    /// # Errors
    /// The first name that is not a capability.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, Error> {
        let mut set = CapabilitySet::empty();
        for name in names.iter().map(|n| n.as_ref().trim()).filter(|n| !n.is_empty()) {
            let upper = name.to_ascii_uppercase();
            let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
            let shown: String = name.chars().filter(|c| !c.is_control()).take(40).collect();
            let flag = CapabilitySet::from_name(bare).ok_or(Error::UnknownCapability(shown))?;
            set |= flag;
        }
        Ok(Self(set))
    }

    /// Whether no capability is kept.
    pub fn is_empty(self) -> bool {
        self.0.is_empty()
    }

    /// The kept capabilities' names (`CAP_MKNOD`), for the log.
    pub fn names(self) -> Vec<String> {
        self.0.iter_names().map(|(name, _)| format!("CAP_{name}")).collect()
    }

    /// The supervisor's arguments that carry it (none when empty).
    pub fn to_args(self) -> Vec<std::ffi::OsString> {
        if self.is_empty() {
            return Vec::new();
        }
        vec!["--keep-capabilities".into(), self.0.bits().to_string().into()]
    }

    /// Takes it off the front of the supervisor's arguments.
    pub(crate) fn from_args(
        args: &mut std::iter::Peekable<impl Iterator<Item = std::ffi::OsString>>,
    ) -> Result<Self, ()> {
        if args.next_if(|a| a == "--keep-capabilities").is_none() {
            return Ok(Self::default());
        }
        let bits = args.next().and_then(|b| b.to_str()?.parse().ok()).ok_or(())?;
        CapabilitySet::from_bits(bits).map(Self).ok_or(())
    }
}

/// The compiled seccomp filter of a command (one program: the kernel runs
/// every installed filter on every system call).
pub(crate) struct Filter(BpfProgram);

/// The `CLONE_NEW*` flags: each makes a namespace.
const NAMESPACE_FLAGS: [i32; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWTIME,
];

/// A condition on argument `index` as a 32-bit value (every argument the
/// rules look at is an `int`).
fn arg32(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, Error> {
    Ok(SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)?)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, Error> {
    Ok(SeccompRule::new(conditions)?)
}

impl Filter {
    /// The filter of the module docs for commands under `sandbox` (its
    /// `--command-network`; with the sandbox off the network is on).
    pub(crate) fn new(sandbox: Option<&SandboxConfig>) -> Result<Self, Error> {
        let network = sandbox.is_none_or(|s| s.network != Network::Off);
        use SeccompCmpOp::{Eq, MaskedEq, Ne};
        let always = [
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_move_mount,
            libc::SYS_fspick,
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
            libc::SYS_setns,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_reboot,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_acct,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_open_by_handle_at,
            libc::SYS_settimeofday,
            libc::SYS_clock_settime,
            libc::SYS_clock_adjtime,
            libc::SYS_adjtimex,
            libc::SYS_sethostname,
            libc::SYS_setdomainname,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
        ];
        let mut rules: Vec<(i64, Vec<SeccompRule>)> =
            always.into_iter().map(|call| (call, Vec::new())).collect();
        rules.push((
            libc::SYS_prctl,
            vec![rule(vec![arg32(0, Eq, libc::PR_SET_DUMPABLE as u64)?])?],
        ));
        rules.push((
            libc::SYS_ioctl,
            vec![
                rule(vec![arg32(1, Eq, libc::TIOCSTI)?])?,
                rule(vec![arg32(1, Eq, libc::TIOCLINUX)?])?,
            ],
        ));
        // The kernel's SOCK_TYPE_MASK: the type without SOCK_NONBLOCK/CLOEXEC.
        let socket_type = 0xf;
        let mut socket = vec![
            rule(vec![arg32(0, Eq, libc::AF_PACKET as u64)?])?,
            rule(vec![arg32(1, MaskedEq(socket_type), libc::SOCK_RAW as u64)?])?,
        ];
        if !network {
            socket.push(rule(vec![arg32(0, Ne, libc::AF_UNIX as u64)?])?);
            rules.push((libc::SYS_io_uring_setup, Vec::new()));
        }
        rules.push((libc::SYS_socket, socket));
        for call in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setattr,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setaffinity,
        ] {
            rules.push((call, vec![rule(vec![arg32(0, Ne, 0)?])?]));
        }
        let (prio_process, ioprio_who_process) = (libc::PRIO_PROCESS as u64, 1);
        for (call, who_process) in
            [(libc::SYS_setpriority, prio_process), (libc::SYS_ioprio_set, ioprio_who_process)]
        {
            rules.push((
                call,
                vec![rule(vec![arg32(0, Ne, who_process)?])?, rule(vec![arg32(1, Ne, 0)?])?],
            ));
        }
        let namespaces = sandbox.is_none_or(|s| s.namespaces);
        if !namespaces {
            // unshare(flags) and clone(flags, …): arg 0, each flag alone.
            let any_namespace = NAMESPACE_FLAGS
                .iter()
                .map(|&flag| rule(vec![arg32(0, MaskedEq(flag as u64), flag as u64)?]))
                .collect::<Result<Vec<_>, _>>()?;
            rules.push((libc::SYS_unshare, any_namespace.clone()));
            rules.push((libc::SYS_clone, any_namespace));
        }
        let arch = TargetArch::try_from(std::env::consts::ARCH)?;
        let filter = SeccompFilter::new(
            rules.into_iter().collect(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )?;
        let mut program = BpfProgram::try_from(filter)?;
        if !namespaces {
            // clone3 passes its flags in memory, out of a filter's sight:
            // refused as unknown (ENOSYS), so that libc falls back to clone,
            // whose flags the rule above sees (what Docker's profile does).
            // seccompiler gives a filter one action, so these three
            // instructions go first, by hand: load the call's number, and
            // if it is clone3 (the same number on every architecture the
            // filter can meet) return ENOSYS; else go on to the filter.
            const RET_ERRNO: u32 = 0x0005_0000; // SECCOMP_RET_ERRNO
            let first = [
                sock_filter { code: 0x20, jt: 0, jf: 0, k: 0 }, // ld [nr]
                sock_filter { code: 0x15, jt: 0, jf: 1, k: libc::SYS_clone3 as u32 }, // jeq
                sock_filter { code: 0x06, jt: 0, jf: 0, k: RET_ERRNO | libc::ENOSYS as u32 }, // ret
            ];
            program.splice(0..0, first);
        }
        Ok(Self(program))
    }

    /// Confines the calling thread (and so what it starts): no
    /// capabilities when it has any (root), no new privileges, the filter.
    /// Call it in a thread of its own that then starts bash and ends.
    pub(crate) fn confine_this_thread(&self, keep: Keep) -> Result<(), Error> {
        own_ipc().map_err(|e| Error::os("IPC namespace", e))?;
        drop_capabilities(keep.0).map_err(|e| Error::os("capabilities", e))?;
        // Also sets no_new_privs.
        Ok(seccompiler::apply_filter(&self.0)?)
    }
}

/// Checks at start-up that every command can be confined here: the filter
/// is compiled and installed in a thread of its own that then ends (a
/// thread's filter and no-new-privileges are its own), so a kernel or a
/// service manager without seccomp stops the server at once instead of
/// failing every command.
///
/// # Errors
/// Why the filter cannot be compiled or installed.
pub fn probe(sandbox: Option<&SandboxConfig>) -> Result<(), Error> {
    let filter = Filter::new(sandbox)?;
    std::thread::spawn(move || seccompiler::apply_filter(&filter.0))
        .join()
        .map_err(|_| Error::ProbePanicked)?
        .map_err(Error::from)
}

/// Gives what this thread starts an IPC namespace of its own when it may
/// (a root server, or a supervisor in a user namespace of its own: see the
/// mounts module): SysV shared memory, semaphores and message queues and
/// POSIX message queues another command made are invisible, and the
/// kernel removes a command's own when its last process ends. Where the
/// kernel refuses, commands share the user's (as every other process of
/// that user does).
fn own_ipc() -> rustix::io::Result<()> {
    match crate::mounts::unshare(rustix::thread::UnshareFlags::NEWIPC) {
        Ok(()) | Err(rustix::io::Errno::PERM) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Empties the bounding and ambient sets and this thread's capabilities
/// but `keep`, when it has any (a root server); nothing to do otherwise.
/// What bash then gets as root is what is left in the bounding set: `keep`.
fn drop_capabilities(keep: CapabilitySet) -> rustix::io::Result<()> {
    use rustix::thread::{
        CapabilitySets, capabilities, clear_ambient_capability_set,
        remove_capability_from_bounding_set, set_capabilities,
    };
    let mine = capabilities(None)?;
    if mine.effective.is_empty() && mine.permitted.is_empty() {
        return Ok(());
    }
    for capability in CapabilitySet::all().difference(keep).iter() {
        match remove_capability_from_bounding_set(capability) {
            // A capability this kernel does not know.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(e),
        }
    }
    clear_ambient_capability_set()?;
    let kept = |set: CapabilitySet| set & keep;
    set_capabilities(
        None,
        CapabilitySets {
            effective: kept(mine.effective),
            permitted: kept(mine.permitted),
            inheritable: kept(mine.permitted),
        },
    )
}
