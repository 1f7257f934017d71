//! The network a sandboxed command sees (`--command-network`,
//! `--command-network-allow`).
//!
//! - [`Network::On`]: the host's network, as the server's.
//! - [`Network::Off`]: no socket but a Unix one (the seccomp filter), no TCP
//!   `bind`/`connect` (Landlock ABI 4+), and, where the view could be built
//!   and the kernel gives one, a network namespace of its own with nothing
//!   in it (not even loopback).
//! - [`Network::Proxy`]: a network namespace of its own with loopback only,
//!   in which the supervisor listens on [`PROXY_ADDR`] before the command
//!   starts and hands the listening socket to the server: the server's proxy
//!   accepts every connection a command makes to it, straight from the
//!   command's namespace (no relay in between), and is its only way out.
//!   Every proxy variable of [`PROXY_ENV`] names it. Landlock (ABI 4+) lets
//!   TCP `connect` reach only [`PROXY_PORT`] and `bind` nothing, as a second
//!   layer should the namespace ever be missing; a supervisor that cannot
//!   make the namespace refuses to start the command.
//!
//! Nothing leaves a namespace of its own but through a descriptor made
//! outside it: direct TCP, UDP, DNS, raw sockets, IPv6 and MPTCP all find
//! no route, whatever the command's capabilities there.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use rustix::io::Errno;

use crate::Error;

/// How commands reach the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Network {
    /// The host's network (`--command-network on`, the default).
    #[default]
    On,
    /// None (`--command-network off`).
    Off,
    /// Only through the server's proxy (`--command-network-allow`).
    Proxy,
}

/// The port the proxy listens on in every command's own namespace (fixed:
/// each namespace has its own loopback, and the command's environment can
/// name it before the supervisor exists).
pub const PROXY_PORT: u16 = 3128;

/// The address of the proxy in a command's namespace.
pub const PROXY_ADDR: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, PROXY_PORT);

/// The proxy's URL, as the proxy variables give it.
pub const PROXY_URL: &str = "http://127.0.0.1:3128";

/// The variables a command gets with [`Network::Proxy`], each with its
/// value: the ones curl, Python (urllib, requests, pip), git, cargo, npm
/// and Go read; `NO_PROXY` empty, so that no tool goes direct for any host
/// (there is no route).
pub const PROXY_ENV: [(&str, &str); 14] = [
    ("HTTP_PROXY", PROXY_URL),
    ("HTTPS_PROXY", PROXY_URL),
    ("ALL_PROXY", PROXY_URL),
    ("http_proxy", PROXY_URL),
    ("https_proxy", PROXY_URL),
    ("all_proxy", PROXY_URL),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
    ("CARGO_HTTP_PROXY", PROXY_URL),
    ("npm_config_proxy", PROXY_URL),
    ("npm_config_https_proxy", PROXY_URL),
    ("PIP_PROXY", PROXY_URL),
    // Yarn 2+ and pnpm read npm's; Yarn 1 reads these.
    ("YARN_HTTP_PROXY", PROXY_URL),
    ("YARN_HTTPS_PROXY", PROXY_URL),
];

/// Loopback's interface index in a new network namespace (the kernel
/// registers it first, always as 1).
const LOOPBACK_INDEX: i32 = 1;

impl Network {
    /// Enters a network namespace of its own as `self` asks, and for
    /// [`Network::Proxy`] listens on [`PROXY_ADDR`] in it. Call it with the
    /// capabilities to make one (root, or in the view's user namespace).
    ///
    /// # Errors
    /// The namespace, loopback or the listening socket could not be made.
    pub(crate) fn enter(self) -> Result<Option<TcpListener>, Error> {
        match self {
            Self::On => Ok(None),
            // A bonus beside the seccomp filter and Landlock, which refuse
            // every socket but a Unix one anyway: where the kernel refuses
            // the namespace (the user's used up, say), commands go without.
            Self::Off => match crate::mounts::unshare(rustix::thread::UnshareFlags::NEWNET) {
                Ok(())
                | Err(Errno::PERM | Errno::ACCESS | Errno::INVAL | Errno::NOSPC | Errno::USERS) => {
                    Ok(None)
                }
                Err(e) => Err(Error::os("network namespace", e)),
            },
            Self::Proxy => {
                crate::mounts::unshare(rustix::thread::UnshareFlags::NEWNET)
                    .map_err(|e| Error::os("network namespace", e))?;
                loopback_up()?;
                let listener = TcpListener::bind(PROXY_ADDR)
                    .map_err(|error| Error::Io { step: "proxy endpoint", error })?;
                Ok(Some(listener))
            }
        }
    }
}

/// Brings loopback up in this network namespace: one `RTM_NEWLINK` request
/// over rtnetlink setting `IFF_UP` on interface 1, and its acknowledgement.
/// (Written out here rather than with a netlink crate: 32 bytes, and this
/// crate's dependencies are kept to the few it has.)
fn loopback_up() -> Result<(), Error> {
    use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
    let step = |e: Errno| Error::os("loopback", e);
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None, // NETLINK_ROUTE
    )
    .map_err(step)?;
    let up = libc::IFF_UP as u32;
    let mut request = Vec::with_capacity(32);
    // struct nlmsghdr
    request.extend_from_slice(&32u32.to_ne_bytes());
    request.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
    request.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    request.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel assigns
    // struct ifinfomsg
    request.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
    request.extend_from_slice(&0u16.to_ne_bytes()); // device type
    request.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    request.extend_from_slice(&up.to_ne_bytes()); // flags
    request.extend_from_slice(&up.to_ne_bytes()); // the flags changed
    rustix::net::send(&socket, &request, SendFlags::empty()).map_err(step)?;
    // The acknowledgement: an NLMSG_ERROR message whose error is 0.
    let mut answer = [0u8; 128];
    let (len, _) = rustix::net::recv(&socket, &mut answer, RecvFlags::empty()).map_err(step)?;
    let field = |at: usize| answer.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok());
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    match (len >= 20, kind, field(16).map(i32::from_ne_bytes)) {
        (true, Some(kind), Some(0)) if i32::from(kind) == libc::NLMSG_ERROR => Ok(()),
        (true, Some(kind), Some(error)) if i32::from(kind) == libc::NLMSG_ERROR => {
            Err(step(Errno::from_raw_os_error(-error)))
        }
        _ => Err(step(Errno::PROTO)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_proxy_variable_names_the_endpoint_or_is_empty() {
        for (key, value) in PROXY_ENV {
            assert!(
                value == PROXY_URL || (key.eq_ignore_ascii_case("no_proxy") && value.is_empty())
            );
        }
        assert_eq!(PROXY_URL, format!("http://{PROXY_ADDR}"));
    }
}
