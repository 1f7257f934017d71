//! `--command-network-allow`: the hosts commands may reach, as the client
//! names them. An entry is `example.org` (that name), `*.example.org` (any
//! name below it, not itself), a literal address (`192.0.2.7`, `[2001:db8::7]`),
//! each with `:PORT` or, without, ports 443 and 80. Names compare
//! case-insensitively without a trailing dot; nothing else is normalised
//! (`127.1` is not `127.0.0.1`: it is not an address this parser reads, so
//! it is a name, and no name resolves past the public-address check).

use std::net::IpAddr;

/// The ports an entry without one allows.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// The allowlist, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    host: Pattern,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Name(String),
    /// `*.suffix`: names ending in `.suffix`.
    Below(String),
    Address(IpAddr),
}

/// A host a command asked for, as it named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A name, lower-cased, without a trailing dot.
    Name(String),
    /// A literal address.
    Address(IpAddr),
}

impl Host {
    /// The host of a request's authority (`name`, `1.2.3.4`, `[::1]`);
    /// `None` when it is neither a valid name nor an address.
    pub fn parse(host: &str) -> Option<Self> {
        if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return v6.parse().ok().map(Self::Address);
        }
        if let Ok(v4) = host.parse::<std::net::Ipv4Addr>() {
            return Some(Self::Address(IpAddr::V4(v4)));
        }
        valid_name(host).map(Self::Name)
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Address(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Self::Address(ip) => write!(f, "{ip}"),
        }
    }
}

/// `name` lower-cased without its trailing dot, when it is a DNS name
/// (letters, digits, `-` and `_` in labels of 1 to 63, 253 at most).
fn valid_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (!name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

impl Allowlist {
    /// Parses the entries (empty ones are skipped).
    ///
    /// # Errors
    /// The first entry that is not one, and why.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut parsed = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let entry = entry.as_ref().trim();
            if entry.is_empty() {
                continue;
            }
            parsed.push(Entry::parse(entry).map_err(|why| {
                format!("entry {} (`{}`): {why}", i + 1, entry.chars().take(80).collect::<String>())
            })?);
        }
        Ok(Self { entries: parsed })
    }

    /// Whether no host is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `host:port` is allowed. A literal address is admitted only
    /// by the same literal entry (then it is reached as listed); a name only
    /// by a name or `*.` entry (then only its public addresses are).
    pub fn admits(&self, host: &Host, port: u16) -> bool {
        self.entries.iter().any(|e| e.admits(host, port))
    }
}

impl Entry {
    fn parse(entry: &str) -> Result<Self, &'static str> {
        let (host, port) = split_port(entry)?;
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|&p| p != 0).ok_or("the port is not 1-65535"))
            .transpose()?;
        let host = if let Some(below) = host.strip_prefix("*.") {
            Pattern::Below(valid_name(below).ok_or("not a host name after `*.`")?)
        } else {
            match Host::parse(host).ok_or("not a host name or an address (IPv6 in brackets)")? {
                Host::Name(name) => Pattern::Name(name),
                Host::Address(ip) => Pattern::Address(ip),
            }
        };
        Ok(Self { host, port })
    }

    fn admits(&self, host: &Host, port: u16) -> bool {
        let port_ok = self.port.map_or(DEFAULT_PORTS.contains(&port), |p| p == port);
        port_ok
            && match (&self.host, host) {
                (Pattern::Name(n), Host::Name(h)) => n == h,
                (Pattern::Below(suffix), Host::Name(h)) => h
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                (Pattern::Address(a), Host::Address(h)) => a == h,
                _ => false,
            }
    }
}

/// `host` and its `:PORT`, if any (`[v6]:port` for IPv6).
fn split_port(entry: &str) -> Result<(&str, Option<&str>), &'static str> {
    if entry.starts_with('[') {
        let end = entry.find(']').ok_or("an IPv6 address without its `]`")?;
        let (host, rest) = entry.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => rest.strip_prefix(':').map(|p| (host, Some(p))).ok_or("junk after `]`"),
        };
    }
    match entry.split_once(':') {
        Some((_, port)) if port.contains(':') => Err("an IPv6 address must be in brackets"),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((entry, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(list: &[&str], host: &str, port: u16) -> bool {
        Allowlist::parse(list).unwrap().admits(&Host::parse(host).unwrap(), port)
    }

    #[test]
    fn names_suffixes_addresses_and_ports() {
        let list =
            ["crates.io", "*.github.com", "static.rust-lang.org:8443", "192.0.2.7:81", "[::1]"];
        assert!(admits(&list, "crates.io", 443));
        assert!(admits(&list, "CRATES.IO.", 80));
        assert!(!admits(&list, "crates.io", 22));
        assert!(!admits(&list, "index.crates.io", 443));
        assert!(admits(&list, "api.github.com", 443));
        assert!(admits(&list, "a.b.github.com", 443));
        assert!(!admits(&list, "github.com", 443));
        assert!(!admits(&list, "evilgithub.com", 443));
        assert!(admits(&list, "static.rust-lang.org", 8443));
        assert!(!admits(&list, "static.rust-lang.org", 443));
        assert!(admits(&list, "192.0.2.7", 81));
        assert!(!admits(&list, "192.0.2.7", 443));
        assert!(admits(&list, "[::1]", 443));
        assert!(!admits(&list, "localhost", 443));
    }

    #[test]
    fn bad_entries_are_refused_with_their_position() {
        for (bad, why) in [
            ("exa mple.org", "not a host name"),
            ("example.org:0", "1-65535"),
            ("example.org:99999", "1-65535"),
            ("::1", "brackets"),
            ("[::1", "`]`"),
            ("*.", "after `*.`"),
            ("a..b", "not a host name"),
        ] {
            let e = Allowlist::parse(&["ok.org", bad]).unwrap_err();
            assert!(e.starts_with("entry 2 ") && e.contains(why), "{bad}: {e}");
        }
        assert!(Allowlist::parse(&["", " "]).unwrap().is_empty());
    }
}
