//! Rendering a stream of events until it ends, with the ways a user stops
//! moat wired to the run's abort token. Shared by `run` and `parallel`.
//!
//! The first `SIGINT` (Ctrl-C), `SIGTERM` or `SIGHUP` aborts the runs:
//! each adapter may wind down for its drain, then ends with one `done`
//! interrupted. Any second one stops them at once: every adapter and every
//! process it started is killed, and each run still ends with its one
//! `done` interrupted. Either way moat exits with the conventional code of
//! the first signal (130, 143, 129).

use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use futures::{FutureExt, Stream, StreamExt};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

use moat_engine::{AgentEvent, DoneStatus, EventPayload};

use super::prompt::TerminalPrompt;
use crate::render::Renderer;

/// How long the stream may be silent before the renderer is told.
const SPINNER_DELAY: Duration = Duration::from_millis(150);

/// A signal that stops moat, and the exit code it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `SIGINT` (Ctrl-C): exit code 130.
    Interrupt,
    /// `SIGTERM`: exit code 143.
    Terminate,
    /// `SIGHUP` (the terminal went away): exit code 129.
    Hangup,
}

impl Stopped {
    /// 128 plus the signal's number, as shells report it.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
            Self::Hangup => 129,
        }
    }
}

/// A stream of events to render.
pub trait Shown: Stream<Item = AgentEvent> + Unpin {
    /// The JSON of the event the stream gave last, when the stream encoded
    /// it already (a recorded run's events are encoded for the store): the
    /// NDJSON output prints it rather than encoding the event again.
    fn encoded(&self) -> Option<&[u8]> {
        None
    }
}

/// Any stream of events, boxed, with nothing encoded.
impl<S: Stream<Item = AgentEvent> + ?Sized> Shown for Pin<Box<S>> {}

/// Launched runs: recorded ones come encoded for the store already.
impl Shown for moat_launch::Launched {
    fn encoded(&self) -> Option<&[u8]> {
        moat_launch::Launched::encoded(self)
    }
}

/// Renders every event and returns the exit code: the first stopping
/// signal's when the user stopped moat (whatever the adapter reported), 0
/// when every run ended in success, 1 otherwise.
pub async fn render_until_done(
    mut events: impl Shown,
    renderer: &mut dyn Renderer,
    abort: CancellationToken,
    mut prompt: Option<TerminalPrompt>,
) -> anyhow::Result<ExitCode> {
    // Listening starts now, before the first event is pulled (which starts
    // the run): a signal from then on is ours, never the default action.
    let (signals, stopped) = on_signals(abort);
    let mut statuses = Vec::new();
    loop {
        // An event ready now is rendered at once; before waiting for one,
        // what the renderer gathered is shown.
        let event = match events.next().now_or_never() {
            Some(event) => event,
            None => {
                renderer.flush().context("cannot write the output")?;
                // Keep the same pending read across the spinner timer and
                // the lines typed to answer a request.
                let mut next = events.next();
                let mut spinner_due = true;
                loop {
                    tokio::select! {
                        biased;
                        event = &mut next => break event,
                        line = typed(&mut prompt) => {
                            let shown = answered(&mut prompt, &line).await;
                            renderer.asking(shown).context("cannot write the output")?;
                        }
                        () = tokio::time::sleep(SPINNER_DELAY), if spinner_due => {
                            spinner_due = false;
                            renderer.waiting();
                        }
                    }
                }
            }
        };
        let Some(event) = event else { break };
        if let EventPayload::Done(done) = &event.payload {
            statuses.push(done.status);
        }
        let shown = match events.encoded() {
            Some(json) => renderer.stored(json),
            None => Ok(false),
        };
        if !shown.context("cannot write the output")? {
            renderer.event(&event).context("cannot write the output")?;
        }
        if let Some(super::prompt::Shown::Ask(question)) =
            prompt.as_mut().and_then(|prompt| prompt.seen(&event))
        {
            renderer
                .asking(Some(question))
                .context("cannot write the output")?;
        }
    }
    renderer.finish().context("cannot write the output")?;
    signals.abort();
    Ok(exit_code(&statuses, stopped.get().copied()))
}

/// The next line typed to answer a request; pending without a prompt.
async fn typed(prompt: &mut Option<TerminalPrompt>) -> String {
    match prompt {
        Some(prompt) => prompt.line().await,
        None => std::future::pending().await,
    }
}

/// Answers with `line`: the question asked again, or `None` (answered).
async fn answered(prompt: &mut Option<TerminalPrompt>, line: &str) -> Option<&'static str> {
    match prompt {
        Some(prompt) => match prompt.answer(line).await {
            super::prompt::Shown::Ask(again) => Some(again),
            super::prompt::Shown::Answered => None,
        },
        None => None,
    }
}

/// Listens for the stopping signals from now on: the first cancels
/// `abort`, a second stops every run at once. The cell holds the first
/// signal once one came.
pub fn on_signals(
    abort: CancellationToken,
) -> (tokio::task::JoinHandle<()>, Arc<OnceLock<Stopped>>) {
    let stopped = Arc::new(OnceLock::new());
    let signals = tokio::spawn(stop_on_signals(listen(), abort, stopped.clone()));
    (signals, stopped)
}

fn exit_code(statuses: &[DoneStatus], stopped: Option<Stopped>) -> ExitCode {
    if let Some(stopped) = stopped {
        return ExitCode::from(stopped.exit_code());
    }
    // An interruption nobody asked for is a failure like any other.
    if !statuses.is_empty() && statuses.iter().all(|s| *s == DoneStatus::Success) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Listeners for the stopping signals, installed at once.
type Listeners = Option<(Signal, Signal, Signal)>;

fn listen() -> Listeners {
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(interrupt), Ok(terminate), Ok(hangup)) => Some((interrupt, terminate, hangup)),
        _ => {
            tracing::warn!("cannot listen for signals; Ctrl-C will not stop the run cleanly");
            None
        }
    }
}

/// The first stopping signal aborts (`abort`, with the drain); a second
/// one stops every run of the process at once.
async fn stop_on_signals(
    listeners: Listeners,
    abort: CancellationToken,
    stopped: Arc<OnceLock<Stopped>>,
) {
    let Some((mut interrupt, mut terminate, mut hangup)) = listeners else {
        return;
    };
    let mut next = async || {
        tokio::select! {
            _ = interrupt.recv() => Stopped::Interrupt,
            _ = terminate.recv() => Stopped::Terminate,
            _ = hangup.recv() => Stopped::Hangup,
        }
    };
    let first = next().await;
    let _ = stopped.set(first);
    tracing::info!("interrupting ({first:?}; again to stop at once)");
    abort.cancel();
    next().await;
    tracing::info!("stopping every run now");
    moat_sandbox::stop_all_runs();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_is_the_hosts_view_not_the_adapters() {
        let code = |statuses: &[DoneStatus], stopped| format!("{:?}", exit_code(statuses, stopped));
        assert_eq!(
            code(&[DoneStatus::Success], None),
            format!("{:?}", ExitCode::SUCCESS)
        );
        // The user stopped it: their signal's code, whatever the adapter said.
        assert_eq!(
            code(&[DoneStatus::Success], Some(Stopped::Interrupt)),
            format!("{:?}", ExitCode::from(130))
        );
        assert_eq!(
            code(&[DoneStatus::Interrupted], Some(Stopped::Terminate)),
            format!("{:?}", ExitCode::from(143))
        );
        // Interrupted without anyone asking: a failure.
        assert_eq!(
            code(&[DoneStatus::Interrupted], None),
            format!("{:?}", ExitCode::FAILURE)
        );
        assert_eq!(code(&[], None), format!("{:?}", ExitCode::FAILURE));
    }
}
