//! The refusals of one run, recorded where they happen (a host call, or a
//! task that host call spawned) and collected by the engine through
//! [`AdapterSession::take_denials`](moat_engine::AdapterSession::take_denials).

use std::sync::{Arc, Mutex, PoisonError};

use moat_engine::Denial;

/// Most refusals kept between two collections: a guest that retries a
/// refused request in a loop must not grow the host's memory. The rest
/// are counted and logged.
const MAX_PENDING: usize = 64;

/// A run's refusals waiting for the engine. Cheap to clone; clones share
/// the queue.
#[derive(Debug, Clone, Default)]
pub struct DenialLog(Arc<Mutex<Pending>>);

#[derive(Debug, Default)]
struct Pending {
    denials: Vec<Denial>,
    dropped: u64,
}

impl DenialLog {
    /// Records a refusal.
    pub fn record(&self, denial: Denial) {
        tracing::info!(
            capability = denial.request.capability(),
            target = %denial.request,
            reason = %denial.reason,
            "capability denied"
        );
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.denials.len() < MAX_PENDING {
            pending.denials.push(denial);
        } else {
            pending.dropped += 1;
        }
    }

    /// The refusals recorded since the last call, oldest first.
    pub fn take(&self) -> Vec<Denial> {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.dropped > 0 {
            tracing::warn!(
                dropped = pending.dropped,
                "more refusals than can be reported at once; the rest are only logged"
            );
            pending.dropped = 0;
        }
        std::mem::take(&mut pending.denials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(n: usize) -> Denial {
        Denial {
            request: moat_engine::DeniedRequest::Program {
                program: format!("p{n}"),
            },
            reason: "not granted".into(),
            remedy: None,
        }
    }

    #[test]
    fn refusals_are_taken_once_in_order_and_bounded() {
        let log = DenialLog::default();
        let clone = log.clone();
        clone.record(denial(1));
        clone.record(denial(2));
        assert_eq!(log.take(), [denial(1), denial(2)]);
        assert!(log.take().is_empty());
        for n in 0..MAX_PENDING + 10 {
            log.record(denial(n));
        }
        assert_eq!(log.take().len(), MAX_PENDING);
        assert!(log.take().is_empty());
    }
}
