//! Turning a failed guest call into the engine's [`SessionFailure`].

use wasmtime::{Store, Trap};

use crate::state::RunState;
use moat_engine::SessionFailure;

/// Longest guest stderr excerpt put into an error message.
const MAX_STDERR_IN_MESSAGE: usize = 2 * 1024;

/// The error the epoch callback raises when the engine killed the run.
#[derive(Debug, thiserror::Error)]
#[error("stopped by the host")]
pub(crate) struct KilledByHost;

/// Classifies why a guest call failed. The order matters: a kill explains
/// whatever trap followed it, and a refused memory growth explains the
/// allocation-failure trap that follows it.
pub(crate) fn classify(
    store: &Store<RunState>,
    error: &wasmtime::Error,
    fuel_budget: Option<u64>,
) -> SessionFailure {
    let state = store.data();
    if error.is::<KilledByHost>() || state.control.is_killed() {
        return SessionFailure::Killed;
    }
    if let Some(Trap::OutOfFuel) = error.downcast_ref::<Trap>() {
        return SessionFailure::FuelExhausted {
            budget: fuel_budget.unwrap_or(u64::MAX),
        };
    }
    if state.memory.was_hit() {
        return SessionFailure::MemoryLimit {
            limit_bytes: state.memory.limit_bytes(),
        };
    }
    tracing::debug!(adapter = %state.adapter, "guest call failed: {error:?}");
    SessionFailure::Crashed {
        message: crash_message(error, &state.stderr.tail()),
    }
}

/// "the adapter crashed (TRAP): STDERR", keeping what tells the user most:
/// a panic's text is only in the guest's stderr.
fn crash_message(error: &wasmtime::Error, stderr: &str) -> String {
    let reason = match error.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{error:#}")
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    if stderr.is_empty() {
        return format!("the adapter crashed ({reason})");
    }
    let start = stderr.ceil_char_boundary(stderr.len().saturating_sub(MAX_STDERR_IN_MESSAGE));
    format!("the adapter crashed ({reason}): {}", &stderr[start..])
}
