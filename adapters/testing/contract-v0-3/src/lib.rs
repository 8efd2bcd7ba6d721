//! A component built against contract `moat:adapter@0.3.0` directly from
//! its WIT (`wit/v0.3.0`), without the guest SDK (which builds against the
//! newest version): the host must keep running it, serving its imports
//! with the newest version's host side under 0.3.0's names. It answers
//! every prompt with one text naming its contract, then `done`; a prompt
//! `run PROGRAM ARGS…` with the program's output instead, a text a line
//! (0.3.0's `process` import); a prompt `child ADAPTER PROMPT` with the
//! result of a child run of ADAPTER (0.3.0's `runs` import). Every run
//! logs and reads its abort flag through 0.3.0's `host` import, and hands
//! its events over in batches.

use std::cell::RefCell;

wit_bindgen::generate!({
    path: "../../../wit/v0.3.0",
    world: "adapter-world",
});

use exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use moat::adapter::host::{self, LogLevel};
use moat::adapter::process::{self, ProcessError, SpawnRequest, StdinMode};
use moat::adapter::runs::{self, ChildRequest};
use moat::adapter::types::{
    AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, Needs, Options, Usage,
};

struct V03;

struct Run {
    /// The events not yet pulled, in order.
    events: RefCell<std::collections::VecDeque<Event>>,
}

impl Guest for V03 {
    type Session = Run;

    fn info() -> AdapterInfo {
        AdapterInfo {
            name: "contract-v0-3".into(),
            version: "0.0.0".into(),
            description: "Built against moat:adapter@0.3.0".into(),
            needs: Needs {
                hosts: Vec::new(),
                env: Vec::new(),
                programs: Vec::new(),
            },
            tool_patterns: false,
        }
    }

    fn run(prompt: String, _options: Options) -> Result<Session, ErrorInfo> {
        host::log(LogLevel::Debug, &format!("0.3.0 run: {prompt}"));
        let texts = if let Some(command) = prompt.strip_prefix("run ") {
            output_of(command)
        } else if let Some(child) = prompt.strip_prefix("child ") {
            vec![result_of(child)]
        } else {
            vec![prompt.clone()]
        };
        let event = |kind| Event {
            session_id: None,
            kind,
        };
        let mut events: Vec<Event> = texts
            .iter()
            .map(|text| event(EventKind::Text(format!("0.3.0: {text}"))))
            .collect();
        events.push(event(EventKind::Done(DoneEvent {
            status: if host::interrupted() {
                DoneStatus::Interrupted
            } else {
                DoneStatus::Success
            },
            result: Some(format!("0.3.0: {}", texts.join("\n"))),
            resume_token: None,
            usage: Usage {
                tool_uses: 0,
                tokens: None,
                cost: None,
            },
            duration_ms: None,
            metadata: None,
        })));
        Ok(Session::new(Run {
            events: RefCell::new(events.into()),
        }))
    }
}

impl GuestSession for Run {
    /// As many of the events as the host takes at once.
    fn next_batch(&self, max: u32) -> Vec<Event> {
        let mut events = self.events.borrow_mut();
        let count = events.len().min(max as usize);
        events.drain(..count).collect()
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

/// The result (JSON) of a child run `ADAPTER PROMPT`, or why it failed.
fn result_of(request: &str) -> String {
    let (adapter, prompt) = request.split_once(' ').unwrap_or((request, ""));
    let request = ChildRequest {
        adapter: adapter.into(),
        prompt: prompt.into(),
        options: None,
        grants: None,
        timeout_ms: None,
    };
    match runs::start(&request) {
        Ok(child) => match child.wait(Some(30_000)) {
            Ok(result) => result,
            Err(error) => format!("failed: {error:?}"),
        },
        Err(error) => format!("refused: {error:?}"),
    }
}

export!(V03);
