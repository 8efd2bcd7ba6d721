//! The cluster's runs behind the [`Runs`] trait, so commands, the protocol
//! and workflows read and cancel them as they do this machine's.

use std::sync::Arc;

use futures::StreamExt;
use moat_runs::{
    Answer, Approval, EventStream, FailReason, RunFilter, RunId, RunRecord, Runs, RunsError,
    StoredEvent,
};

use crate::cluster::Cluster;
use crate::error::ClusterError;
use crate::events::NumberedEvent;

/// How many runs an ambiguous prefix's error names.
const AMBIGUOUS_SHOWN: usize = 5;

/// A cluster error as the trait's.
pub(crate) fn runs_error(error: ClusterError) -> RunsError {
    match error {
        ClusterError::NotFound(text) => RunsError::NotFound(text),
        ClusterError::Invalid(message) => RunsError::Invalid(message),
        other => RunsError::Unavailable(other.to_string()),
    }
}

/// A stored or followed event as readers take it: its JSON, the line the
/// stream holds when there is one (parsed already, so it is an event's).
fn stored(numbered: &NumberedEvent) -> StoredEvent {
    let line = numbered
        .json
        .as_deref()
        .and_then(|line| std::str::from_utf8(line).ok());
    let json = match line {
        Some(line) => Arc::from(line),
        None => Arc::from(serde_json::to_string(&numbered.event).unwrap_or_default()),
    };
    StoredEvent {
        seq: numbered.seq,
        json,
        done: numbered.event.is_done(),
    }
}

#[async_trait::async_trait]
impl Runs for Cluster {
    fn place(&self) -> &'static str {
        "the cluster"
    }

    async fn resolve(&self, text: &str) -> Result<RunId, RunsError> {
        let text = RunId::prefix_from(text);
        let text = text.as_str();
        if let Some(id) = RunId::parse(text)
            && self.get(text).await.map_err(runs_error)?.is_some()
        {
            return Ok(id);
        }
        let mut matches: Vec<RunId> = self
            .ids()
            .await
            .map_err(runs_error)?
            .iter()
            .filter(|id| !text.is_empty() && id.starts_with(text))
            .filter_map(|id| RunId::parse(id))
            .collect();
        matches.sort();
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(RunsError::NotFound(text.to_owned())),
            count => Err(RunsError::Ambiguous {
                prefix: text.to_owned(),
                count,
                candidates: matches.into_iter().take(AMBIGUOUS_SHOWN).collect(),
            }),
        }
    }

    async fn get(&self, id: &RunId) -> Result<Option<RunRecord>, RunsError> {
        Ok(Cluster::get(self, id.as_str())
            .await
            .map_err(runs_error)?
            .map(|run| run.to_run_record()))
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RunsError> {
        Ok(Cluster::list(self)
            .await
            .map_err(runs_error)?
            .iter()
            .map(|run| run.to_run_record())
            .filter(|record| filter.admits(record))
            .take(filter.limit.unwrap_or(usize::MAX))
            .collect())
    }

    async fn cancel(&self, id: &RunId) -> Result<(), RunsError> {
        Cluster::cancel(self, id.as_str(), FailReason::Cancelled)
            .await
            .map_err(runs_error)
    }

    async fn stored(
        &self,
        id: &RunId,
        from: u64,
        max: usize,
    ) -> Result<Vec<StoredEvent>, RunsError> {
        Ok(self
            .stored_events(id.as_str(), from)
            .await
            .map_err(runs_error)?
            .iter()
            .take(max)
            .map(stored)
            .collect())
    }

    async fn follow(&self, id: &RunId, from: u64) -> Result<EventStream, RunsError> {
        if Cluster::get(self, id.as_str())
            .await
            .map_err(runs_error)?
            .is_none()
        {
            return Err(RunsError::NotFound(id.to_string()));
        }
        let events = Cluster::follow(self, id.as_str(), from)
            .await
            .map_err(runs_error)?;
        Ok(events
            .map(|event| event.map(|numbered| stored(&numbered)).map_err(runs_error))
            .boxed())
    }

    async fn wait(&self, id: &RunId) -> Result<RunRecord, RunsError> {
        Ok(Cluster::wait(self, id.as_str())
            .await
            .map_err(runs_error)?
            .to_run_record())
    }

    async fn approvals(&self, id: &RunId) -> Result<Vec<Approval>, RunsError> {
        Cluster::approvals(self, id.as_str())
            .await
            .map_err(runs_error)
    }

    async fn answer(
        &self,
        id: &RunId,
        number: Option<u32>,
        answer: Answer,
    ) -> Result<Approval, RunsError> {
        Cluster::answer(self, id.as_str(), number, &answer)
            .await
            .map_err(runs_error)
    }
}
