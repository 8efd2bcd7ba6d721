//! The [`Adapter`] trait and the glue that exports it as a component.

use core::cell::RefCell;
use core::marker::PhantomData;

use crate::bindings::exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use crate::{AdapterInfo, ErrorInfo, Event, Options};

/// What an adapter author implements: one backend, one run at a time.
///
/// The host calls [`info`](Adapter::info) to describe the component,
/// [`start`](Adapter::start) once per run, then [`next`](Adapter::next)
/// until it returns `None` or yields a `done` event (several times per
/// call into the component while [`ready`](Adapter::ready) says so). The value returned by
/// `start` is dropped when the host closes the session (after `done`, on
/// abort, or when the run is cut off).
pub trait Adapter: Sized + 'static {
    /// Describes the adapter: name, version, what it needs from the host.
    /// Must not have side effects; the host may call it without a run.
    fn info() -> AdapterInfo;

    /// Starts a run. Refuse here, before starting the backend, any option
    /// the adapter cannot honour: the error reaches the caller as is.
    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo>;

    /// The next event of the run, or `None` when the stream is over.
    ///
    /// A well-behaved adapter ends every run with exactly one `done` event
    /// and returns `None` afterwards; the host enforces this either way.
    fn next(&mut self) -> Option<Event>;

    /// Whether [`next`](Adapter::next) would return at once: an event is
    /// already made (queued, or computed without waiting on the backend).
    ///
    /// The host pulls several events per call into the component when the
    /// adapter has them: after each event the SDK asks `ready` and calls
    /// `next` again while it says `true`, then hands the host all of them
    /// together. Say `true` only when `next` will not wait, or the events
    /// already made would wait with it. The default, `false`, hands the
    /// host one event per call.
    fn ready(&self) -> bool {
        false
    }
}

/// The component export for an [`Adapter`] type `A`.
///
/// Implements the generated [`Guest`] trait (the `moat:adapter/adapter`
/// interface); [`export_adapter!`](crate::export_adapter) names it for the
/// generated export code. Authors do not use it directly.
pub struct Export<A>(PhantomData<fn() -> A>);

/// One running session of `A`, owned by the host through a resource handle.
#[doc(hidden)]
pub struct SessionOf<A> {
    // `next` takes `&self` in the generated trait (resources are shared
    // handles), while authors get `&mut self`: a component is
    // single-threaded and `next` is never re-entered, so the borrow never
    // conflicts.
    adapter: RefCell<A>,
}

impl<A: Adapter> Guest for Export<A> {
    type Session = SessionOf<A>;

    fn info() -> AdapterInfo {
        A::info()
    }

    fn run(prompt: String, options: Options) -> Result<Session, ErrorInfo> {
        let adapter = A::start(prompt, options)?;
        Ok(Session::new(SessionOf {
            adapter: RefCell::new(adapter),
        }))
    }
}

impl<A: Adapter> GuestSession for SessionOf<A> {
    fn next_batch(&self, max: u32) -> Vec<Event> {
        batch(&mut *self.adapter.borrow_mut(), max)
    }
}

/// The events `adapter` has for one pull of at most `max` (at least one):
/// the first, waiting if it must, then those it has ready, up to its
/// `done` (nothing after it is pulled).
pub(crate) fn batch<A: Adapter>(adapter: &mut A, max: u32) -> Vec<Event> {
    let max = max.max(1) as usize;
    let mut events = Vec::new();
    while let Some(event) = adapter.next() {
        let done = event.is_done();
        events.push(event);
        if done || events.len() == max || !adapter.ready() {
            break;
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `count` deltas then `done`; says it is ready until `ready_for`
    /// events were given.
    struct Counted {
        count: usize,
        given: usize,
        ready_for: usize,
        after_done: bool,
    }

    impl Adapter for Counted {
        fn info() -> AdapterInfo {
            unreachable!("not asked in these tests")
        }
        fn start(_: String, _: Options) -> Result<Self, ErrorInfo> {
            unreachable!("not asked in these tests")
        }
        fn next(&mut self) -> Option<Event> {
            self.given += 1;
            match self.given {
                n if n <= self.count => Some(Event::text_delta(n.to_string())),
                n if n == self.count + 1 || self.after_done => {
                    Some(Event::done(crate::DoneStatus::Success))
                }
                _ => None,
            }
        }
        fn ready(&self) -> bool {
            self.given < self.ready_for
        }
    }

    fn counted(count: usize, ready_for: usize) -> Counted {
        Counted {
            count,
            given: 0,
            ready_for,
            after_done: false,
        }
    }

    #[test]
    fn a_batch_takes_what_is_ready_up_to_max() {
        let mut adapter = counted(10, usize::MAX);
        assert_eq!(batch(&mut adapter, 4).len(), 4);
        assert_eq!(batch(&mut adapter, 4).len(), 4);
        // Two deltas and the done; nothing after it.
        let last = batch(&mut adapter, 4);
        assert_eq!(last.len(), 3);
        assert!(last[2].is_done());
        assert!(batch(&mut adapter, 4).is_empty());
    }

    #[test]
    fn an_adapter_not_ready_gives_one_event_per_batch() {
        let mut adapter = counted(3, 0);
        for _ in 0..4 {
            assert_eq!(batch(&mut adapter, 64).len(), 1);
        }
        assert!(batch(&mut adapter, 64).is_empty());
    }

    #[test]
    fn a_batch_stops_where_readiness_ends_and_at_done() {
        let mut adapter = counted(10, 3);
        assert_eq!(batch(&mut adapter, 64).len(), 3);
        assert_eq!(batch(&mut adapter, 64).len(), 1);
        let mut eager = Counted {
            after_done: true,
            ..counted(1, usize::MAX)
        };
        let events = batch(&mut eager, 64);
        assert_eq!(events.len(), 2, "nothing is pulled after the done");
    }

    #[test]
    fn max_zero_is_taken_as_one() {
        let mut adapter = counted(5, usize::MAX);
        assert_eq!(batch(&mut adapter, 0).len(), 1);
    }
}
