//! Authentication for serverfs-dev's HTTP endpoint (SPEC §3 "Auth"):
//!
//! - [`AccessJwt`]: verifies Cloudflare Access application tokens
//!   (`Cf-Access-Jwt-Assertion`; RS256 only; `iss`, `aud`, `exp`/`nbf` with a
//!   30 s leeway) against the team's JWKS, fetched over HTTPS and cached,
//!   refreshed at most once per interval on an unknown `kid` (single flight).
//! - [`Auth`]: one tower layer for the bearer token (serverfs-transport's
//!   [`BearerAuth`](serverfs_transport::BearerAuth)) and/or Access; either
//!   admits a request, which then carries its [`Principal`].
//! - [`AccessSettings`]: the `--access-*` / `SERVERFS_ACCESS_*` settings.
//! - [`require_auth_for_listen`]: the start-up rule that a non-loopback
//!   listener needs some authentication.
//!
//! Wiring (serverfs-dev): build the `/mcp` router with
//! `serverfs_transport::mcp_router` (which installs the body limits as a
//! route layer), then add `Auth` with `route_layer` *after* it, so the auth
//! check runs first and no body is read for a stranger:
//!
//! ```ignore
//! let mcp = mcp_router(factory, &http.mcp, &shutdown);
//! let mcp = match &auth { Some(auth) => mcp.route_layer(auth.clone()), None => mcp };
//! let app = with_header_checks(health_router().merge(mcp).merge(file_routes));
//! ```

mod access;
mod layer;
mod settings;

pub use access::{
    ACCESS_JWT_HEADER, AccessConfig, AccessError, AccessIdentity, AccessJwt, KEYS_MAX_AGE, LEEWAY,
    MIN_REFRESH_INTERVAL,
};
pub use layer::{Auth, Principal, Refusal, RequireAuth};
pub use settings::AccessSettings;

use std::net::SocketAddr;

/// Refuses to serve on a non-loopback address without authentication: a
/// listener other processes or hosts can reach must check who calls. The
/// loopback check sees through IPv4-mapped IPv6 (`::ffff:127.0.0.1`);
/// `0.0.0.0` and `::` are not loopback.
///
/// # Errors
/// One line naming the settings involved.
pub fn require_auth_for_listen(addr: SocketAddr, any_auth_configured: bool) -> Result<(), String> {
    if any_auth_configured || addr.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "SERVERFS_LISTEN (--listen) is {addr}, which is not a loopback address, and no \
         authentication is configured: set SERVERFS_TOKEN or SERVERFS_TOKEN_FILE (--token-file), \
         or SERVERFS_ACCESS_TEAM and SERVERFS_ACCESS_AUD, or listen on 127.0.0.1"
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
            let err = require_auth_for_listen(addr, false).unwrap_err();
            assert!(err.contains("SERVERFS_LISTEN") && !err.contains('\n'), "{err}");
            assert!(require_auth_for_listen(addr, true).is_ok(), "{bad}");
        }
    }
}
