//! Where a run is in its life, why it failed, and how it ended.

use std::fmt;
use std::str::FromStr;

use moat_engine::{AgentEvent, DonePayload, DoneStatus, EventPayload, Usage};

/// Where a run is in its life. `Completed` and `Failed` are terminal: a
/// run reaches exactly one of them, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Recorded; its adapter not started yet.
    Pending,
    /// Its adapter is running.
    Running,
    /// Running, and waiting for an answer to a request it made (see
    /// [`crate::Approval`]): it goes on once answered.
    Waiting,
    /// It ended with `done` success.
    Completed,
    /// It ended any other way; the record says why.
    Failed,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Completed,
        RunStatus::Failed,
    ];

    /// Its name in the store and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    /// The statuses of a run that has not ended.
    pub const LIVE: [RunStatus; 3] = [RunStatus::Pending, RunStatus::Running, RunStatus::Waiting];

    /// Whether the run is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown status {text:?}; use pending, running, waiting, completed or failed"
                )
            })
    }
}

/// Why a run failed, as the seed's error classification names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailReason {
    /// Its timeout expired.
    Timeout,
    /// Someone cancelled it (or stopped the moat that ran it).
    Cancelled,
    /// The adapter reported an error or crashed.
    AdapterError,
    /// The moat process that owned it is gone.
    EngineRestart,
    /// Its parent run ended.
    ParentEnded,
    /// The store could not record it.
    StoreError,
    /// Another reason, in words.
    Other(String),
}

impl FailReason {
    /// Its words in the store.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::AdapterError => "adapter error",
            Self::EngineRestart => "engine restart",
            Self::ParentEnded => "parent ended",
            Self::StoreError => "store error",
            Self::Other(reason) => reason,
        }
    }

    /// The reason stored as `text`.
    pub fn from_stored(text: &str) -> Self {
        match text {
            "timeout" => Self::Timeout,
            "cancelled" => Self::Cancelled,
            "adapter error" => Self::AdapterError,
            "engine restart" => Self::EngineRestart,
            "parent ended" => Self::ParentEnded,
            "store error" => Self::StoreError,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `Completed` or `Failed`.
    pub status: RunStatus,
    /// Why, when it failed.
    pub reason: Option<FailReason>,
    /// The `done` payload (JSON), when there was one.
    pub done: Option<serde_json::Value>,
}

impl Outcome {
    /// The outcome a run's `done` event gives: its status as the host saw
    /// the run end (`timed_out`: the engine's TIMEOUT error came before),
    /// never what the adapter claims about itself alone.
    pub fn of_done(status: DoneStatus, timed_out: bool, event: &AgentEvent) -> Self {
        let done = serde_json::to_value(event)
            .ok()
            .and_then(|value| value.get("payload").cloned());
        let (status, reason) = match status {
            DoneStatus::Success => (RunStatus::Completed, None),
            _ if timed_out => (RunStatus::Failed, Some(FailReason::Timeout)),
            DoneStatus::Interrupted => (RunStatus::Failed, Some(FailReason::Cancelled)),
            DoneStatus::MaxTurns => (
                RunStatus::Failed,
                Some(FailReason::Other("max turns".into())),
            ),
            DoneStatus::MaxBudget => (
                RunStatus::Failed,
                Some(FailReason::Other("max budget".into())),
            ),
            DoneStatus::Error => (RunStatus::Failed, Some(FailReason::AdapterError)),
        };
        Outcome {
            status,
            reason,
            done,
        }
    }

    /// The `done` a run that ended this way without one is given: success
    /// for a completed run, interrupted for a cancelled one (or one whose
    /// parent ended), error otherwise.
    pub fn synthesized_done(&self, agent: &str) -> AgentEvent {
        let status = match (&self.status, &self.reason) {
            (RunStatus::Completed, _) => DoneStatus::Success,
            (_, Some(FailReason::Cancelled | FailReason::ParentEnded)) => DoneStatus::Interrupted,
            _ => DoneStatus::Error,
        };
        AgentEvent::by_host(
            agent,
            EventPayload::Done(Box::new(DonePayload {
                status,
                result: None,
                resume_token: None,
                usage: Usage::default(),
                duration_ms: 0,
                metadata: None,
            })),
        )
    }
}
