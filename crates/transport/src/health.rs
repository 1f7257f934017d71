//! The `healthcheck` probe for Docker (the image has no shell or curl).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// `GET /healthz` on the loopback address of `listen`'s family and port;
/// true on HTTP 200.
pub fn probe_health(listen: SocketAddr, timeout: Duration) -> bool {
    let target = match listen {
        SocketAddr::V4(a) => SocketAddr::from((Ipv4Addr::LOCALHOST, a.port())),
        SocketAddr::V6(a) => SocketAddr::from((Ipv6Addr::LOCALHOST, a.port())),
    };
    let attempt = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&target, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(&head[..9] == b"HTTP/1.1 " && &head[9..12] == b"200")
    };
    attempt().unwrap_or(false)
}
