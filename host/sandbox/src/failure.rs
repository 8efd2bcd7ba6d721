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
    if resources_ran_out(error) {
        return SessionFailure::ResourceLimit {
            resources: crate::limits::max_resources(state.memory.limit_bytes()),
            limit_bytes: state.memory.limit_bytes(),
        };
    }
    tracing::debug!(adapter = %state.adapter, "guest call failed: {error:?}");
    SessionFailure::Crashed {
        message: crash_message(error, &state.stderr.tail()),
    }
}

/// Whether the call failed because the run's resource table was full: the
/// host memory its resources may take is bounded by its memory cap
/// ([`crate::limits::max_resources`]).
fn resources_ran_out(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<wasmtime::component::ResourceTableError>()
            .is_some_and(|e| matches!(e, wasmtime::component::ResourceTableError::Full))
    })
}

/// "the adapter crashed (CAUSE); its last words: STDERR", keeping what
/// tells the user most: the trap's kind (a wasm trap), or the root cause of
/// a failed host call (never the backtrace wrapper around it), and the end
/// of what the guest wrote to stderr, where a panic's text is.
fn crash_message(error: &wasmtime::Error, stderr: &str) -> String {
    let reason = match error.downcast_ref::<Trap>() {
        // Its text names itself a wasm trap already.
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    // The first line only: a root cause may carry a backtrace below it.
    let reason = reason
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches(':');
    if stderr.trim().is_empty() {
        return format!("the adapter crashed ({reason})");
    }
    let start = stderr.ceil_char_boundary(stderr.len().saturating_sub(MAX_STDERR_IN_MESSAGE));
    format!(
        "the adapter crashed ({reason}); its last words: {}",
        stderr[start..].trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_names_the_trap_or_the_root_cause_and_the_last_words() {
        let trap = wasmtime::Error::new(Trap::UnreachableCodeReached)
            .context("error while executing at wasm backtrace:\n    0: 0x1 - f");
        assert_eq!(
            crash_message(&trap, "panicked at src/lib.rs: on purpose\n"),
            "the adapter crashed (wasm trap: wasm `unreachable` instruction executed); \
             its last words: panicked at src/lib.rs: on purpose"
        );
        let host = wasmtime::Error::msg("resource table has no free keys")
            .context("error while executing at wasm backtrace:");
        assert_eq!(
            crash_message(&host, ""),
            "the adapter crashed (resource table has no free keys)"
        );
    }
}
