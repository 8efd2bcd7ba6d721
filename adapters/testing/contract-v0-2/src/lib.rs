//! A component built against contract `moat:adapter@0.2.0` directly from
//! its WIT (`wit/v0.2.0`), without the guest SDK (which builds against the
//! newest version): the host must keep running it through its 0.2.0
//! module, and refuse there the options 0.2.0 cannot carry. It answers
//! every prompt with one text naming its contract, then `done`; a prompt
//! `run PROGRAM ARGS…` with the program's output instead, a text a line,
//! spawned through 0.2.0's `process` import. Every run logs and reads its
//! abort flag through 0.2.0's `host` import, so both stay tested.

use std::cell::RefCell;

wit_bindgen::generate!({
    path: "../../../wit/v0.2.0",
    world: "adapter-world",
});

use exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use moat::adapter::host::{self, LogLevel};
use moat::adapter::process::{self, ProcessError, SpawnRequest, StdinMode};
use moat::adapter::types::{
    AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, Needs, Options, Usage,
};

struct V02;

struct Run {
    events: RefCell<Vec<Event>>,
}

impl Guest for V02 {
    type Session = Run;

    fn info() -> AdapterInfo {
        AdapterInfo {
            name: "contract-v0-2".into(),
            version: "0.0.0".into(),
            description: "Built against moat:adapter@0.2.0".into(),
            needs: Needs {
                hosts: Vec::new(),
                env: Vec::new(),
                programs: Vec::new(),
            },
            tool_patterns: false,
        }
    }

    fn run(prompt: String, _options: Options) -> Result<Session, ErrorInfo> {
        host::log(LogLevel::Debug, &format!("0.2.0 run: {prompt}"));
        let texts = match prompt.strip_prefix("run ") {
            Some(command) => output_of(command),
            None => vec![prompt.clone()],
        };
        let event = |kind| Event {
            session_id: None,
            kind,
        };
        let done = DoneEvent {
            status: if host::interrupted() {
                DoneStatus::Interrupted
            } else {
                DoneStatus::Success
            },
            result: Some(format!("0.2.0: {prompt}")),
            resume_token: None,
            usage: Usage {
                tool_uses: 0,
                tokens: None,
                cost: None,
            },
            duration_ms: None,
            metadata: None,
        };
        // Popped from the end.
        let mut events = vec![event(EventKind::Done(done))];
        for text in texts.iter().rev() {
            events.push(event(EventKind::Text(format!("0.2.0: {text}"))));
        }
        Ok(Session::new(Run {
            events: RefCell::new(events),
        }))
    }
}

impl GuestSession for Run {
    fn next(&self) -> Option<Event> {
        self.events.borrow_mut().pop()
    }
}

/// The standard output lines of `command` (a program and its arguments),
/// or why it could not start.
fn output_of(command: &str) -> Vec<String> {
    let mut words = command.split_whitespace().map(str::to_string);
    let request = SpawnRequest {
        program: words.next().unwrap_or_default(),
        args: words.collect(),
        env: Vec::new(),
        cwd: None,
        stdin: StdinMode::Closed,
    };
    let child = match process::spawn(&request) {
        Ok(child) => child,
        Err(ProcessError::Denied(message)) => return vec![format!("denied: {message}")],
        Err(error) => return vec![format!("failed: {error:?}")],
    };
    let mut lines = Vec::new();
    while let Ok(Some(line)) = child.read_line(None) {
        lines.push(line);
    }
    let _ = child.wait(None);
    lines
}

export!(V02);
