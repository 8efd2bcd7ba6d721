//! The terminal's answer to a run's request (`moat run --ask` in pretty
//! output, stdin a terminal), as Deno asks: the request's line, then
//! `Allow? [y]es / [n]o / [a]lways`, answered by a line typed on the
//! terminal. The answer goes through the run store like `moat approve`'s,
//! so another process may answer first: the prompt then goes away.

use std::sync::Arc;

use moat_engine::{AgentEvent, EventPayload};
use moat_runs::{Answer, RunId, Runs};
use tokio::sync::mpsc;

/// What the terminal is asked.
pub const QUESTION: &str = "  Allow? [y]es / [n]o / [a]lways > ";

/// What it is asked after a line that is none of the answers.
const AGAIN: &str = "  Answer y (yes), n (no) or a (always) > ";

/// Asks the terminal about one run's requests.
pub struct TerminalPrompt {
    runs: Arc<dyn Runs>,
    run: RunId,
    /// Lines typed on the terminal, read by a thread of their own from
    /// the first request on (a read of stdin cannot be given up).
    lines: Option<mpsc::UnboundedReceiver<String>>,
    /// The request the terminal is asked about.
    open: Option<u32>,
}

/// What the renderer shows of the prompt.
pub enum Shown {
    /// The question, on the line it is answered on.
    Ask(&'static str),
    /// The line was answered (typed): the cursor is on a new line.
    Answered,
}

impl TerminalPrompt {
    /// A prompt for the requests of run `run`, answered in `runs`.
    pub fn new(runs: Arc<dyn Runs>, run: RunId) -> Self {
        Self {
            runs,
            run,
            lines: None,
            open: None,
        }
    }

    /// After `event` is shown: the question, when it opens a request.
    pub fn seen(&mut self, event: &AgentEvent) -> Option<Shown> {
        match &event.payload {
            EventPayload::PermissionRequest(request) => {
                let number = request.request_id.as_deref()?.parse().ok()?;
                self.open = Some(number);
                self.lines.get_or_insert_with(read_lines);
                Some(Shown::Ask(QUESTION))
            }
            EventPayload::Extension(answer) if answer.name == moat_launch::ANSWER_EVENT => {
                let number: Option<u32> = answer.payload["requestId"]
                    .as_str()
                    .and_then(|n| n.parse().ok());
                if number.is_some() && number == self.open {
                    self.open = None;
                }
                None
            }
            _ => None,
        }
    }

    /// The next line typed while a request is open; pending otherwise.
    pub async fn line(&mut self) -> String {
        match (&mut self.lines, self.open) {
            (Some(lines), Some(_)) => match lines.recv().await {
                Some(line) => line,
                None => std::future::pending().await,
            },
            _ => std::future::pending().await,
        }
    }

    /// Answers the open request as `line` says: what to show then.
    pub async fn answer(&mut self, line: &str) -> Shown {
        let Some(number) = self.open else {
            return Shown::Answered;
        };
        let by = format!("the terminal of moat run (pid {})", std::process::id());
        let answer = match line.trim() {
            "y" | "Y" | "yes" => Answer::approve(by, false),
            "a" | "A" | "always" => Answer::approve(by, true),
            "n" | "N" | "no" => Answer::deny(by, None),
            _ => return Shown::Ask(AGAIN),
        };
        self.open = None;
        if let Err(error) = self.runs.answer(&self.run, Some(number), answer).await {
            // Answered elsewhere first, or the run ended: its own events
            // say what happened.
            tracing::debug!("the terminal's answer was not taken: {error}");
        }
        Shown::Answered
    }
}

/// Lines of stdin, read on a thread of their own until it ends.
fn read_lines() -> mpsc::UnboundedReceiver<String> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while matches!(std::io::stdin().read_line(&mut line), Ok(n) if n > 0) {
            if sender.send(std::mem::take(&mut line)).is_err() {
                return;
            }
        }
    });
    receiver
}
