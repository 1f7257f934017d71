//! Start-up configuration errors: the one type every crate's settings
//! return, naming the setting a user changes to fix it.
//!
//! Guarantees: an error prints as one line, `SETTING: reason`, where
//! SETTING is how a user sets it (`SERVERFS_MAX_BODY_BYTES
//! (--max-body-bytes)`, `--workdir 'docs'`). Reasons are written by the
//! settings that refuse a value: never a token, a token file's path or the
//! OS's text.

use std::fmt;

/// A setting that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    setting: String,
    reason: String,
}

impl ConfigError {
    /// `reason` about the `SERVERFS_*` variable `env` (named with its flag,
    /// see [`setting`]).
    pub fn new(env: &str, reason: impl Into<String>) -> Self {
        Self::named(setting(env), reason)
    }

    /// `reason` about a setting named otherwise (`--workdir 'docs'`,
    /// `XDG_STATE_HOME (else HOME)`), named as given.
    pub fn named(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { setting: setting.into(), reason: reason.into() }
    }

    /// How the user sets it.
    pub fn setting(&self) -> &str {
        &self.setting
    }

    /// Why its value cannot be used.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// A setting as start-up errors name it: `SERVERFS_MAX_BODY_BYTES
/// (--max-body-bytes)`, the environment variable and its flag (every
/// `SERVERFS_*` variable is the flag's name in upper case).
pub fn setting(env: &str) -> String {
    let flag = env.trim_start_matches("SERVERFS_").to_ascii_lowercase().replace('_', "-");
    format!("{env} (--{flag})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_naming_the_variable_and_its_flag() {
        let e = ConfigError::new("SERVERFS_MAX_BODY_BYTES", "must be at least 1");
        assert_eq!(e.to_string(), "SERVERFS_MAX_BODY_BYTES (--max-body-bytes): must be at least 1");
        assert_eq!(e.setting(), "SERVERFS_MAX_BODY_BYTES (--max-body-bytes)");
        let e = ConfigError::named("--workdir 'm'", "the directory does not exist");
        assert_eq!(e.to_string(), "--workdir 'm': the directory does not exist");
    }
}
