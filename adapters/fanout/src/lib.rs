//! The `fanout` adapter: one prompt to several sub-agents at once, each a
//! child run of this one (the contract's nested runs), their answers merged
//! into one.
//!
//! ```sh
//! moat serve    # nested runs are the runs of `moat serve`
//! {"id":1,"op":"run","adapter":"fanout","prompt":"Review this diff",
//!  "options":{"extra":{"agents":[{"adapter":"claude-code"},{"adapter":"codex"}]}}}
//! ```
//!
//! `options.extra.agents` lists the sub-agents: each an `adapter`, and
//! optionally its own `prompt` (else the run's), `options` and `grants`
//! (within this run's own: a child never has more than its parent). Every
//! event of every child is surfaced as a `moat:child_event` extension event
//! (the child's run id and the event) as it comes; when all have ended, the
//! answer is each child's final text under a heading naming it, `done`
//! success when at least one child succeeded. Aborting the run cancels the
//! children (they end with their parent anyway).

use std::collections::VecDeque;
use std::time::Duration;

use moat_guest::json::{Value, json};
use moat_guest::runs::{self, ChildRequest, ChildRun, RunError};
use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options, Usage};

/// How long one child is waited on before the next one gets a turn.
const TURN: Duration = Duration::from_millis(20);

/// Most sub-agents one run fans out to.
const MAX_AGENTS: usize = 16;

/// One sub-agent being followed.
struct Agent {
    adapter: String,
    child: ChildRun,
    /// Its result, once it has ended.
    result: Option<Value>,
}

/// One fan-out run.
pub struct Fanout {
    agents: Vec<Agent>,
    pending: VecDeque<Event>,
    /// The next agent to be given a turn.
    next: usize,
    over: bool,
}

impl Adapter for Fanout {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "fanout",
            env!("CARGO_PKG_VERSION"),
            "Fans a prompt out to sub-agents (options.extra.agents) as nested runs and merges their answers",
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let extra = options.extra_object()?;
        let invalid = |message: &str| ErrorInfo::new("INVALID_OPTIONS", message, false);
        let Some(Value::Array(listed)) = extra.get("agents") else {
            return Err(invalid(
                r#"options.extra.agents lists the sub-agents, e.g. [{"adapter": "echo"}, {"adapter": "claude-code", "prompt": "…"}]"#,
            ));
        };
        if listed.is_empty() || listed.len() > MAX_AGENTS {
            return Err(invalid(&format!(
                "options.extra.agents lists 1 to {MAX_AGENTS} sub-agents"
            )));
        }
        let mut agents = Vec::with_capacity(listed.len());
        for (n, agent) in listed.iter().enumerate() {
            let Some(adapter) = agent["adapter"].as_str() else {
                return Err(invalid(&format!(
                    "options.extra.agents[{n}] names no adapter"
                )));
            };
            let mut request = ChildRequest::new(
                adapter,
                agent["prompt"].as_str().unwrap_or(&prompt).to_owned(),
            );
            if let Some(options) = agent.get("options") {
                request = request.with_options(options.clone());
            }
            if let Some(grants) = agent.get("grants") {
                request = request.with_grants(grants.clone());
            }
            let child = runs::start(&request).map_err(|error| refusal(adapter, &error))?;
            agents.push(Agent {
                adapter: adapter.to_owned(),
                child,
                result: None,
            });
        }
        let init = Event::init(None, options.cwd.as_deref(), Vec::new())
            .with_session(format!("fanout-{}", agents[0].child.id()));
        let started = Event::extension(
            "moat:fanout_started",
            &json!({
                "children": agents.iter().map(|a| json!({"adapter": a.adapter, "run": a.child.id()})).collect::<Vec<_>>(),
            }),
        );
        Ok(Fanout {
            agents,
            pending: VecDeque::from([init, started]),
            next: 0,
            over: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.over {
                return None;
            }
            if moat_guest::interrupted() {
                return Some(self.interrupted());
            }
            if self.agents.iter().all(|a| a.result.is_some()) {
                return Some(self.merged());
            }
            self.turn();
        }
    }
}

impl Fanout {
    /// Gives the next agent that has not ended a turn: its next event, if
    /// one comes within [`TURN`], surfaced; its result, once it has ended.
    fn turn(&mut self) {
        let count = self.agents.len();
        for _ in 0..count {
            let n = self.next;
            self.next = (self.next + 1) % count;
            let agent = &mut self.agents[n];
            if agent.result.is_some() {
                continue;
            }
            match agent.child.next_event(Some(TURN)) {
                Ok(Some(event)) => {
                    self.pending
                        .push_back(runs::surfaced(&agent.child.id(), &event));
                }
                Ok(None) => {
                    agent.result = Some(agent.child.wait(None).unwrap_or_else(
                        |error| json!({"status": "error", "error": {"message": error.to_string()}}),
                    ));
                }
                Err(RunError::TimedOut) => {}
                Err(RunError::Interrupted) => {
                    let done = self.interrupted();
                    self.pending.push_back(done);
                }
                Err(error) => {
                    agent.result =
                        Some(json!({"status": "error", "error": {"message": error.to_string()}}));
                }
            }
            return;
        }
    }

    /// Every child's answer under a heading naming it; success when at
    /// least one child succeeded.
    fn merged(&mut self) -> Event {
        self.over = true;
        let mut answer = String::new();
        let mut succeeded = 0;
        for (n, agent) in self.agents.iter().enumerate() {
            let result = agent.result.as_ref().expect("every agent ended");
            let status = result["status"].as_str().unwrap_or("error");
            if status == "success" {
                succeeded += 1;
            }
            let body = match result["text"].as_str() {
                Some(text) if status == "success" => text.to_owned(),
                Some(text) => format!("({status}) {text}"),
                None => format!(
                    "({status}) {}",
                    result["error"]["message"].as_str().unwrap_or("no answer")
                ),
            };
            if !answer.is_empty() {
                answer.push_str("\n\n");
            }
            answer.push_str(&format!("## {}. {}\n{body}", n + 1, agent.adapter));
        }
        let status = if succeeded > 0 {
            DoneStatus::Success
        } else {
            DoneStatus::Error
        };
        self.pending.push_back(
            DoneEvent::new(status)
                .with_result(answer.as_str())
                .with_usage(Usage::new(0))
                .into(),
        );
        Event::text(answer)
    }

    /// Cancels every child; `done` interrupted.
    fn interrupted(&mut self) -> Event {
        self.over = true;
        self.pending.clear();
        for agent in &self.agents {
            agent.child.cancel();
        }
        Event::done(DoneStatus::Interrupted)
    }
}

/// A child that could not start refuses the run, saying which and why.
fn refusal(adapter: &str, error: &RunError) -> ErrorInfo {
    let code = match error {
        RunError::Denied(_) => "CHILD_DENIED",
        RunError::NotFound(_) => "CHILD_NOT_FOUND",
        RunError::LimitReached(_) => "CHILD_LIMIT",
        _ => "CHILD_FAILED",
    };
    ErrorInfo::new(
        code,
        format!("the sub-agent {adapter} could not start: {error}"),
        false,
    )
}

moat_guest::export_adapter!(Fanout);
