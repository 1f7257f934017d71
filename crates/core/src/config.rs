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
    /// the default state directory with its origin), named as given.
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

/// What to say after "does not exist" when the path as given starts with
/// `~`: only a shell expands it (and not inside quotes, an environment file
/// or a systemd unit), so it was taken literally. Empty for any other path.
pub fn tilde_hint(raw: &std::path::Path) -> &'static str {
    if raw.as_os_str().as_encoded_bytes().starts_with(b"~") {
        " (it starts with '~', which only a shell expands, and not inside quotes or an \
         environment file: use $HOME or the full path)"
    } else {
        ""
    }
}

/// Why a file or directory could not be used, in plain words (never the
/// OS's text, e.g. "entity not found").
pub fn io_reason(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist",
        std::io::ErrorKind::PermissionDenied => "is not readable by the server's user",
        std::io::ErrorKind::NotADirectory => "is below something that is not a directory",
        std::io::ErrorKind::IsADirectory => "is a directory",
        _ => "cannot be read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_tilde_gets_a_hint_and_io_errors_plain_words() {
        assert!(tilde_hint(std::path::Path::new("~/src")).contains("$HOME"));
        assert_eq!(tilde_hint(std::path::Path::new("/home/a/~src")), "");
        let missing = std::fs::File::open("/nonexistent/serverfs-config-test").unwrap_err();
        assert_eq!(io_reason(&missing), "does not exist");
    }

    #[test]
    fn one_line_naming_the_variable_and_its_flag() {
        let e = ConfigError::new("SERVERFS_MAX_BODY_BYTES", "must be at least 1");
        assert_eq!(e.to_string(), "SERVERFS_MAX_BODY_BYTES (--max-body-bytes): must be at least 1");
        assert_eq!(e.setting(), "SERVERFS_MAX_BODY_BYTES (--max-body-bytes)");
        let e = ConfigError::named("--workdir 'm'", "the directory does not exist");
        assert_eq!(e.to_string(), "--workdir 'm': the directory does not exist");
    }
}
