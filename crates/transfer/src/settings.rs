//! The file-transfer settings: flags with environment fallbacks, checked
//! once at start-up.

use std::time::Duration;

use serverfs_core::ConfigError;

use crate::{DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_UPLOAD_TIMEOUT_SECONDS};

/// The file-transfer settings (flags with environment fallbacks).
#[derive(Debug, clap::Args)]
pub struct LinkSettings {
    /// Base URL clients reach this server at (e.g. https://dev.example.com);
    /// file_link then returns absolute URLs. Never derived from request headers.
    #[arg(long, env = "SERVERFS_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,

    /// Largest file a PUT /files upload may write, in bytes.
    #[arg(long, env = "SERVERFS_MAX_UPLOAD_BYTES", default_value_t = DEFAULT_MAX_UPLOAD_BYTES)]
    max_upload: u64,

    /// Time a whole PUT /files upload body may take to arrive, in seconds.
    #[arg(long, env = "SERVERFS_UPLOAD_TIMEOUT_SECONDS", default_value_t = DEFAULT_UPLOAD_TIMEOUT_SECONDS)]
    upload_timeout: u64,
}

/// The file-transfer settings, validated.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Without a trailing `/`.
    pub public_url: Option<String>,
    /// Largest upload, bytes.
    pub max_upload: u64,
    /// Time a whole upload body may take.
    pub upload_timeout: Duration,
}

impl LinkSettings {
    /// The settings, validated.
    ///
    /// # Errors
    /// A line naming the setting that is wrong.
    pub fn config(&self) -> Result<LinkConfig, ConfigError> {
        let public_url = match &self.public_url {
            None => None,
            Some(url) if url.trim().is_empty() => None,
            Some(url) => Some(public_url(url.trim())?),
        };
        if !(1..=86_400).contains(&self.upload_timeout) {
            return Err(ConfigError::new(
                "SERVERFS_UPLOAD_TIMEOUT_SECONDS",
                "must be between 1 and 86400",
            ));
        }
        Ok(LinkConfig {
            public_url,
            max_upload: self.max_upload,
            upload_timeout: Duration::from_secs(self.upload_timeout),
        })
    }
}

/// `http(s)://host[:port][/prefix]`, without query, fragment or trailing `/`.
fn public_url(url: &str) -> Result<String, ConfigError> {
    let bad = |why: &str| Err(ConfigError::new("SERVERFS_PUBLIC_URL", why));
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
        return bad("must start with https:// or http://");
    };
    if rest.is_empty() || rest.starts_with('/') {
        return bad("has no host");
    }
    if url.contains(['?', '#', ' ']) || !url.is_ascii() || url.chars().any(char::is_control) {
        return bad("must be a plain ASCII URL without query or fragment");
    }
    Ok(url.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_are_checked() {
        assert_eq!(public_url("https://dev.example.com/").unwrap(), "https://dev.example.com");
        assert_eq!(public_url("http://h:8/p").unwrap(), "http://h:8/p");
        for bad in ["dev.example.com", "ftp://x", "https://", "https://x/?a", "https://x/#f"] {
            assert!(public_url(bad).is_err(), "{bad}");
        }
    }
}
