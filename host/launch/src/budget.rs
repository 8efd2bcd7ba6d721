//! The memory a launcher's runs may hold together (`--max-total-memory`):
//! the sum of the memory caps of the runs live here, every descendant
//! counted, since a run's children are launched by the same launcher. A
//! run is admitted only while its cap fits; its share is given back when
//! its events end. What happens to a run without a parent that does not
//! fit is the launcher's choice ([`Roots`]); a child that does not fit is
//! always refused (its parent may be what holds the budget: waiting could
//! wait forever).

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
    roots: Roots,
}

/// What the budget does with a run that has no parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// Refused when it does not fit (a server's runs).
    Refuse,
    /// Waits for room (a worker's jobs).
    Wait,
    /// Not counted: only the children are (the runs a command starts
    /// itself, which it budgets its own way — `moat parallel` waits for
    /// room — or which are one run).
    Free,
}

/// What a run admitted as `admission`, asking `asked`, holds of a memory
/// budget: its adapter's memory, and its programs' when it may start
/// programs and its memory was asked for (`--max-memory`, the protocol's
/// `limits.maxMemoryBytes`, a task's; a job's when its submitter's user
/// asked). The default programs' ceiling stops a runaway but is not
/// reserved: reserved, it would let a budget of half a 24 GiB machine hold
/// two agent runs, where each program usually takes a fraction of it.
pub(crate) fn budgeted_memory(admission: &crate::Admission, asked: &crate::AskedLimits) -> u64 {
    let limits = &admission.limits;
    let adapter = limits
        .max_memory_bytes
        .min(moat_sandbox::MAX_MEMORY_CEILING);
    if admission.grants.run.is_empty() || !asked.programs_asked().memory {
        return adapter;
    }
    adapter.saturating_add(limits.max_program_memory_bytes)
}

/// A run's share of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Share(#[allow(dead_code)] OwnedSemaphorePermit);

impl MemoryBudget {
    /// A budget of `total_bytes`, treating runs without a parent as
    /// `roots` says.
    pub fn new(total_bytes: u64, roots: Roots) -> Self {
        let units = usize::try_from(total_bytes.div_ceil(MIB))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            total: total_bytes,
            free: Arc::new(Semaphore::new(units)),
            roots,
        }
    }

    /// The share of a run whose memory cap is `cap` (`root`: it has no
    /// parent), `None` when it is not counted, or why it may not have one.
    pub(crate) async fn reserve(&self, cap: u64, root: bool) -> Result<Option<Share>, Refusal> {
        if root && self.roots == Roots::Free {
            return Ok(None);
        }
        let units = cap.div_ceil(MIB).max(1);
        let too_much = || {
            Refusal::Nesting(format!(
                "the runs live here may hold {} together and this one's memory cap is {}: give it less memory",
                shown(self.total),
                shown(cap)
            ))
        };
        if units > self.total.div_ceil(MIB) {
            return Err(too_much());
        }
        let units = u32::try_from(units).map_err(|_| too_much())?;
        if root && self.roots == Roots::Wait {
            let share = self.free.clone().acquire_many_owned(units).await;
            return share
                .map(|permit| Some(Share(permit)))
                .map_err(|_| too_much());
        }
        self.free
            .clone()
            .try_acquire_many_owned(units)
            .map(|permit| Some(Share(permit)))
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
        let budget = MemoryBudget::new(100 * MIB, Roots::Refuse);
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
        let budget = MemoryBudget::new(10 * MIB, Roots::Wait);
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

    #[tokio::test]
    async fn free_roots_are_not_counted_and_their_children_are() {
        let budget = MemoryBudget::new(10 * MIB, Roots::Free);
        for _ in 0..4 {
            assert!(budget.reserve(10 * MIB, true).await.unwrap().is_none());
        }
        let child = budget.reserve(10 * MIB, false).await.unwrap();
        assert!(child.is_some());
        assert!(budget.reserve(MIB, false).await.is_err());
    }
}
