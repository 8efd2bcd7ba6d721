//! A run handed to workers elsewhere (a cluster's), as it travels: what
//! to run, under which grants and limits. Everything in it is checked
//! again by the worker that takes it: it comes from the network.

use moat_engine::{RunLimits, RunOptions};
use moat_grants::{Grants, TrustLevel};
use serde::{Deserialize, Serialize};

use crate::id::RunId;
use crate::{AskedProgramLimits, RecordedLimits};

/// Why a job is refused: no moat would have submitted it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidJob(pub String);

/// Which component a job runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ComponentRef {
    /// A built-in adapter of the worker's moat, by name.
    Builtin {
        /// Its name.
        name: String,
    },
    /// A component in the workers' object store, by its SHA-256.
    Stored {
        /// Lowercase hex SHA-256 of its bytes.
        sha256: String,
    },
}

/// A run's workspace, as it travels: its project's files at the base (a
/// git bundle in the workers' object store), made a workspace on the
/// worker; the run's changes come back when it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobWorkspace {
    /// How the submitter asked for it: `worktree` or `copy`.
    pub mode: String,
    /// The bundle's SHA-256.
    pub project: String,
    /// The commit in the bundle that is the base.
    pub commit: String,
    /// Where in the workspace the run works: a relative path (empty: its
    /// top).
    #[serde(default)]
    pub cwd: String,
}

impl JobWorkspace {
    /// Refuses a workspace no moat would have submitted.
    fn check(&self) -> Result<(), InvalidJob> {
        let invalid = |what: String| Err(InvalidJob(what));
        if !matches!(self.mode.as_str(), "worktree" | "copy") {
            return invalid(format!("a job's workspace mode {:?}", self.mode));
        }
        if !is_sha256(&self.project) {
            return invalid(format!(
                "a job's workspace naming its project by {:?}, not a SHA-256",
                self.project
            ));
        }
        let commit = self.commit.as_bytes();
        if !matches!(commit.len(), 40 | 64)
            || !commit
                .iter()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return invalid(format!("a job's workspace commit {:?}", self.commit));
        }
        let inside = std::path::Path::new(&self.cwd)
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)));
        if !inside {
            return invalid(format!(
                "a job's workspace directory {:?} is not a path inside it",
                self.cwd
            ));
        }
        Ok(())
    }
}

/// One run to execute, as submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Job {
    /// The run's id.
    pub id: String,
    /// The run whose end ends this one.
    pub parent: Option<String>,
    /// The adapter's name, as records show it.
    pub adapter: String,
    /// The component to run.
    pub component: ComponentRef,
    /// The prompt.
    pub prompt: String,
    /// The run's options.
    pub options: RunOptions,
    /// The grants the submitter computed: the most the run may have.
    pub grants: Grants,
    /// The trust level.
    pub trust: TrustLevel,
    /// Limits.
    pub limits: RecordedLimits,
    /// Which limits of its programs its submitter's user asked for: a
    /// worker that cannot hold one of them refuses the job.
    #[serde(default, skip_serializing_if = "AskedProgramLimits::is_none")]
    pub asked_limits: AskedProgramLimits,
    /// Whether a worker lost mid-run may be replaced by another that runs
    /// it again from the start (off by default: a coding agent may have
    /// changed files already).
    pub retry_on_worker_loss: bool,
    /// A workspace of its own, made on the worker from the submitter's
    /// project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<JobWorkspace>,
    /// It asks for what its grants do not cover instead of being refused
    /// (`--ask`): how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<JobAsk>,
    /// The submitter's trace context (W3C `traceparent`), when it exports
    /// traces: the worker's span of the run is its child. A malformed one
    /// is ignored, never refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The part its run plays among its siblings (a workflow's task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// How a job's run asks (docs/approvals.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobAsk {
    /// Denied after this long unanswered; `None`: as long as it runs.
    pub timeout_ms: Option<u64>,
    /// The tools asked about before each call.
    #[serde(default)]
    pub tools: Vec<String>,
}

impl Job {
    /// A job with a fresh run id running `component` (named `adapter`) on
    /// `prompt`, with no parent, default options and limits, no grants,
    /// the sandbox trust level and no retry; set the rest as needed.
    pub fn new(
        component: ComponentRef,
        adapter: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        Self {
            id: RunId::new().to_string(),
            parent: None,
            adapter: adapter.into(),
            component,
            prompt: prompt.into(),
            options: RunOptions::default(),
            grants: Grants::default(),
            trust: TrustLevel::default(),
            limits: RecordedLimits::of(&RunLimits::default()),
            asked_limits: AskedProgramLimits::default(),
            retry_on_worker_loss: false,
            workspace: None,
            ask: None,
            traceparent: None,
            role: None,
        }
    }

    /// The same job under a fresh run id.
    pub fn again(&self) -> Self {
        Self {
            id: RunId::new().to_string(),
            ..self.clone()
        }
    }
}

/// The largest job a worker reads: prompts are large, not this large.
pub const MAX_JOB_BYTES: usize = 8 * 1024 * 1024;

impl Job {
    /// A job read from the network, checked: its id, its component's
    /// reference, its grants' shape.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, InvalidJob> {
        if bytes.len() > MAX_JOB_BYTES {
            return Err(InvalidJob(format!(
                "a job of {} bytes is over the limit of {MAX_JOB_BYTES}",
                bytes.len()
            )));
        }
        let job: Job = serde_json::from_slice(bytes)
            .map_err(|e| InvalidJob(format!("a malformed job: {e}")))?;
        job.check()?;
        Ok(job)
    }

    /// Refuses a job no moat would have submitted.
    pub fn check(&self) -> Result<(), InvalidJob> {
        let invalid = |what: String| Err(InvalidJob(what));
        if RunId::parse(&self.id).is_none() {
            return invalid(format!("a job with a malformed run id {:?}", self.id));
        }
        if let Some(parent) = &self.parent
            && RunId::parse(parent).is_none()
        {
            return invalid(format!("a job with a malformed parent id {parent:?}"));
        }
        if let ComponentRef::Stored { sha256 } = &self.component
            && !is_sha256(sha256)
        {
            return invalid(format!(
                "a job naming a component by {sha256:?}, not a SHA-256"
            ));
        }
        if let Some(workspace) = &self.workspace {
            workspace.check()?;
        }
        if let Some(ask) = &self.ask
            && (ask.tools.len() > 64 || ask.tools.iter().any(|t| t.is_empty() || t.len() > 256))
        {
            return invalid(
                "a job asking about more than 64 tools, or malformed tool names".into(),
            );
        }
        self.grants
            .validate()
            .map_err(|e| InvalidJob(format!("a job's grants: {e}")))
    }
}

/// Whether `text` is a lowercase hex SHA-256.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
