//! Rendering a stream of events until it ends, with Ctrl-C wired to the
//! run's abort token. Shared by `run` and `parallel`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use moat_engine::{AgentEvent, DoneStatus, EventPayload};

use crate::EXIT_INTERRUPTED;
use crate::render::Renderer;

/// How long the stream may be silent before the renderer is told.
const SPINNER_DELAY: Duration = Duration::from_millis(150);

/// Renders every event and returns the exit code: 0 when every run ended
/// in success, 130 when any was interrupted, 1 otherwise.
pub async fn render_until_done(
    events: impl Stream<Item = AgentEvent>,
    renderer: &mut dyn Renderer,
    abort: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let ctrl_c = tokio::spawn(interrupt_on_ctrl_c(abort));
    let mut events = std::pin::pin!(events);
    let mut statuses = Vec::new();
    loop {
        // Keep the same pending read across the spinner timer: dropping it
        // would lose the event it is about to return.
        let mut next = events.next();
        let event = tokio::select! {
            biased;
            event = &mut next => event,
            () = tokio::time::sleep(SPINNER_DELAY) => {
                renderer.waiting();
                next.await
            }
        };
        let Some(event) = event else { break };
        if let EventPayload::Done(done) = &event.payload {
            statuses.push(done.status);
        }
        renderer.event(&event).context("cannot write the output")?;
    }
    renderer.finish().context("cannot write the output")?;
    ctrl_c.abort();
    Ok(exit_code(&statuses))
}

fn exit_code(statuses: &[DoneStatus]) -> ExitCode {
    if statuses.contains(&DoneStatus::Interrupted) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if !statuses.is_empty() && statuses.iter().all(|s| *s == DoneStatus::Success) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The first Ctrl-C interrupts (every run ends with `done` interrupted);
/// a second one leaves at once.
async fn interrupt_on_ctrl_c(abort: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    tracing::info!("interrupting (Ctrl-C again to quit at once)");
    abort.cancel();
    if tokio::signal::ctrl_c().await.is_ok() {
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    }
}
