//! The memory a launcher's runs may hold together (`--max-total-memory` of
//! `moat serve` and `moat worker`): the sum of the memory caps of the runs
//! live here, every descendant counted, since a run's children are
//! launched by the same launcher. A run is admitted only while its cap
//! fits; its share is given back when its events end.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::refusal::Refusal;

/// The unit the budget is kept in.
const MIB: u64 = 1024 * 1024;

/// The memory a launcher's live runs may hold together.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    total: u64,
    free: Arc<Semaphore>,
    roots_wait: bool,
}

/// A run's share of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Share(#[allow(dead_code)] OwnedSemaphorePermit);

impl MemoryBudget {
    /// A budget of `total_bytes`. With `roots_wait`, a run without a parent
    /// waits for its share (a worker's queued jobs); otherwise, and always
    /// for a child (whose parent may be what holds the budget), a run that
    /// does not fit is refused.
    pub fn new(total_bytes: u64, roots_wait: bool) -> Self {
        let units = usize::try_from(total_bytes.div_ceil(MIB))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            total: total_bytes,
            free: Arc::new(Semaphore::new(units)),
            roots_wait,
        }
    }

    /// The share of a run whose memory cap is `cap` (`root`: it has no
    /// parent), or why it may not have one.
    pub(crate) async fn reserve(&self, cap: u64, root: bool) -> Result<Share, Refusal> {
        let units = cap.div_ceil(MIB).max(1);
        let too_much = || {
            Refusal::Nesting(format!(
                "the runs live here may hold {} together and this one's memory cap is {}: give it less memory",
                shown(self.total),
                shown(cap)
            ))
        };
        let units = u32::try_from(units).map_err(|_| too_much())?;
        if u64::from(units) * MIB > self.total.div_ceil(MIB) * MIB {
            return Err(too_much());
        }
        if root && self.roots_wait {
            let share = self.free.clone().acquire_many_owned(units).await;
            return share.map(Share).map_err(|_| too_much());
        }
        self.free
            .clone()
            .try_acquire_many_owned(units)
            .map(Share)
            .map_err(|_| {
                let free = self.free.available_permits() as u64 * MIB;
                Refusal::Nesting(format!(
                    "the runs live here hold {} of the {} they may hold together, and this one's memory cap is {}: wait for one to end, or give it less memory",
                    shown(self.total.saturating_sub(free)),
                    shown(self.total),
                    shown(cap)
                ))
            })
    }
}

fn shown(bytes: u64) -> String {
    bytesize::ByteSize(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_are_admitted_while_their_caps_fit_and_shares_come_back() {
        let budget = MemoryBudget::new(100 * MIB, false);
        let first = budget.reserve(60 * MIB, true).await.unwrap();
        let refused = budget.reserve(60 * MIB, false).await.unwrap_err();
        let said = refused.message(&moat_engine::FieldNames);
        assert!(
            said.contains("hold 60") && said.contains("wait for one to end"),
            "{said}"
        );
        drop(first);
        assert!(budget.reserve(60 * MIB, false).await.is_ok());
        let over = budget.reserve(200 * MIB, true).await.unwrap_err();
        assert!(
            over.message(&moat_engine::FieldNames)
                .contains("give it less memory")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_root_waits_where_roots_wait_and_a_child_never_does() {
        let budget = MemoryBudget::new(10 * MIB, true);
        let held = budget.reserve(10 * MIB, true).await.unwrap();
        assert!(
            budget.reserve(MIB, false).await.is_err(),
            "a child is refused"
        );
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(MIB, true).await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a root waits");
        drop(held);
        assert!(waiting.await.unwrap());
    }
}
