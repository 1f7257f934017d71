//! The local token: over HTTP without a configured credential (a bearer
//! token or Cloudflare Access, loopback only), `/mcp` still admits no one
//! without a secret. Nothing but where a call comes from would otherwise
//! tell a command's call to its own server from the user's client, and
//! guessing that from the peer (its socket among the commands' open files)
//! costs a scan of every descriptor and misses a connection a command has
//! another process make. As Jupyter does for the same problem, the server
//! draws a token for this start alone (256 bits from the OS), and tells
//! the user where it is: a file of its own in the state directory (mode
//! 0600, removed when the server ends), whose path the start-up log gives.
//!
//! Commands cannot read it: every command's view covers the state
//! directory with an empty file system (see serverfs-supervisor's mounts
//! module). Where the kernel gives commands no view of their own, they
//! could: start-up says so in a WARN line (configure `SERVERFS_TOKEN`,
//! which they cannot read, or narrow their reads with `--command-readable`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serverfs_transport::BearerAuth;

/// A token drawn for this start.
pub(crate) struct LocalToken {
    secret: String,
}

impl std::fmt::Debug for LocalToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalToken(<redacted>)")
    }
}

impl LocalToken {
    /// 32 bytes from the OS's random source, in hex (no percent-encoding
    /// needed in a URL's query).
    pub(crate) fn draw() -> std::io::Result<Self> {
        let mut bytes = [0_u8; 32];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        Ok(Self { secret: bytes.iter().map(|b| format!("{b:02x}")).collect() })
    }

    /// The authentication that admits its holder (`token:local`), in the
    /// `Authorization` header or as `?token=` on `/mcp`.
    pub(crate) fn auth(&self) -> BearerAuth {
        BearerAuth::local(&self.secret).expect("64 hex digits make a valid token")
    }

    /// Writes the token to `local-token.<port>` in `state_dir` (mode
    /// 0600, replacing what a killed server on the same port left), and
    /// returns the file, removed when dropped.
    pub(crate) fn publish(&self, state_dir: &Path, port: u16) -> std::io::Result<Published> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = state_dir.join(format!("local-token.{port}"));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?; // O_EXCL: never through a symlink
        file.write_all(self.secret.as_bytes())?;
        Ok(Published(path))
    }
}

/// The token's file; removed on drop.
pub(crate) struct Published(PathBuf);

impl Published {
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_token_is_the_owners_alone_and_goes_with_the_server() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token = LocalToken::draw().unwrap();
        assert_eq!(token.secret.len(), 64);
        assert_ne!(token.secret, LocalToken::draw().unwrap().secret);
        // A stale file of a killed server on the same port is replaced.
        std::fs::write(dir.path().join("local-token.8790"), "stale").unwrap();
        let published = token.publish(dir.path(), 8790).unwrap();
        let path = published.path().to_owned();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), token.secret);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(published);
        assert!(!path.exists());
    }
}
