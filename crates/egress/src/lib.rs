/*!
The way out for commands on the network by allowlist
(`--command-network-allow`): an HTTP proxy in the server that admits listed
hosts only, at public addresses only, and writes an audit line for every
connection.

Who listens where: each command runs in a network namespace of its own with
loopback only (see `serverfs-supervisor`'s network module). Its supervisor
makes a listening socket on `127.0.0.1:3128` there and hands it to the
server; [`Egress::serve`] accepts on it, in the server, for as long as the
command lives. So a connection a command makes to the proxy arrives in the
server directly (no relay process, nothing copied twice), and the proxy
knows which command and principal it serves without asking the peer.

What it guarantees, per connection:

- Only `CONNECT host:port` (tunnels, for HTTPS) and absolute-form plain
  HTTP requests; anything else is a 400.
- The host is matched by the name the client sent ([`Allowlist`]); a name is
  resolved here, and only its public addresses are connected to (the
  address module): no DNS answer leads to loopback, a private network,
  cloud metadata or the server's own listening address. An address listed
  literally is reached as listed.
- A refusal is a 403 whose body names the host and why; it is also kept
  for the command's answer ([`CommandNet::refusals`]).
- Bounded: [`MAX_CONNECTIONS`] client connections at once per command, a
  request head within [`HEADER_TIMEOUT`] and 16 KiB, a tunnel closed after
  [`IDLE_TIMEOUT`] without a byte either way; everything a command opened
  is closed when it ends.
- One INFO `network` line per connection: principal, command, host, port,
  verdict (`allowed`, `refused`, `failed`), reason, bytes each way,
  duration.
*/
#![deny(missing_docs)]

mod address;
mod allow;
mod relay;

use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use address::is_public;
pub use allow::{Allowlist, DEFAULT_PORTS, Host};

/// Client connections to the proxy one command may hold at once; more are
/// closed as they come.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a tunnel or a forwarded request may pass no byte either way.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a name may take to resolve, and a connection to be made.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The proxy: the allowlist and the addresses it never connects to.
#[derive(Debug)]
pub struct Egress {
    allow: Allowlist,
    /// The server's own listening addresses: never reached by name.
    own: Vec<SocketAddr>,
}

/// Whom a command's connections are for, as its audit lines name them.
#[derive(Clone, Debug)]
pub struct Who {
    /// The principal that ran the command.
    pub principal: String,
    /// The command's id (its audit line's `command_id`).
    pub command: String,
}

/// A command's side of the proxy, serving while it lives: dropping it
/// closes the command's listening socket and every connection it opened.
#[derive(Debug)]
pub struct CommandNet {
    _stop: tokio_util::sync::DropGuard,
    refused: Arc<Mutex<Vec<String>>>,
}

impl CommandNet {
    /// One line per host refused so far, in order, each once
    /// (`network: refused evil.example:443 (not in --command-network-allow)`).
    pub fn refusals(&self) -> Vec<String> {
        self.refused.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Egress {
    /// A proxy admitting `allow`.
    pub fn new(allow: Allowlist) -> Self {
        Self { allow, own: Vec::new() }
    }

    /// Never connects to `addr` (the server's own listening address) for a
    /// host named in the allowlist; an address listed literally still is.
    pub fn refuse_own(&mut self, addr: SocketAddr) {
        self.own.push(addr);
    }

    /// Serves one command: receives its listening socket on `channel` (see
    /// the crate docs) and accepts on it until the returned handle is
    /// dropped. Must be called inside a tokio runtime.
    pub fn serve(self: &Arc<Self>, channel: UnixStream, who: Who) -> CommandNet {
        let stop = tokio_util::sync::CancellationToken::new();
        let refused = Arc::default();
        let command =
            Arc::new(relay::Command::new(self.clone(), who, Arc::clone(&refused), stop.clone()));
        tokio::spawn(async move {
            tokio::select! {
                () = command.stop.cancelled() => {}
                () = relay::accept(Arc::clone(&command), channel) => {}
            }
        });
        CommandNet { _stop: stop.drop_guard(), refused }
    }

    /// The addresses to connect to for `host:port`, or why it is refused.
    async fn resolve(&self, host: &Host, port: u16) -> Result<Vec<SocketAddr>, String> {
        if !self.allow.admits(host, port) {
            return Err("not in --command-network-allow".to_owned());
        }
        let name = match host {
            Host::Address(ip) => return Ok(vec![SocketAddr::new(*ip, port)]),
            Host::Name(name) => name,
        };
        let found: Vec<SocketAddr> = match tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::lookup_host((name.as_str(), port)),
        )
        .await
        {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(_)) => return Err("its name does not resolve".to_owned()),
            Err(_) => return Err("its name did not resolve in time".to_owned()),
        };
        let (public, other): (Vec<SocketAddr>, Vec<SocketAddr>) =
            found.into_iter().partition(|a| is_public(a.ip()) && !self.is_own(*a));
        match (public.is_empty(), other.first()) {
            (false, _) => Ok(public),
            (true, Some(addr)) => Err(format!(
                "resolves to {}, not a public address; only an address listed literally may be reached",
                addr.ip()
            )),
            (true, None) => Err("its name does not resolve".to_owned()),
        }
    }

    /// Whether `addr` is the server's own listening address (one bound to
    /// every interface counts for each of the machine's addresses).
    fn is_own(&self, addr: SocketAddr) -> bool {
        self.own.iter().any(|own| {
            own.port() == addr.port()
                && (own.ip() == addr.ip()
                    || (own.ip().is_unspecified()
                        && std::net::UdpSocket::bind((addr.ip(), 0)).is_ok()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_s_own_address_is_recognised_also_behind_the_unspecified_one() {
        let mut egress = Egress::new(Allowlist::default());
        egress.refuse_own("127.0.0.1:8080".parse().unwrap());
        egress.refuse_own("0.0.0.0:9090".parse().unwrap());
        assert!(egress.is_own("127.0.0.1:8080".parse().unwrap()));
        assert!(!egress.is_own("127.0.0.1:8081".parse().unwrap()));
        // Every address of this machine is 0.0.0.0's: loopback is one.
        assert!(egress.is_own("127.0.0.1:9090".parse().unwrap()));
        // An address no interface here has (documentation range) is not.
        assert!(!egress.is_own("192.0.2.1:9090".parse().unwrap()));
    }
}
