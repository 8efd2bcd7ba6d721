//! The `moat:adapter/runs` import of contract 0.4.0, and of 0.3.0 (the
//! same interface): a component's child
//! runs, started and read through the run's [`ChildRuns`]
//! (crate::children). Every wait gives up at once when the parent run is
//! aborted, or at its own timeout.

use wasmtime::component::Resource;

use super::moat::adapter::runs::{ChildRequest, Host, HostChildRun, RunError};
use crate::children::{self, ChildError, ChildHandle};
use crate::state::RunState;
use moat_contain::interrupt::Cut;

/// Longest JSON the guest may send as options or grants, and the longest
/// prompt.
const MAX_REQUEST_JSON: usize = 1024 * 1024;

/// Longest adapter name or path.
const MAX_ADAPTER: usize = 4096;

impl Host for RunState {
    async fn start(
        &mut self,
        request: ChildRequest,
    ) -> wasmtime::Result<Result<Resource<ChildHandle>, RunError>> {
        let Some(runner) = self.children.clone() else {
            return Ok(Err(RunError::Denied(
                "this run cannot start child runs: whoever started it allows none (a run recorded nowhere has no children)".into(),
            )));
        };
        let request = match checked(request) {
            Ok(request) => request,
            Err(error) => return Ok(Err(error)),
        };
        let control = self.control.clone();
        let started = control.interrupt.guard(None, runner.0.start(request)).await;
        match started {
            Ok(Ok(run)) => Ok(Ok(self.table.push(ChildHandle { run, ended: false })?)),
            Ok(Err(error)) => Ok(Err(run_error(error))),
            Err(cut) => Ok(Err(cut_error(cut))),
        }
    }
}

impl HostChildRun for RunState {
    async fn id(&mut self, child: Resource<ChildHandle>) -> wasmtime::Result<String> {
        Ok(self.table.get(&child)?.run.id())
    }

    async fn next_event(
        &mut self,
        child: Resource<ChildHandle>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<Option<String>, RunError>> {
        let control = self.control.clone();
        let handle = self.table.get_mut(&child)?;
        if handle.ended {
            return Ok(Ok(None));
        }
        match control
            .interrupt
            .guard(timeout_ms, handle.run.next_event())
            .await
        {
            Ok(Some(event)) => {
                handle.ended = event.is_done();
                let json = serde_json::to_string(&event).unwrap_or_default();
                Ok(Ok(Some(json)))
            }
            Ok(None) => {
                handle.ended = true;
                Ok(Ok(None))
            }
            Err(cut) => Ok(Err(cut_error(cut))),
        }
    }

    async fn wait(
        &mut self,
        child: Resource<ChildHandle>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<String, RunError>> {
        let control = self.control.clone();
        let handle = self.table.get_mut(&child)?;
        match control
            .interrupt
            .guard(timeout_ms, handle.run.result())
            .await
        {
            Ok(result) => {
                handle.ended = true;
                Ok(Ok(result.to_string()))
            }
            Err(cut) => Ok(Err(cut_error(cut))),
        }
    }

    async fn cancel(&mut self, child: Resource<ChildHandle>) -> wasmtime::Result<()> {
        self.table.get(&child)?.run.cancel();
        Ok(())
    }

    async fn drop(&mut self, child: Resource<ChildHandle>) -> wasmtime::Result<()> {
        // The handle's own drop cancels a child that still runs.
        self.table.delete(child)?;
        Ok(())
    }
}

/// The guest's request, its JSON parts read and bounded.
fn checked(request: ChildRequest) -> Result<children::ChildRequest, RunError> {
    let json = |what: &str, text: &Option<String>| match text {
        Some(text) if text.len() > MAX_REQUEST_JSON => Err(RunError::Failed(format!(
            "the child's {what} are over {MAX_REQUEST_JSON} bytes"
        ))),
        _ => Ok(()),
    };
    json("options", &request.options)?;
    json("grants", &request.grants)?;
    if request.prompt.len() > MAX_REQUEST_JSON {
        return Err(RunError::Failed(format!(
            "the child's prompt is over {MAX_REQUEST_JSON} bytes"
        )));
    }
    if request.adapter.is_empty() || request.adapter.len() > MAX_ADAPTER {
        return Err(RunError::Failed(format!(
            "the child's adapter is a name or path of 1 to {MAX_ADAPTER} bytes"
        )));
    }
    let options = match &request.options {
        Some(text) => serde_json::from_str(text).map_err(|e| {
            RunError::Failed(format!("the child's options are not RunOptions: {e}"))
        })?,
        None => Default::default(),
    };
    let grants = match &request.grants {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| RunError::Failed(format!("the child's grants are not grants: {e}")))?,
        ),
        None => None,
    };
    Ok(children::ChildRequest {
        adapter: request.adapter,
        prompt: request.prompt,
        options,
        grants,
        timeout: request.timeout_ms.map(std::time::Duration::from_millis),
    })
}

fn run_error(error: ChildError) -> RunError {
    match error {
        ChildError::Denied(message) => RunError::Denied(message),
        ChildError::NotFound(message) => RunError::NotFound(message),
        ChildError::LimitReached(message) => RunError::LimitReached(message),
        ChildError::Failed(message) => RunError::Failed(message),
    }
}

fn cut_error(cut: Cut) -> RunError {
    match cut {
        Cut::Interrupted => RunError::Interrupted,
        Cut::TimedOut => RunError::TimedOut,
    }
}
