//! Flat JSON log lines on stderr (SPEC §2.4): one object per event, fields
//! at the top level.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber at `level` (`TRACE` … `ERROR`, any case).
/// rmcp's own chatter is kept at WARN unless DEBUG or TRACE is asked for.
///
/// # Errors
/// An unknown level name (the message names `SERVERFS_LOG_LEVEL`).
pub fn init_logging(level: &str) -> Result<(), String> {
    let level = level.to_ascii_lowercase();
    let directive = match level.as_str() {
        "trace" | "debug" => level.clone(),
        "info" | "warn" | "error" => format!("{level},rmcp=warn"),
        _ => {
            return Err(format!(
                "SERVERFS_LOG_LEVEL must be TRACE, DEBUG, INFO, WARN or ERROR; got '{level}'"
            ));
        }
    };
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::new(directive))
        .try_init()
        .map_err(|e| format!("logging: {e}"))
}
