//! Testing adapter that honours interruption: emits a `text_delta` "." and
//! sleeps 5 ms, over and over. When `interrupted()` turns true it flushes
//! one `text_delta` "flushed", then ends with `done` interrupted carrying
//! the resume token `coop-resume-token`. After 10,000 dots it ends with
//! `done` success. Every event carries the session id `coop-session`.

use std::time::Duration;

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

const SESSION_ID: &str = "coop-session";
const RESUME_TOKEN: &str = "coop-resume-token";
const ITERATIONS: u32 = 10_000;
const PAUSE: Duration = Duration::from_millis(5);

/// Where the run is.
enum State {
    Running { dots: u32 },
    Flushed,
    Done,
}

/// A run that stops cleanly when asked.
pub struct Cooperative {
    state: State,
}

impl Adapter for Cooperative {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "cooperative",
            env!("CARGO_PKG_VERSION"),
            "Stops cleanly when interrupted",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        Ok(Cooperative {
            state: State::Running { dots: 0 },
        })
    }

    fn next(&mut self) -> Option<Event> {
        let event = match self.state {
            State::Done => return None,
            State::Flushed => {
                self.state = State::Done;
                DoneEvent::new(DoneStatus::Interrupted)
                    .with_resume_token(RESUME_TOKEN)
                    .into()
            }
            State::Running { dots } => {
                if dots > 0 {
                    // The pause after the previous dot.
                    std::thread::sleep(PAUSE);
                }
                if moat_guest::interrupted() {
                    self.state = State::Flushed;
                    Event::text_delta("flushed")
                } else if dots == ITERATIONS {
                    self.state = State::Done;
                    Event::done(DoneStatus::Success)
                } else {
                    self.state = State::Running { dots: dots + 1 };
                    Event::text_delta(".")
                }
            }
        };
        Some(event.with_session(SESSION_ID))
    }
}

moat_guest::export_adapter!(Cooperative);
