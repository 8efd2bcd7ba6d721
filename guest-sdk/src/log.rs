//! Logging into the host's log.
//!
//! Messages go to the host's tracing output, tagged with the adapter, never
//! to the user's terminal unannounced. Prefer these over printing: a
//! component's stdout and stderr are captured as logs too, but without a
//! level. On native targets (unit tests) messages are discarded.

use crate::LogLevel;

/// Writes `message` to the host's log at `level`.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::moat::adapter::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Logs at trace level.
pub fn trace(message: &str) {
    log(LogLevel::Trace, message);
}

/// Logs at debug level.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Logs at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}

/// Logs at error level.
pub fn error(message: &str) {
    log(LogLevel::Error, message);
}
