//! A run's record in the cluster: the local store's fields and status
//! machine (`pending → running → completed | failed`, with a reason), plus
//! what the cluster needs — the worker running it, a cancel asked for, its
//! children, its attempt.

use moat_runs::{FailReason, NewRun, RunId, RunRecord, RunStatus};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use moat_runs::job::{ComponentRef, Job};

/// Why a run failed when its worker stopped beating.
pub const WORKER_LOST: &str = "worker lost";
/// Why a run failed when a worker refused its grants.
pub const BOUNDARY_VIOLATION: &str = "boundary violation";

/// A run's record, as the records bucket holds it (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRun {
    /// What was submitted.
    pub job: Job,
    /// `pending`, `running`, `completed` or `failed`.
    pub status: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// Its `done` payload, once it ended.
    pub done: Option<serde_json::Value>,
    /// The worker running (or that ran) it.
    pub worker: Option<String>,
    /// How many times a worker started it.
    pub attempt: u32,
    /// A cancel asked for, and why (`cancelled`, `parent ended`).
    pub cancel: Option<String>,
    /// Runs started with this one as their parent.
    #[serde(default)]
    pub children: Vec<String>,
    /// When it was submitted, started and ended (ms since the Unix epoch).
    pub created_ms: u64,
    /// When a worker started it.
    pub started_ms: Option<u64>,
    /// When it reached its terminal status.
    pub ended_ms: Option<u64>,
    /// Which ending ended it: the one to publish its `done`, even when
    /// trying again after a failure (see `Cluster::end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ending: Option<String>,
    /// What the run asked for mid-run, and the answers (approvals.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<moat_runs::Approval>,
}

impl ClusterRun {
    /// The record of `job`, just submitted.
    pub fn submitted(job: Job) -> Self {
        Self {
            job,
            status: RunStatus::Pending.as_str().into(),
            reason: None,
            done: None,
            worker: None,
            attempt: 0,
            cancel: None,
            children: Vec::new(),
            created_ms: moat_engine::now_ms(),
            started_ms: None,
            ended_ms: None,
            ending: None,
            approvals: Vec::new(),
        }
    }

    /// Its status; a record whose status no moat writes reads as failed.
    /// (A running run with an open request is `running` here; it reads
    /// `waiting` in [`to_run_record`](Self::to_run_record).)
    pub fn status(&self) -> RunStatus {
        self.status.parse().unwrap_or(RunStatus::Failed)
    }

    /// Whether it has ended.
    pub fn is_terminal(&self) -> bool {
        self.status().is_terminal()
    }

    /// A record read from the bucket, checked.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ClusterError> {
        let run: ClusterRun = serde_json::from_slice(bytes)
            .map_err(|e| ClusterError::Invalid(format!("a malformed run record: {e}")))?;
        run.job.check()?;
        Ok(run)
    }

    /// As JSON bytes for the bucket.
    pub fn to_bytes(&self) -> bytes::Bytes {
        serde_json::to_vec(self)
            .expect("a record is plain data")
            .into()
    }

    /// The record as the local store shows one (`moat ps`, `show`, the
    /// protocol): the same fields; the owner is a worker, not a pid (0).
    pub fn to_run_record(&self) -> RunRecord {
        let job = &self.job;
        let id = RunId::parse(&job.id).expect("checked when read");
        let component_sha256 = match &job.component {
            ComponentRef::Builtin { name } => format!("built-in:{name}"),
            ComponentRef::Stored { sha256 } => sha256.clone(),
        };
        RunRecord {
            id,
            run: NewRun {
                parent: job.parent.as_deref().and_then(RunId::parse),
                adapter: job.adapter.clone(),
                component_sha256,
                prompt: job.prompt.clone(),
                options: serde_json::to_value(&job.options).unwrap_or_default(),
                grants: job.grants.clone(),
                trust: Some(job.trust),
                limits: Some(job.limits.clone()),
                role: job.role.clone(),
            },
            status: match self.status() {
                RunStatus::Running if self.approvals.iter().any(|a| a.is_open()) => {
                    RunStatus::Waiting
                }
                status => status,
            },
            reason: self.reason.as_deref().map(FailReason::from_stored),
            done: self.done.clone(),
            owner_pid: 0,
            worker: self.worker.clone(),
            created_ms: self.created_ms,
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            spent: None,
            // A cluster's record reads whole or not at all.
            unreadable: Vec::new(),
        }
    }
}
