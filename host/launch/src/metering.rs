//! Counting what runs spend as their events pass ([`crate::spending`]):
//! each `moat:usage` event (one model call) is charged to the run's
//! account at once, and its `done`'s totals make up for what no such
//! event reported (a backend that reports usage only at the end). A run
//! whose own budget was crossed ends with an `error` saying so and its
//! `done` with status `max_budget`.
//!
//! Two sources report a run's calls: moat's meter, which read them from
//! the answers it carried (`source: "metered"`, [`crate::traffic`]), and
//! the adapter (`"reported"`, with its `done`'s totals). Once the meter
//! has read one call of a run, its figures count — tokens and calls, and
//! dollars where the price table prices its calls; the adapter's are kept
//! beside them (`moat show`: reported vs metered), so an adapter that
//! reports less than it used is charged what it used. Until then the
//! adapter's count. What is charged never goes down: a report that came
//! first is not charged twice when the meter's follows.
//!
//! A run's `done` reports its own usage, not its children's: theirs is
//! charged by their own meters, to their accounts and up to its.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, Stream, StreamExt};
use moat_engine::{
    DoneStatus, EventPayload, InputTokens, METERED_SOURCE, OutputTokens, PriceTable, TaskEvent,
    TokenCoverage, TokenReport,
};
use moat_runs::{RunBook, RunId, Spent};

use crate::spending::Account;
use moat_engine::USAGE_EVENT;

/// The error code of the event that says a run's budget is spent.
pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";

/// The error code of the event that says a run's budget in dollars cannot
/// be kept: what it used has no price.
pub const BUDGET_UNPRICED: &str = "BUDGET_UNPRICED";

/// How often what a run spent is written to its record while its calls
/// come: a flood of model calls takes a write of the store per interval,
/// not one each. The accounts, which stop a run whose budget a call
/// crossed, are charged at once; the record is written at once when a
/// budget is crossed and when the run ends.
const SPENT_WRITES_EVERY: Duration = Duration::from_millis(100);

/// How one run's spending is counted.
pub(crate) struct Meter {
    pub(crate) account: Arc<Account>,
    /// Where what it spent is recorded, when it is recorded.
    pub(crate) book: Option<Arc<dyn RunBook>>,
    /// Prices for usage reported without a cost.
    pub(crate) price_table: Option<Arc<PriceTable>>,
    /// The model the run asked for; the backend's own (its `init`) wins.
    pub(crate) model: Option<String>,
}

/// What one source says a run used.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    tokens: u64,
    calls: u64,
    /// Dollars, when every call with tokens had a price (reported or
    /// priced); `None` otherwise.
    usd: Option<f64>,
    /// Calls with tokens but no price.
    unpriced: u64,
}

impl Totals {
    fn add(&mut self, usd: Option<f64>, tokens: u64, calls: u64) {
        self.tokens = self.tokens.saturating_add(tokens);
        self.calls = self.calls.saturating_add(calls);
        match usd {
            Some(usd) => self.usd = Some(self.usd.unwrap_or(0.0) + usd),
            None if tokens > 0 => self.unpriced += 1,
            None => {}
        }
    }

    /// Its dollars, when all it counted had a price.
    fn priced_usd(&self) -> Option<f64> {
        self.usd.filter(|_| self.unpriced == 0)
    }
}

/// Its own usage counted so far.
struct Counting {
    meter: Meter,
    reported: Totals,
    metered: Totals,
    /// The meter read at least one of its calls.
    metered_seen: bool,
    /// What was charged to its account: tokens, calls, dollars.
    charged: (u64, u64, f64),
    /// It used tokens without a price under a budget in dollars: it was
    /// stopped (a budget nobody can keep is not kept silently).
    unpriced: bool,
}

/// `engine`'s events, each run of `meters` (by task) counted.
pub(crate) fn metered(
    engine: BoxStream<'static, TaskEvent>,
    meters: Vec<(usize, Meter)>,
) -> BoxStream<'static, TaskEvent> {
    Metered {
        engine,
        runs: meters
            .into_iter()
            .map(|(task, meter)| {
                (
                    task,
                    Counting {
                        meter,
                        reported: Totals::default(),
                        metered: Totals::default(),
                        metered_seen: false,
                        charged: (0, 0, 0.0),
                        unpriced: false,
                    },
                )
            })
            .collect(),
        queue: VecDeque::new(),
        writes: SpentWrites::default(),
    }
    .boxed()
}

struct Metered {
    engine: BoxStream<'static, TaskEvent>,
    runs: HashMap<usize, Counting>,
    /// Events decided but not handed on yet (a budget's error, then its
    /// `done`).
    queue: VecDeque<TaskEvent>,
    writes: SpentWrites,
}

impl Drop for Metered {
    fn drop(&mut self) {
        // A stream given up before its runs' ends loses no figure.
        self.writes.write_all();
    }
}

/// What runs spent, not written to their records yet.
#[derive(Default)]
struct SpentWrites {
    /// The latest figure of each run, and where it is recorded.
    pending: HashMap<RunId, (Arc<dyn RunBook>, Spent)>,
    /// When they were last written.
    last: Option<Instant>,
    /// Wakes the stream when the pending ones are due.
    due: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl SpentWrites {
    /// Keeps what `charged` say the runs above spent now, for `book`.
    fn note(&mut self, book: Option<&Arc<dyn RunBook>>, charged: Vec<(RunId, Spent)>) {
        let Some(book) = book else {
            return;
        };
        for (id, spent) in charged {
            self.pending.insert(id, (book.clone(), spent));
        }
    }

    /// Writes what is pending when it is due, or `now`; otherwise has
    /// `cx` woken when it is.
    fn poll_write(&mut self, cx: &mut Context<'_>, now: bool) {
        if self.pending.is_empty() {
            return;
        }
        let since = self.last.map(|last| last.elapsed());
        let due = now || since.is_none_or(|since| since >= SPENT_WRITES_EVERY);
        if !due {
            let wait = SPENT_WRITES_EVERY.saturating_sub(since.unwrap_or_default());
            let timer = self
                .due
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(wait)));
            if timer.as_mut().poll(cx).is_pending() {
                return;
            }
        }
        self.write_all();
    }

    /// Writes what is pending.
    fn write_all(&mut self) {
        self.due = None;
        if self.pending.is_empty() {
            return;
        }
        self.last = Some(Instant::now());
        for (id, (book, spent)) in self.pending.drain() {
            record(book.as_ref(), &[(id, spent)]);
        }
    }
}

impl Stream for Metered {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        let this = &mut *self;
        this.writes.poll_write(cx, false);
        if let Some(event) = this.queue.pop_front() {
            return Poll::Ready(Some(event));
        }
        let mut passed = match this.engine.poll_next_unpin(cx) {
            Poll::Ready(Some(passed)) => passed,
            Poll::Ready(None) => {
                this.writes.write_all();
                return Poll::Ready(None);
            }
            Poll::Pending => return Poll::Pending,
        };
        let Some(run) = this.runs.get_mut(&passed.task) else {
            return Poll::Ready(Some(passed));
        };
        match &mut passed.event.payload {
            EventPayload::Init(init) => {
                if let Some(model) = &init.model {
                    run.meter.model = Some(model.clone());
                }
            }
            EventPayload::Extension(extension) if extension.name == USAGE_EVENT => {
                let payload = &extension.payload;
                let input = payload["inputTokens"].as_u64().unwrap_or(0);
                let output = payload["outputTokens"].as_u64().unwrap_or(0);
                let metered = payload["source"] == METERED_SOURCE;
                // The meter's model is the call's own; an adapter's cost
                // is its word, never the meter's.
                let model = payload["model"].as_str().filter(|_| metered);
                let cost = payload["costUsd"]
                    .as_f64()
                    .filter(|usd| !metered && usd.is_finite() && *usd >= 0.0);
                let usd = cost.or_else(|| run.price(model, input, output));
                let tokens = input.saturating_add(output);
                // One event, one model call.
                if metered {
                    run.metered_seen = true;
                    run.metered.add(usd, tokens, 1);
                } else {
                    run.reported.add(usd, tokens, 1);
                }
                let charged = run.settle();
                this.writes.note(run.meter.book.as_ref(), charged);
                // A crossed budget is in the record at once.
                this.writes.poll_write(cx, run.meter.account.crossed());
            }
            EventPayload::Done(done) => {
                let tokens = done
                    .usage
                    .tokens
                    .map(|t| t.input.total.saturating_add(t.output.total))
                    .unwrap_or(0);
                let usd = done.usage.cost.map(|cost| cost.usd);
                // What no per-call event reported.
                let more_tokens = tokens.saturating_sub(run.reported.tokens);
                let more_usd = usd.map(|usd| (usd - run.reported.usd.unwrap_or(0.0)).max(0.0));
                if more_tokens > 0 || more_usd.is_some_and(|usd| usd > 0.0) {
                    run.reported.add(more_usd, more_tokens, 0);
                }
                if usd.is_some() && run.reported.unpriced > 0 {
                    // The backend's whole cost covers what it did not
                    // price call by call.
                    run.reported.unpriced = 0;
                    run.reported.usd = usd;
                }
                let charged = run.settle();
                this.writes.note(run.meter.book.as_ref(), charged);
                // The run's last figures are in its record before its
                // `done` is handed on.
                this.writes.write_all();
                let task = passed.task;
                let Some(run) = this.runs.remove(&task) else {
                    return Poll::Ready(Some(passed));
                };
                let budget = run.meter.account.budget().words();
                let (status, code, message) = if run.unpriced {
                    (
                        DoneStatus::Error,
                        BUDGET_UNPRICED,
                        format!(
                            "the run's budget is {budget}, and what it used has no price (model {}): \
                             give --price-table with its prices, or a budget in tokens (--max-tokens)",
                            run.meter.model.as_deref().unwrap_or("unknown")
                        ),
                    )
                } else if run.meter.account.crossed() {
                    let calls = run.meter.account.budget().calls.is_some();
                    let spent = run.meter.account.spent().words_with_calls(calls);
                    (
                        DoneStatus::MaxBudget,
                        BUDGET_EXCEEDED,
                        format!("the run spent {spent} of its budget of {budget}; it was stopped"),
                    )
                } else {
                    return Poll::Ready(Some(passed));
                };
                done.status = status;
                let error = moat_engine::AgentEvent {
                    payload: EventPayload::error(code, message, false),
                    ..passed.event.clone()
                };
                this.queue.push_back(passed);
                return Poll::Ready(Some(TaskEvent { task, event: error }));
            }
            _ => {}
        }
        Poll::Ready(Some(passed))
    }
}

impl Counting {
    /// What `input` and `output` tokens of `model` (else the run's) cost,
    /// by the price table.
    fn price(&self, model: Option<&str>, input: u64, output: u64) -> Option<f64> {
        let table = self.meter.price_table.as_ref()?;
        let model = model.or(self.meter.model.as_deref())?;
        let report = TokenReport {
            coverage: TokenCoverage::Complete,
            input: InputTokens {
                total: input,
                cache_read: None,
                cache_write: None,
            },
            output: OutputTokens {
                total: output,
                reasoning: None,
            },
        };
        table.cost(model, &report).map(|cost| cost.usd)
    }

    /// Charges the run what it used and was not charged yet: the
    /// meter's figures once it read a call, else the adapter's; dollars
    /// the meter's where its calls were all priced, else the adapter's.
    /// The accounts charged, with what each has spent now (to record).
    fn settle(&mut self) -> Vec<(RunId, Spent)> {
        let counted = if self.metered_seen {
            self.metered
        } else {
            self.reported
        };
        let usd = self
            .metered_seen
            .then(|| self.metered.priced_usd())
            .flatten()
            .or(self.reported.priced_usd());
        let (charged_tokens, charged_calls, charged_usd) = self.charged;
        let tokens = counted.tokens.saturating_sub(charged_tokens);
        let calls = counted.calls.saturating_sub(charged_calls);
        let more_usd = usd.map(|usd| (usd - charged_usd).max(0.0));
        // Tokens nobody priced under a budget in dollars: the adapter's
        // report with neither cost nor price at once (as before the
        // meter), the meter's once two of its calls went unpriced and the
        // adapter reported no cost for them either.
        let unpriced = if self.metered_seen {
            self.metered.unpriced >= 2 && usd.is_none()
        } else {
            self.reported.unpriced > 0
        };
        if unpriced && !self.unpriced && self.meter.account.budget().usd.is_some() {
            tracing::info!(run = %self.meter.account.id(), "tokens without a price under a budget in dollars; stopping the run");
            self.unpriced = true;
            self.meter.account.stop();
        }
        if tokens == 0 && calls == 0 && more_usd.is_none_or(|usd| usd <= 0.0) {
            return Vec::new();
        }
        self.charged = (
            charged_tokens.saturating_add(tokens),
            charged_calls.saturating_add(calls),
            charged_usd + more_usd.unwrap_or(0.0),
        );
        self.meter.account.charge(more_usd, tokens, calls)
    }
}

/// Records what each charged run has spent now.
fn record(book: &dyn RunBook, charged: &[(RunId, Spent)]) {
    for (id, spent) in charged {
        if let Err(error) = book.spent(id, spent) {
            tracing::warn!(run = %id, "what the run spent could not be recorded: {error}");
        }
    }
}
