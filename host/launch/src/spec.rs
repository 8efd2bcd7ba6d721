//! What a run is launched with: its adapter, prompt and options, what it
//! asks for, the ceiling it is admitted under, its parent.

use std::sync::Arc;
use std::time::Duration;

use moat_engine::{FieldNames, PriceTable, RunOptions, SettingNames};
use moat_runs::RunId;
use tokio_util::sync::CancellationToken;

use crate::admit::{Asked, Ceiling};
use crate::resolve::Resolved;

/// Which adapter a run is of.
#[derive(Debug, Clone)]
pub enum AdapterRef {
    /// A built-in's name, an installed adapter's name, or a component's
    /// path: resolved when the run is launched.
    Named(String),
    /// Resolved already (a command that starts several runs of it); boxed,
    /// as it is much larger than a name.
    Resolved(Box<Resolved>),
}

/// Everything a run is launched with.
#[derive(Clone)]
pub struct LaunchSpec {
    /// The adapter.
    pub adapter: AdapterRef,
    /// What it is asked.
    pub prompt: String,
    /// Its options.
    pub options: RunOptions,
    /// The grants, trust and limits it asks for.
    pub asked: Asked,
    /// The most whoever starts it may give.
    pub ceiling: Arc<Ceiling>,
    /// The live run it is a child of: its record bounds this one, and its
    /// end ends this one.
    pub parent: Option<RunId>,
    /// Stops it (its adapter drains, then it ends with `done`
    /// interrupted).
    pub abort: CancellationToken,
    /// How long an aborted adapter may take to wind down.
    pub drain: Duration,
    /// Prices for a `done` that reports tokens but no cost.
    pub price_table: Option<Arc<PriceTable>>,
    /// Whether a resume the backend cannot honour starts afresh.
    pub resume_fallback: bool,
    /// Set on every event, to tell runs apart in a merged stream.
    pub role: Option<String>,
    /// The words its messages use for settings.
    pub names: Arc<dyn SettingNames>,
    /// In a cluster: run it again elsewhere when its worker is lost.
    pub retry_on_worker_loss: bool,
    /// The id to record it under, chosen by the caller so it can write the
    /// id down before the run exists (a workflow's state: a resume then
    /// finds the run a killed moat submitted instead of starting another);
    /// a fresh one when `None`. A run recorded nowhere has no id.
    pub id: Option<RunId>,
    /// A workspace of its own (a worktree or a copy of the project), which
    /// it works in and alone may write; `None`: it works where it is told.
    pub workspace: Option<moat_workspace::Request>,
    /// Ask for what its grants do not cover instead of being refused at
    /// once ([`crate::approvals`]); `None`: refused at once.
    pub ask: Option<crate::Ask>,
    /// A parent span from elsewhere, for a run with no parent run whose
    /// trace it belongs to: a workflow's tasks on a cluster, which knows
    /// no record of the workflow's (a W3C `traceparent`).
    pub traceparent: Option<String>,
}

impl LaunchSpec {
    /// A run of `adapter` on `prompt` under `ceiling`, asking for all it
    /// allows, with default options and limits.
    pub fn new(adapter: AdapterRef, prompt: impl Into<String>, ceiling: Arc<Ceiling>) -> Self {
        Self {
            adapter,
            prompt: prompt.into(),
            options: RunOptions::default(),
            asked: Asked::default(),
            ceiling,
            parent: None,
            abort: CancellationToken::new(),
            drain: moat_engine::DEFAULT_DRAIN,
            price_table: None,
            resume_fallback: true,
            role: None,
            names: Arc::new(FieldNames),
            retry_on_worker_loss: false,
            id: None,
            workspace: None,
            ask: None,
            traceparent: None,
        }
    }
}
