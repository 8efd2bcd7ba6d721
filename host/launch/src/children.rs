//! Nested runs: the runs a component starts itself (the contract's `runs`
//! import), launched like any other run — through the same launcher,
//! under the same ceiling as their parent and within their parent's
//! grants, trust and limits, recorded with it as their parent (so they end
//! when it ends) — wherever the parent runs: in this process, or, for a
//! cluster worker's run, on the cluster.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use moat_engine::{AgentEvent, SettingNames};
use moat_grants::Grants;
use moat_runs::{RunId, Runs, RunsError};
use moat_sandbox::{ChildError, ChildRequest, ChildRun, ChildRuns};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admit::{Admission, Asked, Ceiling};
use crate::error::LaunchError;
use crate::limits::{AskedLimits, Timeout};
use crate::refusal::Refusal;
use crate::spec::{AdapterRef, LaunchSpec};

/// How many of a child's events wait for its parent to read them.
const CHILD_EVENTS: usize = 256;

/// What starts the children of a run: the launcher it was launched by.
pub(crate) trait Spawner: Send + Sync {
    /// Launches `spec`'s run and runs it to its end in the background:
    /// its id.
    fn spawn(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<RunId, LaunchError>>;
    /// Where its runs can be found and followed; `None` when nowhere.
    fn runs(&self) -> Option<Arc<dyn Runs>>;
}

/// The children of one run.
pub(crate) struct Children {
    spawner: Box<dyn Spawner>,
    parent: RunId,
    ceiling: Arc<Ceiling>,
    /// The parent's grants: where a child's component may come from.
    grants: Grants,
    names: Arc<dyn SettingNames>,
}

impl Children {
    /// The children of run `parent`, launched as `spec`'s run was and
    /// within what `admission` gave it.
    pub(crate) fn new(
        spawner: Box<dyn Spawner>,
        parent: RunId,
        spec: &LaunchSpec,
        admission: &Admission,
    ) -> Self {
        Self {
            spawner,
            parent,
            ceiling: spec.ceiling.clone(),
            grants: admission.grants.clone(),
            names: spec.names.clone(),
        }
    }

    /// A component may name as its child's adapter a built-in, or a
    /// component inside the directories its own run was granted: the host
    /// never loads (nor says whether it could load) any other file a guest
    /// names.
    fn check_adapter(&self, adapter: &str) -> Result<(), ChildError> {
        if moat_builtins::component(adapter).is_some() {
            return Ok(());
        }
        let path = std::path::Path::new(adapter);
        let inside = path.is_absolute()
            && std::fs::canonicalize(path).is_ok_and(|real| {
                self.grants
                    .read
                    .iter()
                    .chain(&self.grants.write)
                    .any(|dir| real.starts_with(dir))
            });
        if inside {
            return Ok(());
        }
        Err(ChildError::Denied(format!(
            "a child's adapter is a built-in ({}) or a component inside this run's granted directories",
            moat_builtins::names().collect::<Vec<_>>().join(", ")
        )))
    }

    /// A launch failure as the guest is told it.
    fn child_error(&self, error: LaunchError) -> ChildError {
        match error {
            LaunchError::Refused(Refusal::Nesting(problem)) => ChildError::LimitReached(problem),
            LaunchError::Refused(refusal) => {
                ChildError::Denied(refusal.message(self.names.as_ref()))
            }
            LaunchError::Resolve(crate::ResolveError::Unknown { name, .. }) => {
                ChildError::NotFound(format!("no adapter {name}"))
            }
            other => ChildError::Failed(other.to_string()),
        }
    }
}

impl ChildRuns for Children {
    fn start(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildRun>, ChildError>> {
        Box::pin(async move {
            let runs = self.spawner.runs().ok_or_else(|| {
                ChildError::Denied(
                    "runs recorded nowhere cannot nest (leave out --no-store)".into(),
                )
            })?;
            self.check_adapter(&request.adapter)?;
            let spec = LaunchSpec {
                options: request.options,
                asked: Asked {
                    grants: request.grants,
                    // At most the parent's (the ceiling's when it has none).
                    trust: None,
                    limits: AskedLimits {
                        timeout: request.timeout.map(Timeout::After),
                        ..AskedLimits::default()
                    },
                },
                parent: Some(self.parent.clone()),
                names: self.names.clone(),
                ..LaunchSpec::new(
                    AdapterRef::Named(request.adapter),
                    request.prompt,
                    self.ceiling.clone(),
                )
            };
            let id = self
                .spawner
                .spawn(spec)
                .await
                .map_err(|error| self.child_error(error))?;
            Ok(Box::new(Child::follow(runs, id)) as Box<dyn ChildRun>)
        })
    }
}

/// A child run as its parent reads it: its events forwarded, in order and
/// each once, from wherever it runs (followed again from where it was
/// left after a lag), into a small queue the parent drains.
struct Child {
    runs: Arc<dyn Runs>,
    id: RunId,
    events: mpsc::Receiver<Arc<str>>,
    stop: CancellationToken,
}

impl Child {
    fn follow(runs: Arc<dyn Runs>, id: RunId) -> Self {
        let (sender, events) = mpsc::channel(CHILD_EVENTS);
        let stop = CancellationToken::new();
        let following = (runs.clone(), id.clone(), stop.clone());
        tokio::spawn(async move {
            let (runs, id, stop) = following;
            let mut from = 0;
            loop {
                let mut stream = match runs.follow(&id, from).await {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::warn!(run = %id, "cannot follow a child run: {error}");
                        return;
                    }
                };
                loop {
                    let next = tokio::select! {
                        () = stop.cancelled() => return,
                        next = stream.next() => next,
                    };
                    match next {
                        Some(Ok(event)) => {
                            if sender.send(event.json).await.is_err() || event.done {
                                return;
                            }
                        }
                        Some(Err(RunsError::Lagged { next })) => {
                            from = next;
                            break;
                        }
                        Some(Err(error)) => {
                            tracing::warn!(run = %id, "following a child run: {error}");
                            return;
                        }
                        None => return,
                    }
                }
            }
        });
        Child {
            runs,
            id,
            events,
            stop,
        }
    }

    fn failed(message: impl std::fmt::Display) -> Value {
        json!({"status": "error", "usage": {"toolUses": 0}, "error": {"message": message.to_string()}})
    }
}

impl ChildRun for Child {
    fn id(&self) -> String {
        self.id.to_string()
    }

    fn next_event(&mut self) -> BoxFuture<'_, Option<AgentEvent>> {
        Box::pin(async move {
            // Events moat recorded and encoded itself.
            let json = self.events.recv().await?;
            serde_json::from_str(&json).ok()
        })
    }

    fn result(&mut self) -> BoxFuture<'_, Value> {
        Box::pin(async move {
            if let Err(error) = self.runs.wait(&self.id).await {
                return Self::failed(error);
            }
            match moat_runs::result(self.runs.as_ref(), &self.id).await {
                Ok(result) => serde_json::to_value(result).unwrap_or(Value::Null),
                Err(error) => Self::failed(error),
            }
        })
    }

    fn cancel(&self) {
        let (runs, id) = (self.runs.clone(), self.id.clone());
        tokio::spawn(async move {
            if let Err(error) = runs.cancel(&id).await {
                tracing::warn!(run = %id, "cannot cancel a child run: {error}");
            }
        });
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
