//! Counting what runs spend as their events pass ([`crate::spending`]):
//! each `moat:usage` event (one model call) is charged to the run's
//! account at once, and its `done`'s totals make up for what no such
//! event reported (a backend that reports usage only at the end). A run
//! whose own budget was crossed ends with an `error` saying so and its
//! `done` with status `max_budget`.
//!
//! A run's `done` reports its own usage, not its children's: theirs is
//! charged by their own meters, to their accounts and up to its.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{BoxStream, Stream, StreamExt};
use moat_engine::{
    DoneStatus, EventPayload, InputTokens, OutputTokens, PriceTable, TaskEvent, TokenCoverage,
    TokenReport,
};
use moat_runs::{RunBook, RunId, Spent};

use crate::spending::Account;
use moat_engine::USAGE_EVENT;

/// The error code of the event that says a run's budget is spent.
pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";

/// The error code of the event that says a run's budget in dollars cannot
/// be kept: what it used has no price.
pub const BUDGET_UNPRICED: &str = "BUDGET_UNPRICED";

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

/// Its own usage counted so far.
struct Counting {
    meter: Meter,
    usd: f64,
    tokens: u64,
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
                        usd: 0.0,
                        tokens: 0,
                        unpriced: false,
                    },
                )
            })
            .collect(),
        queue: VecDeque::new(),
    }
    .boxed()
}

struct Metered {
    engine: BoxStream<'static, TaskEvent>,
    runs: HashMap<usize, Counting>,
    /// Events decided but not handed on yet (a budget's error, then its
    /// `done`).
    queue: VecDeque<TaskEvent>,
}

impl Stream for Metered {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        if let Some(event) = self.queue.pop_front() {
            return Poll::Ready(Some(event));
        }
        let mut passed = match self.engine.poll_next_unpin(cx) {
            Poll::Ready(Some(passed)) => passed,
            other => return other,
        };
        let Some(run) = self.runs.get_mut(&passed.task) else {
            return Poll::Ready(Some(passed));
        };
        match &mut passed.event.payload {
            EventPayload::Init(init) => {
                if let Some(model) = &init.model {
                    run.meter.model = Some(model.clone());
                }
            }
            EventPayload::Extension(extension) if extension.name == USAGE_EVENT => {
                let input = extension.payload["inputTokens"].as_u64().unwrap_or(0);
                let output = extension.payload["outputTokens"].as_u64().unwrap_or(0);
                let cost = extension.payload["costUsd"]
                    .as_f64()
                    .filter(|usd| usd.is_finite() && *usd >= 0.0);
                let usd = cost.or_else(|| run.price(input, output));
                // One event, one model call.
                run.charge(usd, input.saturating_add(output), 1);
            }
            EventPayload::Done(done) => {
                let tokens = done
                    .usage
                    .tokens
                    .map(|t| t.input.total.saturating_add(t.output.total))
                    .unwrap_or(0);
                let usd = done.usage.cost.map(|cost| cost.usd);
                // What no per-call event reported.
                let more_tokens = tokens.saturating_sub(run.tokens);
                let more_usd = usd.map(|usd| (usd - run.usd).max(0.0));
                if more_tokens > 0 || more_usd.is_some_and(|usd| usd > 0.0) {
                    run.charge(more_usd, more_tokens, 0);
                }
                let task = passed.task;
                let Some(run) = self.runs.remove(&task) else {
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
                self.queue.push_back(passed);
                return Poll::Ready(Some(TaskEvent { task, event: error }));
            }
            _ => {}
        }
        Poll::Ready(Some(passed))
    }
}

impl Counting {
    /// What `input` and `output` tokens cost, by the price table.
    fn price(&self, input: u64, output: u64) -> Option<f64> {
        let table = self.meter.price_table.as_ref()?;
        let model = self.meter.model.as_deref()?;
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

    /// Charges one call's usage to the run's account and those above it,
    /// recording what each has spent now.
    fn charge(&mut self, usd: Option<f64>, tokens: u64, calls: u64) {
        if usd.is_none() && tokens > 0 && self.meter.account.budget().usd.is_some() {
            tracing::info!(run = %self.meter.account.id(), "tokens without a price under a budget in dollars; stopping the run");
            self.unpriced = true;
            self.meter.account.stop();
        }
        self.usd += usd.unwrap_or(0.0);
        self.tokens = self.tokens.saturating_add(tokens);
        let charged = self.meter.account.charge(usd, tokens, calls);
        if let Some(book) = &self.meter.book {
            record(book.as_ref(), &charged);
        }
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
