//! Authentication for serverfs-dev's HTTP endpoint:
//!
//! - [`AccessJwt`]: verifies Cloudflare Access application tokens
//!   (`Cf-Access-Jwt-Assertion`; RS256 only; `iss`, `aud`, `exp`/`nbf` with a
//!   30 s leeway) against the team's JWKS, fetched over HTTPS and cached,
//!   refreshed at most once per interval on an unknown `kid` (single flight).
//!   It is a [`Verify`](serverfs_transport::Verify) method of
//!   serverfs-transport's one authentication layer.
//! - [`combined`]: that layer ([`Auth`](serverfs_transport::Auth)) for the
//!   bearer tokens and/or Access; either admits a request, which then
//!   carries its [`Principal`](serverfs_transport::Principal).
//! - [`AccessSettings`]: the `--access-*` / `SERVERFS_ACCESS_*` settings.
//! - [`require_auth_for_listen`]: the start-up rule that a non-loopback
//!   listener needs some authentication.
//!
//! Wiring (serverfs-dev): hand the layer to serverfs-transport as the
//! `/mcp` guard; it is added with `route_layer` *after* the body limits,
//! so the auth check runs first and no body is read for a stranger:
//!
//! ```ignore
//! let guard = McpGuard::from(serverfs_auth::combined(tokens, access));
//! serverfs_transport::serve_guarded_mcp(factory, http, guard, routes, shutdown).await
//! ```

mod access;
mod settings;

pub use access::{
    ACCESS_JWT_HEADER, AccessConfig, AccessError, AccessIdentity, AccessJwt, KEYS_MAX_AGE, LEEWAY,
    MIN_REFRESH_INTERVAL,
};
pub use settings::AccessSettings;

use std::net::SocketAddr;
use std::sync::Arc;

use serverfs_transport::{Auth, BearerAuth, Verify};

/// serverfs-dev's authentication layer: the bearer tokens first (no I/O),
/// then Access; either admits. A refusal is `401 Unauthorized: missing or
/// invalid credentials`. `None` when neither is configured (then nothing
/// guards the endpoint: see [`require_auth_for_listen`]).
pub fn combined(tokens: Option<BearerAuth>, access: Option<AccessJwt>) -> Option<Auth> {
    let mut methods: Vec<Arc<dyn Verify>> = Vec::new();
    if let Some(tokens) = tokens {
        methods.push(Arc::new(tokens));
    }
    if let Some(access) = access {
        methods.push(Arc::new(access));
    }
    Auth::new(methods, "credentials")
}

/// Refuses to serve on a non-loopback address without authentication: a
/// listener other processes or hosts can reach must check who calls. The
/// loopback check sees through IPv4-mapped IPv6 (`::ffff:127.0.0.1`);
/// `0.0.0.0` and `::` are not loopback.
///
/// # Errors
/// One line naming the settings involved.
pub fn require_auth_for_listen(
    addr: SocketAddr,
    any_auth_configured: bool,
) -> Result<(), serverfs_core::ConfigError> {
    if any_auth_configured || addr.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    Err(serverfs_core::ConfigError::new(
        "SERVERFS_LISTEN",
        format!(
            "{addr} is not a loopback address, and no authentication is configured: set \
             SERVERFS_TOKEN or SERVERFS_TOKEN_FILE (--token-file), or SERVERFS_ACCESS_TEAM and \
             SERVERFS_ACCESS_AUD, or listen on 127.0.0.1"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_without_auth_is_refused() {
        for ok in ["127.0.0.1:8790", "127.9.9.9:1", "[::1]:8790", "[::ffff:127.0.0.1]:80"] {
            assert!(require_auth_for_listen(ok.parse().unwrap(), false).is_ok(), "{ok}");
        }
        for bad in ["0.0.0.0:8790", "[::]:8790", "192.168.1.5:8790", "[::ffff:10.0.0.1]:80"] {
            let addr = bad.parse().unwrap();
            let err = require_auth_for_listen(addr, false).unwrap_err().to_string();
            assert!(err.contains("SERVERFS_LISTEN") && !err.contains('\n'), "{err}");
            assert!(require_auth_for_listen(addr, true).is_ok(), "{bad}");
        }
    }
}
