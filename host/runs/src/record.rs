//! A run as every place that keeps runs shows it: what it was started
//! with, and its record.

use moat_grants::{Grants, TrustLevel};

use crate::id::RunId;
use crate::limits::RecordedLimits;
use crate::status::{FailReason, RunStatus};

/// What is known of a run before it starts: everything but its status and
/// times, which the place that keeps it adds. The grants, trust and limits
/// are the run's effective ones, as its admission decided them.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The run that started it, for nested runs.
    pub parent: Option<RunId>,
    /// The adapter's name.
    pub adapter: String,
    /// SHA-256 of the adapter's component, lowercase hex (`built-in:NAME`
    /// for a built-in the cluster names).
    pub component_sha256: String,
    /// The prompt.
    pub prompt: String,
    /// The run's options (JSON).
    pub options: serde_json::Value,
    /// Its effective grants.
    pub grants: Grants,
    /// Its effective trust level; `None` for runs recorded before moat
    /// recorded it, and for records that are not adapter runs (a
    /// workflow's own).
    pub trust: Option<TrustLevel>,
    /// Its effective limits; `None` when it has none of its own (a
    /// workflow's record) or they cannot be read.
    pub limits: Option<RecordedLimits>,
    /// The part it plays among its siblings, when it has a name: a
    /// workflow's task, a parallel task's `ROLE:` (its events carry it as
    /// their `role`); listings show it beside its prompt.
    pub role: Option<String>,
}

impl NewRun {
    /// Its wall-clock limit in milliseconds, when it has one.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.limits.as_ref().and_then(|limits| limits.timeout_ms)
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Its id.
    pub id: RunId,
    /// What it was started with.
    pub run: NewRun,
    /// Where it is.
    pub status: RunStatus,
    /// Why it failed.
    pub reason: Option<FailReason>,
    /// Its `done` payload, once it ended.
    pub done: Option<serde_json::Value>,
    /// The process id of the moat that runs (or ran) it; 0 in a cluster.
    pub owner_pid: u32,
    /// The cluster worker that runs (or ran) it.
    pub worker: Option<String>,
    /// When it was recorded, started and ended (ms since the Unix epoch).
    pub created_ms: u64,
    /// When its adapter started.
    pub started_ms: Option<u64>,
    /// When it reached its terminal status.
    pub ended_ms: Option<u64>,
    /// What it (with its children) spent, as last recorded while it ran
    /// with a budget; `None`: not recorded.
    pub spent: Option<crate::Spent>,
    /// The fields of its stored record that did not read (`grants`,
    /// `limits`, `trust`, `spent`: a damaged store); each stands at its
    /// default above, which is no bound: a run whose record has any may
    /// bound no child.
    pub unreadable: Vec<&'static str>,
}

impl RunRecord {
    /// The record as JSON, as `moat ps --output json`, `moat show --json`
    /// and the protocol's `get` and `list` show it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id.as_str(),
            "parent": self.run.parent.as_ref().map(|p| p.as_str().to_owned()),
            "adapter": self.run.adapter,
            "componentSha256": self.run.component_sha256,
            "status": self.status.as_str(),
            "reason": self.reason.as_ref().map(|r| r.as_str().to_owned()),
            "prompt": self.run.prompt,
            "role": self.run.role,
            "options": self.run.options,
            "grants": self.run.grants,
            "trust": self.run.trust,
            "limits": self.run.limits,
            "timeoutMs": self.run.timeout_ms(),
            "ownerPid": self.owner_pid,
            "worker": self.worker,
            "createdMs": self.created_ms,
            "startedMs": self.started_ms,
            "endedMs": self.ended_ms,
            "done": self.done,
            "spent": self.spent,
        })
    }

    /// What its `done` says it used — tool calls, tokens, cost — read
    /// through the event's own type, so every shape a record may hold
    /// (cligent's `tokens.totals` and `cost.amount`, or the earlier
    /// `tokens.input` and `cost.usd`) gives the same figures; `None`
    /// before it ended, or when its `done` has no readable usage.
    pub fn usage(&self) -> Option<moat_engine::Usage> {
        let usage = self.done.as_ref()?.get("usage")?;
        serde::Deserialize::deserialize(usage).ok()
    }

    /// Whether it has ended.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// When its wall-clock limit runs out (ms since the Unix epoch):
    /// counted from its start, or from its record while it waits to
    /// start; `None` without a limit.
    pub fn deadline_ms(&self) -> Option<u64> {
        let from = self.started_ms.unwrap_or(self.created_ms);
        self.run.timeout_ms().map(|ms| from.saturating_add(ms))
    }
}

/// Which runs a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs in these statuses; empty: any.
    pub statuses: Vec<RunStatus>,
    /// Only runs of this adapter (its name as records show it).
    pub adapter: Option<String>,
    /// Only the children of this run.
    pub parent: Option<RunId>,
    /// At most this many, newest first; `None`: all.
    pub limit: Option<usize>,
}

impl RunFilter {
    /// Whether `record` is one this filter lists (the limit aside).
    pub fn admits(&self, record: &RunRecord) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&record.status))
            && self
                .adapter
                .as_ref()
                .is_none_or(|adapter| *adapter == record.run.adapter)
            && self
                .parent
                .as_ref()
                .is_none_or(|parent| record.run.parent.as_ref() == Some(parent))
    }
}
