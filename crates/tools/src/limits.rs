//! Per-call limits of the read tools: plain data, validated by the binary
//! that reads them from its configuration.

use std::time::Duration;

/// Per-call limits. Defaults are the documented ones; every value is ≥ 1 and each
/// default is at most its maximum (the binary checks this at start-up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes one read may return (default 524288).
    pub max_read_bytes: u64,
    /// Lines one read may return (default 500).
    pub max_read_lines: u64,
    /// Default list page size (default 100).
    pub default_list_limit: u64,
    /// Largest list page (default 500).
    pub max_list_entries: u64,
    /// Default search result count (default 50).
    pub default_search_results: u64,
    /// Largest search result count (default 100).
    pub max_search_results: u64,
    /// Entries one find/search may visit (default 200000).
    pub max_walk_entries: u64,
    /// Wall-clock deadline of every call (default 15 s).
    pub search_timeout: Duration,
    /// Larger files are not searched (default 50 MiB).
    pub search_max_file_bytes: u64,
    /// How answers are written as text (default compact): how every call
    /// answers, so it travels with the limits.
    pub text_output: crate::TextOutput,
}

/// `max_lines` of read_text_file when the client gives none.
pub const DEFAULT_READ_LINES: u64 = 200;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_read_bytes: 524_288,
            max_read_lines: 500,
            default_list_limit: 100,
            max_list_entries: 500,
            default_search_results: 50,
            max_search_results: 100,
            max_walk_entries: 200_000,
            search_timeout: Duration::from_secs(15),
            search_max_file_bytes: 52_428_800,
            text_output: crate::TextOutput::Compact,
        }
    }
}

impl Limits {
    /// read_text_file's default `max_lines`, clamped to the maximum.
    pub fn default_read_lines(&self) -> u64 {
        DEFAULT_READ_LINES.min(self.max_read_lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_read_lines_is_clamped() {
        assert_eq!(Limits::default().default_read_lines(), DEFAULT_READ_LINES);
        let small = Limits { max_read_lines: 50, ..Limits::default() };
        assert_eq!(small.default_read_lines(), 50);
    }
}
