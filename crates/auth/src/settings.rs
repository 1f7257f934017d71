//! The Cloudflare Access settings, a `clap` argument group a binary
//! flattens beside serverfs-settings' groups (every setting a `--flag` with
//! an environment fallback; the flag wins). An empty value counts as unset,
//! as an `EnvironmentFile` line `SERVERFS_ACCESS_TEAM=` means.

use clap::Args;
use serverfs_core::ConfigError;

use crate::access::{AccessConfig, AccessJwt};

const TEAM: &str = "SERVERFS_ACCESS_TEAM (--access-team)";
const AUD: &str = "SERVERFS_ACCESS_AUD (--access-aud)";
const CERTS_URL: &str = "SERVERFS_ACCESS_CERTS_URL (--access-certs-url)";

/// Cloudflare Access in front of the HTTP endpoint.
#[derive(Debug, Default, Args)]
pub struct AccessSettings {
    /// Cloudflare Access team (its name or https://<team>.cloudflareaccess.com);
    /// with --access-aud, /mcp accepts Access tokens (Cf-Access-Jwt-Assertion).
    #[arg(long, env = "SERVERFS_ACCESS_TEAM", value_name = "TEAM")]
    access_team: Option<String>,

    /// AUD tag(s) of the Access application, comma-separated.
    #[arg(long, env = "SERVERFS_ACCESS_AUD", value_name = "AUD", value_delimiter = ',')]
    access_aud: Vec<String>,

    /// For tests and self-hosted key mirrors only: fetch the team's signing
    /// keys (JWKS) here instead of https://<team>.cloudflareaccess.com/cdn-cgi/access/certs.
    /// https, or http to a loopback address.
    #[arg(long, env = "SERVERFS_ACCESS_CERTS_URL", value_name = "URL")]
    access_certs_url: Option<String>,
}

impl AccessSettings {
    /// Settings from values (for binaries that do not parse with clap, and
    /// tests).
    pub fn from_values(team: Option<&str>, aud: &[&str], certs_url: Option<&str>) -> Self {
        Self {
            access_team: team.map(str::to_owned),
            access_aud: aud.iter().map(|a| (*a).to_owned()).collect(),
            access_certs_url: certs_url.map(str::to_owned),
        }
    }

    /// The Access configuration, or `None` when Access is not configured.
    ///
    /// # Errors
    /// One line naming the settings: half a configuration (a team without an
    /// AUD tag, an AUD tag or certs URL without a team) or an invalid value.
    pub fn config(&self) -> Result<Option<AccessConfig>, ConfigError> {
        let team = nonempty(self.access_team.as_deref());
        let auds: Vec<&str> =
            self.access_aud.iter().map(|a| a.trim()).filter(|a| !a.is_empty()).collect();
        let certs_url = nonempty(self.access_certs_url.as_deref());
        match (team, auds.is_empty()) {
            (None, true) => {
                return match certs_url {
                    None => Ok(None),
                    Some(_) => Err(ConfigError::named(
                        CERTS_URL,
                        format!("set, but {TEAM} and {AUD} are not; Cloudflare Access needs both"),
                    )),
                };
            }
            (Some(_), true) => {
                return Err(ConfigError::named(
                    TEAM,
                    format!("set, but {AUD} is not; Cloudflare Access needs both"),
                ));
            }
            (None, false) => {
                return Err(ConfigError::named(
                    AUD,
                    format!("set, but {TEAM} is not; Cloudflare Access needs both"),
                ));
            }
            (Some(_), false) => {}
        }
        let team = team.unwrap_or_default();
        let mut config = AccessConfig::new(team, &auds).map_err(|e| {
            let setting = if e.starts_with("the team") { TEAM } else { AUD };
            ConfigError::named(setting, e)
        })?;
        if let Some(url) = certs_url {
            config = config.with_certs_url(url).map_err(|e| ConfigError::named(CERTS_URL, e))?;
        }
        Ok(Some(config))
    }

    /// The verifier, or `None` when Access is not configured.
    ///
    /// # Errors
    /// As [`Self::config`], or if the HTTPS client cannot be built.
    pub fn verifier(&self) -> Result<Option<AccessJwt>, ConfigError> {
        match self.config()? {
            None => Ok(None),
            Some(config) => {
                AccessJwt::new(config).map(Some).map_err(|e| ConfigError::named(TEAM, e))
            }
        }
    }
}

fn nonempty(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        access: AccessSettings,
    }

    fn parse(args: &[&str]) -> AccessSettings {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap().access
    }

    #[test]
    fn unset_is_none() {
        assert!(parse(&[]).config().unwrap().is_none());
        let empty = AccessSettings::from_values(Some(" "), &["", " "], Some(""));
        assert!(empty.config().unwrap().is_none());
    }

    #[test]
    fn half_a_configuration_is_refused_naming_both_settings() {
        for args in [
            &["--access-team", "myteam"][..],
            &["--access-aud", "abc"],
            &["--access-certs-url", "http://127.0.0.1:1/certs"],
        ] {
            let err = parse(args).config().unwrap_err().to_string();
            assert!(
                err.contains("SERVERFS_ACCESS_TEAM") && err.contains("SERVERFS_ACCESS_AUD"),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn full_configuration() {
        let s = parse(&[
            "--access-team",
            "https://myteam.cloudflareaccess.com",
            "--access-aud",
            "a1, b2",
        ]);
        let c = s.config().unwrap().unwrap();
        assert_eq!(c.issuer(), "https://myteam.cloudflareaccess.com");
        assert_eq!(c.audiences(), ["a1", "b2"]);
        assert_eq!(c.certs_url(), "https://myteam.cloudflareaccess.com/cdn-cgi/access/certs");
        let s = parse(&[
            "--access-team",
            "myteam",
            "--access-aud",
            "a1",
            "--access-certs-url",
            "http://keys.example/certs",
        ]);
        assert!(s.config().unwrap_err().setting().starts_with("SERVERFS_ACCESS_CERTS_URL"));
        let s = parse(&["--access-team", "bad_team", "--access-aud", "a1"]);
        assert!(s.config().unwrap_err().setting().starts_with("SERVERFS_ACCESS_TEAM"));
    }
}
