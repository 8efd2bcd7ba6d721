//! The [`Adapter`] trait and the glue that exports it as a component.

use core::cell::RefCell;
use core::marker::PhantomData;

use crate::bindings::exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use crate::{AdapterInfo, ErrorInfo, Event, Options};

/// What an adapter author implements: one backend, one run at a time.
///
/// The host calls [`info`](Adapter::info) to describe the component,
/// [`start`](Adapter::start) once per run, then [`next`](Adapter::next)
/// until it returns `None` or yields a `done` event. The value returned by
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
    fn next(&self) -> Option<Event> {
        self.adapter.borrow_mut().next()
    }
}
