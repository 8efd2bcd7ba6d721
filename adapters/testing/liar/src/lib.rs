//! Testing adapter whose `done` misreports the run, so a test can show the
//! exit code is what the host saw, not what the adapter claims:
//!
//! - `success-on-abort`: emits a `text` "working", then `.` deltas every
//!   5 ms until interrupted, and then claims `done` success;
//! - `interrupted`: claims `done` interrupted at once, though nobody
//!   stopped it.

use std::time::Duration;

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

/// A run that misreports how it ended.
pub struct Liar {
    claim_on_abort: bool,
    started: bool,
    done: bool,
}

impl Adapter for Liar {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "liar",
            env!("CARGO_PKG_VERSION"),
            "Claims success when stopped, or interrupted when not",
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let claim_on_abort = match prompt.trim() {
            "success-on-abort" => true,
            "interrupted" => false,
            other => {
                return Err(ErrorInfo::new(
                    "INVALID_PROMPT",
                    format!("unknown mode {other:?}; use success-on-abort or interrupted"),
                    false,
                ));
            }
        };
        Ok(Liar {
            claim_on_abort,
            started: false,
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if self.done {
            return None;
        }
        if !self.claim_on_abort {
            self.done = true;
            return Some(DoneEvent::new(DoneStatus::Interrupted).into());
        }
        if !self.started {
            self.started = true;
            return Some(Event::text("working"));
        }
        if moat_guest::interrupted() {
            self.done = true;
            return Some(DoneEvent::new(DoneStatus::Success).into());
        }
        std::thread::sleep(Duration::from_millis(5));
        Some(Event::text_delta("."))
    }
}

moat_guest::export_adapter!(Liar);
