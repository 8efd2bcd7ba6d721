//! A background future that costs nothing until it has something to do.
//!
//! Every run with an abort signal or a deadline has a watcher that must act
//! even while nobody reads the run (interrupt the adapter when aborted, kill
//! it at the deadline). Spawned as a task at each start, it cost a run a
//! spawn and the wake of another worker thread (system calls on both
//! sides), a large share of a run's start, though most runs end before
//! either happens. Instead the future is polled once where the run starts,
//! which registers it with what it waits on (the abort token, the timer);
//! only when one of those wakes it is it spawned as a task of its own, and
//! from then on it runs beside the run like any task. Dropped before that,
//! it is dropped where it lies: no task is ever made.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures::future::BoxFuture;

/// The future while it waits to be woken, and the runtime it is spawned on.
struct Slot {
    future: Mutex<Option<BoxFuture<'static, ()>>>,
    /// Set by the first wake, even one that came before the future was
    /// put in its slot (see [`start`]).
    woken: AtomicBool,
    runtime: tokio::runtime::Handle,
}

impl Slot {
    fn take(&self) -> Option<BoxFuture<'static, ()>> {
        self.future
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn spawn_if_held(&self) {
        if let Some(future) = self.take() {
            self.runtime.spawn(future);
        }
    }
}

impl Wake for Slot {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.spawn_if_held();
    }
}

/// A started [`start`]ed future; dropping it drops the future unless it
/// is already a task of its own (a task ends by itself).
pub(crate) struct Dormant {
    slot: Arc<Slot>,
}

impl Drop for Dormant {
    fn drop(&mut self) {
        drop(self.slot.take());
    }
}

/// Polls `future` once here and keeps it until something wakes it, then
/// spawns it on the current tokio runtime. Must be called within one.
pub(crate) fn start(future: impl Future<Output = ()> + Send + 'static) -> Dormant {
    let slot = Arc::new(Slot {
        future: Mutex::new(None),
        woken: AtomicBool::new(false),
        runtime: tokio::runtime::Handle::current(),
    });
    let mut future: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(future);
    let waker = Waker::from(slot.clone());
    if future.as_mut().poll(&mut Context::from_waker(&waker)) == Poll::Pending {
        *slot.future.lock().unwrap_or_else(PoisonError::into_inner) = Some(future);
        // A wake between the poll and the line above found the slot empty:
        // it is ours to act on. (A later one takes the future itself; the
        // slot's lock orders the two, so it is spawned exactly once.)
        if slot.woken.load(Ordering::SeqCst) {
            slot.spawn_if_held();
        }
    }
    Dormant { slot }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_woken_future_runs_as_a_task_even_if_its_starter_is_gone() {
        let token = CancellationToken::new();
        let (done, finished) = oneshot::channel();
        let dormant = start({
            let token = token.clone();
            async move {
                token.cancelled().await;
                let _ = done.send(());
            }
        });
        // Kept alive by the task once woken, not by the handle.
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), finished)
            .await
            .expect("the woken future ran")
            .expect("to its end");
        drop(dormant);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_future_never_woken_is_dropped_with_its_handle_and_never_runs_on() {
        let token = CancellationToken::new();
        let ran = Arc::new(AtomicBool::new(false));
        let dormant = start({
            let (token, ran) = (token.clone(), ran.clone());
            async move {
                token.cancelled().await;
                ran.store(true, Ordering::SeqCst);
            }
        });
        drop(dormant);
        token.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!ran.load(Ordering::SeqCst));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_future_ready_at_once_finishes_where_it_starts() {
        let ran = Arc::new(AtomicBool::new(false));
        let _dormant = start({
            let ran = ran.clone();
            async move { ran.store(true, Ordering::SeqCst) }
        });
        assert!(ran.load(Ordering::SeqCst));
    }

    /// Wakes racing the start, from another thread, many times over: each
    /// future runs to its end exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wake_racing_the_start_is_never_lost() {
        for _ in 0..2_000 {
            let token = CancellationToken::new();
            let canceller = std::thread::spawn({
                let token = token.clone();
                move || token.cancel()
            });
            let (done, finished) = oneshot::channel();
            let _dormant = start({
                let token = token.clone();
                async move {
                    token.cancelled().await;
                    let _ = done.send(());
                }
            });
            canceller.join().unwrap();
            tokio::time::timeout(Duration::from_secs(5), finished)
                .await
                .expect("not lost")
                .expect("ran to its end");
        }
    }
}
