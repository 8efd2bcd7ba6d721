//! The cooperative abort flag of one run, and host calls that give up when
//! it is raised.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Raised once when the run is aborted (ENG-005); host calls waiting on
/// the outside world return at once then.
#[derive(Debug, Default)]
pub struct Interrupt {
    raised: AtomicBool,
    notify: Notify,
}

/// Why a guarded call gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The run was aborted.
    Interrupted,
    /// The call's own timeout passed.
    TimedOut,
}

impl Interrupt {
    /// Raises the flag and wakes every guarded call.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether the run was aborted.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Runs `work` unless the run is interrupted first (then at once
    /// [`Cut::Interrupted`]) or `timeout_ms` passes ([`Cut::TimedOut`]).
    /// `work` must be cancel-safe: it is dropped half way in both cases.
    pub async fn guard<T>(
        &self,
        timeout_ms: Option<u32>,
        work: impl Future<Output = T>,
    ) -> Result<T, Cut> {
        let interrupted = self.notify.notified();
        tokio::pin!(interrupted);
        // Registered before the flag is looked at, so a raise in between
        // is not missed.
        interrupted.as_mut().enable();
        if self.is_raised() {
            return Err(Cut::Interrupted);
        }
        let timeout = async {
            match timeout_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms.into())).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = &mut interrupted => Err(Cut::Interrupted),
            value = work => Ok(value),
            () = timeout => Err(Cut::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_guarded_call_returns_its_value_its_timeout_or_the_interrupt() {
        let interrupt = Arc::new(Interrupt::default());
        assert_eq!(interrupt.guard(None, async { 7 }).await, Ok(7));
        assert_eq!(
            interrupt
                .guard(Some(10), std::future::pending::<()>())
                .await,
            Err(Cut::TimedOut)
        );
        let raiser = interrupt.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            raiser.raise();
        });
        assert_eq!(
            interrupt.guard(None, std::future::pending::<()>()).await,
            Err(Cut::Interrupted)
        );
        // Once raised, every later call returns at once.
        assert_eq!(
            interrupt.guard(None, async { 7 }).await,
            Err(Cut::Interrupted)
        );
    }
}
