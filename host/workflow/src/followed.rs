//! A run's events as an attempt's report, whether the attempt started the
//! run here ([`crate::LaunchRunner`]'s `run`) or re-attached to one an
//! earlier moat started and a cluster kept going (its `reattach`).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use moat_engine::{AgentEvent, DoneStatus, EventPayload, ResultFold};
use moat_runs::{RunId, Runs};
use tokio_util::sync::CancellationToken;

use crate::runner::{AttemptStatus, RunNotice, TaskReport};

/// Folds a run's `events` to its end into the attempt's report; `abort`
/// tells an interrupted run stopped by the attempt's abort (cancelled)
/// from one that failed.
pub(crate) async fn report(
    events: impl Stream<Item = AgentEvent>,
    abort: &CancellationToken,
    run: Option<String>,
    notice: &RunNotice,
) -> TaskReport {
    let mut fold = ResultFold::new();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        // A request held open for an answer: the workflow says so.
        if let (EventPayload::PermissionRequest(request), Some(run)) = (&event.payload, &run)
            && let Some(number) = &request.request_id
        {
            let reason = request.reason.as_deref().unwrap_or(&request.tool_name);
            notice.waiting(run, number, reason);
        }
        fold.observe(&event, &mut ());
    }
    let result = fold.finish();
    let status = match result.status {
        DoneStatus::Success => AttemptStatus::Completed,
        DoneStatus::Interrupted if abort.is_cancelled() => AttemptStatus::Cancelled,
        other => AttemptStatus::Failed {
            reason: match &result.error {
                Some(error) => match &error.code {
                    Some(code) => format!("{code}: {}", error.message),
                    None => error.message.clone(),
                },
                None => format!("the run ended {}", other.as_str()),
            },
        },
    };
    TaskReport {
        status,
        answer: result.text.unwrap_or_default(),
        run,
        usage: result.usage,
    }
}

/// Follows run `id` in `runs` from its first event to its end — the
/// stored ones, then the live ones — into the attempt's report. `abort`
/// cancels the run where it runs, as it does a run started here.
pub(crate) async fn follow(
    runs: Arc<dyn Runs>,
    id: RunId,
    abort: CancellationToken,
    notice: RunNotice,
) -> TaskReport {
    let run = Some(id.to_string());
    let stored = match runs.follow(&id, 0).await {
        Ok(stored) => stored,
        Err(error) => {
            return TaskReport {
                run,
                ..TaskReport::failed(format!(
                    "cannot follow run {id} in {}: {error}",
                    runs.place()
                ))
            };
        }
    };
    let cancelling = {
        let (runs, id, abort) = (runs.clone(), id.clone(), abort.clone());
        tokio::spawn(async move {
            abort.cancelled().await;
            if let Err(error) = runs.cancel(&id).await {
                tracing::warn!(run = %id, "cannot cancel the run: {error}");
            }
        })
    };
    let events = stored.filter_map(|event| async move {
        match event {
            Ok(stored) => stored.event(),
            Err(error) => {
                tracing::warn!("following a run: {error}");
                None
            }
        }
    });
    let report = report(events, &abort, run, &notice).await;
    // The run has ended: nothing left to cancel.
    cancelling.abort();
    report
}
