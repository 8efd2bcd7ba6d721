//! What a run's traffic through moat was: every request and connection a
//! component or a program makes through the host (a component's
//! `wasi:http` request, a program's forwarded request, tunnel or secret
//! route), allowed or refused ([`Exchange`]), and the model calls among
//! them with the usage moat read from their answers ([`MeteredCall`],
//! read by [`moat_meter`]).
//!
//! Recorded where it happens, collected by the launch layer, which turns
//! them into the run's `moat:traffic` and `moat:usage` events. Never a
//! body, a header value or a query string: a URL's query may carry a key.
//!
//! Bounded per run: past [`MAX_EXCHANGES`] rows, what more the run does is
//! counted per destination ([`Overflow`]), not kept row by row. Metered
//! calls are never dropped: each is a charge.

mod callers;
mod exchange;
mod recording;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use moat_grants::{Meters, Scheme};
use moat_meter::{Usage, Vendor};

pub use callers::Caller;
pub use exchange::{Exchange, Kind, Who};
pub use recording::{CountedBody, Recording, WatchedBody};

/// Most rows kept per run; past it, counts per destination.
pub const MAX_EXCHANGES: usize = 1000;

/// One model call, as moat read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeteredCall {
    /// Whose API.
    pub vendor: Vendor,
    /// Where it went (`host:port`).
    pub destination: String,
    /// The model its answer named.
    pub model: Option<String>,
    /// What it used; `None`: its answer said nothing moat could read (a
    /// tunnel, a stream without usage, an error).
    pub usage: Option<Usage>,
}

/// What a run did past [`MAX_EXCHANGES`], per destination.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overflow {
    /// Requests and connections allowed.
    pub allowed: u64,
    /// Refused.
    pub refused: u64,
    /// Bytes sent.
    pub sent: u64,
    /// Bytes received.
    pub received: u64,
}

/// What was recorded since the last collection.
#[derive(Debug, Default)]
pub struct Taken {
    /// Rows, oldest first.
    pub exchanges: Vec<Exchange>,
    /// Model calls, in the order their answers ended.
    pub calls: Vec<MeteredCall>,
}

impl Taken {
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.exchanges.is_empty() && self.calls.is_empty()
    }
}

/// A run's traffic record, shared by every place that carries its
/// traffic. Cheap to clone; clones share the record.
#[derive(Debug, Clone, Default)]
pub struct Traffic(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    meters: Meters,
    /// A model call moat cannot read is refused (the run has a budget in
    /// tokens or dollars and may not make them).
    refuse_unmetered: bool,
    /// The run was stopped (its budget spent, say): no new model call is
    /// sent while it winds down.
    stopped: tokio_util::sync::CancellationToken,
    state: Mutex<State>,
    waker: AtomicWaker,
    /// Who made the connections to the run's proxy.
    callers: Mutex<callers::Callers>,
}

#[derive(Debug, Default)]
struct State {
    exchanges: Vec<Exchange>,
    calls: Vec<MeteredCall>,
    /// Rows recorded in all.
    recorded: usize,
    /// Past the cap, per destination.
    overflow: BTreeMap<String, Overflow>,
    /// Recordings started and not recorded yet: requests and connections
    /// still going.
    open: usize,
}

impl Traffic {
    /// The record of a run whose model calls go where `meters` say;
    /// `refuse_unmetered`: one moat cannot read is refused; once `stopped`
    /// is cancelled, every new one is.
    pub fn new(
        meters: Meters,
        refuse_unmetered: bool,
        stopped: tokio_util::sync::CancellationToken,
    ) -> Self {
        Self(Arc::new(Shared {
            meters,
            refuse_unmetered,
            stopped,
            ..Shared::default()
        }))
    }

    /// Why a new model call is refused now, if it is: the run was
    /// stopped. (The call that crossed a budget was the last.)
    pub fn model_calls_refused(&self) -> Option<&'static str> {
        self.0.stopped.is_cancelled().then_some(
            "the run was stopped (its budget spent, or cancelled): it makes no more model calls",
        )
    }

    /// Whose model API `scheme://host:port` is, if one moat reads.
    pub fn vendor(&self, scheme: Scheme, host: &str, port: u16) -> Option<Vendor> {
        self.0.meters.vendor(scheme, host, port)
    }

    /// Whether a model call moat cannot read is refused.
    pub fn refuses_unmetered(&self) -> bool {
        self.0.refuse_unmetered
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one row (and the call it was, when it was a model call).
    pub fn record(&self, exchange: Exchange, call: Option<MeteredCall>) {
        self.record_closing(exchange, call, false);
    }

    /// A [`Recording`] started: counted open until it records.
    fn opened(&self) {
        self.lock().open += 1;
    }

    /// Records one row, and (`closing`) that a recording of the still
    /// open ones ended with it, both under one lock: whoever waits for
    /// the open ones to end finds the row once they have.
    fn record_closing(&self, exchange: Exchange, call: Option<MeteredCall>, closing: bool) {
        tracing::debug!(
            host = %exchange.host,
            port = exchange.port,
            refused = exchange.refused.is_some(),
            "traffic"
        );
        {
            let mut state = self.lock();
            if closing {
                state.open = state.open.saturating_sub(1);
            }
            state.recorded += 1;
            if state.recorded > MAX_EXCHANGES {
                let over = state
                    .overflow
                    .entry(format!("{}:{}", exchange.host, exchange.port))
                    .or_default();
                if exchange.refused.is_some() {
                    over.refused += 1;
                } else {
                    over.allowed += 1;
                }
                over.sent = over.sent.saturating_add(exchange.sent);
                over.received = over.received.saturating_add(exchange.received);
            } else {
                state.exchanges.push(exchange);
            }
            state.calls.extend(call);
        }
        self.0.waker.wake();
    }

    /// What was recorded since the last call, without waiting.
    pub fn take(&self) -> Taken {
        let mut state = self.lock();
        Taken {
            exchanges: std::mem::take(&mut state.exchanges),
            calls: std::mem::take(&mut state.calls),
        }
    }

    /// What was recorded since the last call; pending (woken by the next
    /// record) when nothing was.
    pub fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Taken> {
        self.0.waker.register(cx.waker());
        let taken = self.take();
        if taken.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(taken)
        }
    }

    /// `caller` made the connection to the run's proxy whose address (in
    /// the run's network) is `from`.
    pub(crate) fn note_caller(&self, from: std::net::SocketAddr, caller: Caller) {
        self.0
            .callers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(from, caller);
    }

    /// Who made the connection to the run's proxy that came from `from`,
    /// when moat made it (in the run's own network).
    pub(crate) fn caller(&self, from: std::net::SocketAddr) -> Option<Caller> {
        self.0
            .callers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .of(from)
    }

    /// How many requests and connections are still going (started, not
    /// recorded yet).
    pub fn open(&self) -> usize {
        self.lock().open
    }

    /// What the run did past [`MAX_EXCHANGES`] rows, per destination
    /// (`host:port`); empty when it stayed under.
    pub fn overflow(&self) -> BTreeMap<String, Overflow> {
        self.lock().overflow.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: u16) -> Exchange {
        Exchange::new(Who::Program, Kind::Request, Scheme::Http, "h", n)
    }

    #[test]
    fn rows_past_the_cap_are_counted_per_destination_and_calls_always_kept() {
        let traffic = Traffic::default();
        for n in 0..MAX_EXCHANGES + 5 {
            let call = MeteredCall {
                vendor: Vendor::OpenAi,
                destination: "h:1".into(),
                model: None,
                usage: None,
            };
            let mut exchange = row(1);
            exchange.sent = 10;
            if n % 2 == 1 {
                exchange.refused = Some("no".into());
            }
            traffic.record(exchange, Some(call));
        }
        let taken = traffic.take();
        assert_eq!(taken.exchanges.len(), MAX_EXCHANGES);
        assert_eq!(taken.calls.len(), MAX_EXCHANGES + 5);
        let over = traffic.overflow();
        let h = &over["h:1"];
        assert_eq!(h.allowed + h.refused, 5);
        assert_eq!(h.sent, 50);
        assert!(traffic.take().is_empty());
    }

    #[test]
    fn a_recording_counts_open_until_its_row_is_recorded() {
        let traffic = Traffic::default();
        let first = Recording::start(&traffic, row(1), None);
        let second = Recording::start(&traffic, row(2), None);
        assert_eq!(traffic.open(), 2);
        drop(first);
        assert_eq!(traffic.open(), 1);
        assert_eq!(traffic.take().exchanges.len(), 1);
        drop(second);
        assert_eq!(traffic.open(), 0);
        assert_eq!(traffic.take().exchanges[0].port, 2);
    }
}
