//! Whether a TCP connection to the server comes from one of its own
//! commands: anonymous loopback HTTP has no credential to tell a command's
//! call to the server's own `/mcp` from the user's client, so serverfs-dev
//! refuses those connections (see [`from_own_command`]).
//!
//! TCP has no `SO_PEERCRED`: the peer's socket is found in the kernel's
//! table (`/proc/net/tcp`, `/proc/net/tcp6`) by its two addresses, and
//! then among the open files of this process's descendants. The
//! descendants other than the supervisors are listed first: without a
//! command running (only the supervisor waiting for one) nothing more is
//! read. A command cannot hide its files by making itself non-dumpable
//! (the seccomp filter refuses that, see the confine module). A command
//! that hands its connection to a process that is not a descendant (a
//! daemon it asks to connect for it) is not caught.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use crate::launch::supervisors;

/// Whether the peer of the connection `local` ↔ `peer` is a process that
/// descends from this one (a command, or anything it started). Errors
/// reading `/proc` count as "no".
pub fn from_own_command(local: SocketAddr, peer: SocketAddr) -> bool {
    let mut descendants = descendants();
    // Supervisors make no connection (and are not readable anyway).
    {
        let supervisors = supervisors();
        descendants.retain(|pid| i32::try_from(*pid).is_ok_and(|pid| !supervisors.contains(&pid)));
    }
    if descendants.is_empty() {
        return false;
    }
    let Some(inode) = socket_inode(peer, local) else { return false };
    let wanted = format!("socket:[{inode}]");
    descendants.iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == &*wanted)
            })
        })
    })
}

/// Every process below this one, from the threads' `children` files.
fn descendants() -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([std::process::id()]);
    while let Some(pid) = queue.pop_front() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                queue.push_back(child);
            }
        }
    }
    found
}

/// The inode of the socket whose local address is `own` and remote
/// address `remote`, from the kernel's TCP tables.
fn socket_inode(own: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let (own, remote) = (table_address(own), table_address(remote));
    ["/proc/net/tcp", "/proc/net/tcp6"].into_iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|row| {
            let fields: Vec<&str> = row.split_ascii_whitespace().collect();
            // sl local_address rem_address st … uid timeout inode
            match fields.as_slice() {
                [_, local, rem, _, _, _, _, _, _, inode, ..] if *local == own && *rem == remote => {
                    inode.parse().ok()
                }
                _ => None,
            }
        })
    })
}

/// An address as the TCP tables write it: the address's 32-bit words in
/// the machine's byte order, in hex, then `:` and the port in hex (an IPv4
/// client of an IPv6 listener is a mapped `::ffff:a.b.c.d` on both sides,
/// and in `tcp6`).
fn table_address(address: SocketAddr) -> String {
    let words: Vec<u32> = match address.ip() {
        IpAddr::V4(v4) => vec![u32::from_ne_bytes(v4.octets())],
        IpAddr::V6(v6) => v6
            .octets()
            .chunks_exact(4)
            .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    };
    let hex: String = words.iter().map(|w| format!("{w:08X}")).collect();
    format!("{hex}:{:04X}", address.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_the_kernel_tables_write_them() {
        let v4: SocketAddr = "127.0.0.1:8790".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(table_address(v4), "0100007F:2256");
            assert_eq!(table_address(v6), "00000000000000000000000001000000:0050");
        }
    }

    #[test]
    fn a_connection_of_this_process_is_found_only_among_descendants() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        let local = server.local_addr().unwrap();
        assert!(socket_inode(peer, local).is_some(), "the client's socket is in the table");
        // The client is this process, not a descendant of it.
        assert!(!from_own_command(local, peer));
        drop(client);
    }
}
