//! A workflow's state: what each task has done, written after every
//! transition to `<project>/.moat/workflows/<name>/state.json` — atomically
//! (a temporary file, synced, renamed over it, the directory synced), so a
//! crash leaves the old state or the new, never half of one. A lock file
//! beside it keeps two moat processes from running the same workflow.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use moat_engine::Usage;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::definition::Workflow;

/// The version of the state's shape this moat writes.
pub const VERSION: &str = "1";

/// Where a workflow keeps its state, under its project.
pub fn directory(workflow: &Workflow) -> PathBuf {
    workflow
        .project
        .join(".moat")
        .join("workflows")
        .join(&workflow.name)
}

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TaskStatus {
    /// Not started, or to be run again.
    Pending,
    /// Dispatched; a crash leaves it so, and a resume re-attaches to its
    /// run when it can ([`TaskState::run`]), runs it again when not.
    Running,
    /// Done: a resume skips it.
    Completed,
    /// Failed after its retries.
    Failed,
}

impl TaskStatus {
    /// Its name, as the state file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
        }
    }
}

/// How the workflow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowStatus {
    /// Running, or stopped by a crash.
    Running,
    /// Every task completed.
    Completed,
    /// A task failed.
    Failed,
    /// Cancelled (Ctrl-C, `moat cancel`).
    Cancelled,
}

impl WorkflowStatus {
    /// Its name, as the state file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The state file's contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// [`VERSION`].
    pub version: String,
    /// The workflow's name.
    pub workflow: String,
    /// Its project directory.
    pub project: PathBuf,
    /// When it was first started (RFC 3339).
    pub started_at: String,
    /// When its latest run ended (RFC 3339).
    #[serde(default)]
    pub ended_at: Option<String>,
    /// How it stands.
    pub status: WorkflowStatus,
    /// SHA-256 of the workflow file it was started with.
    pub file_sha256: String,
    /// The run-store records of its runs, oldest first (each resume adds
    /// one).
    #[serde(default)]
    pub runs: Vec<String>,
    /// Each task's state, by id.
    pub tasks: BTreeMap<String, TaskState>,
}

/// One task's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskState {
    /// Its status.
    pub status: TaskStatus,
    /// When its first attempt started (RFC 3339).
    pub started_at: Option<String>,
    /// When it completed or failed (RFC 3339).
    pub completed_at: Option<String>,
    /// The files it produced.
    #[serde(default)]
    pub outputs: Vec<PathBuf>,
    /// Loop iterations done (1 for a task without a loop, once done).
    #[serde(default)]
    pub iterations: u32,
    /// The current attempt of its current iteration.
    #[serde(default)]
    pub attempts: u32,
    /// What it hands over to the tasks after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<Map<String, Value>>,
    /// Why it failed, or why it runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The task whose failure keeps it from running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    /// The run-store records of its attempts, oldest first, each listed
    /// once its attempt ended.
    #[serde(default)]
    pub runs: Vec<String>,
    /// The run of its attempt in flight: written before the run starts,
    /// cleared when the attempt ends. A moat killed meanwhile leaves it
    /// here, and a resume follows that run (in a cluster it went on)
    /// rather than start the task a second time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Tokens and cost of all its attempts.
    #[serde(default)]
    pub usage: Usage,
    /// Wall time of all its attempts, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

impl TaskState {
    /// A task not started.
    pub fn pending() -> Self {
        Self {
            status: TaskStatus::Pending,
            started_at: None,
            completed_at: None,
            outputs: Vec::new(),
            iterations: 0,
            attempts: 0,
            handover: None,
            error: None,
            blocked_by: None,
            runs: Vec::new(),
            run: None,
            usage: Usage::default(),
            duration_ms: 0,
        }
    }
}

impl State {
    /// The state of `workflow` before anything ran.
    pub fn new(workflow: &Workflow) -> Self {
        Self {
            version: VERSION.into(),
            workflow: workflow.name.clone(),
            project: workflow.project.clone(),
            started_at: now(),
            ended_at: None,
            status: WorkflowStatus::Running,
            file_sha256: workflow.hash.clone(),
            runs: Vec::new(),
            tasks: workflow
                .tasks
                .iter()
                .map(|task| (task.id.clone(), TaskState::pending()))
                .collect(),
        }
    }
}

/// The time now, as the state writes it.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Why a state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a state moat can read.
    #[error("{path} is not a workflow state moat can read ({reason}); move it away to start over")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Another process runs the workflow.
    #[error("another moat runs this workflow (it holds {path}); wait for it or cancel it")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// The state file of a workflow, held against other processes while it is
/// open.
pub struct StateFile {
    path: PathBuf,
    /// Held locked until dropped.
    _lock: File,
}

/// How many times a held lock is tried again, [`LOCK_PAUSE`] apart.
const LOCK_TRIES: u32 = 50;
/// The pause between two tries at the lock.
const LOCK_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

impl StateFile {
    /// Opens the state directory of `workflow` (creating it) and locks it.
    pub fn open(workflow: &Workflow) -> Result<Self, StateError> {
        let directory = directory(workflow);
        std::fs::create_dir_all(&directory).map_err(|source| StateError::Io {
            path: directory.clone(),
            source,
        })?;
        let lock_path = directory.join("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| StateError::Io {
                path: lock_path.clone(),
                source,
            })?;
        // A process this one forked holds its locks until it execs or
        // closes its descriptors (a run's programs' helpers do within
        // moments): a lock held past a short wait is another moat's.
        let mut tries = 0;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                    tries += 1;
                    std::thread::sleep(LOCK_PAUSE);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StateError::Locked { path: lock_path });
                }
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(StateError::Io {
                        path: lock_path,
                        source,
                    });
                }
            }
        }
        Ok(Self {
            path: directory.join("state.json"),
            _lock: lock,
        })
    }

    /// Where the state is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state written last, if any.
    pub fn load(&self) -> Result<Option<State>, StateError> {
        read(&self.path)
    }

    /// Writes `state` atomically.
    pub fn save(&self, state: &State) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: self.path.clone(),
            source,
        };
        let json = serde_json::to_vec_pretty(state).map_err(|e| io(std::io::Error::other(e)))?;
        let temporary = self.path.with_extension("json.tmp");
        let mut file = File::create(&temporary).map_err(io)?;
        file.write_all(&json).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&temporary, &self.path).map_err(io)?;
        // The rename itself must survive a power cut.
        if let Some(directory) = self.path.parent()
            && let Ok(directory) = File::open(directory)
        {
            let _ = directory.sync_all();
        }
        Ok(())
    }
}

/// Reads the state at `path` without locking it (`moat workflow status`).
pub fn read(path: &Path) -> Result<Option<State>, StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let state: State = serde_json::from_slice(&bytes).map_err(|e| StateError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if state.version != VERSION {
        return Err(StateError::Invalid {
            path: path.to_path_buf(),
            reason: format!("version {:?}, this moat writes {VERSION:?}", state.version),
        });
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_what_the_file_says() {
        for status in [
            TaskStatus::Pending,
            TaskStatus::Running,
            TaskStatus::Completed,
            TaskStatus::Failed,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for status in [
            WorkflowStatus::Running,
            WorkflowStatus::Completed,
            WorkflowStatus::Failed,
            WorkflowStatus::Cancelled,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }
}
