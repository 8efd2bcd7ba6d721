//! One run of an LLM adapter: `init`, then turns of a request and its
//! streamed answer, then the end. The phases, the interruption checks and
//! the failures are the same for every vendor; the vendor's [`Translate`]
//! reads the stream and its [`Conversation`] shapes the messages.
//!
//! With MCP servers ([`Toolbox`]) the run is an agent: when an answer asks
//! for tools the run's servers offer, the session calls them, reports each
//! call's `tool_result`, sends the results back and reads the next answer,
//! until an answer asks for no tool, or the run's turns (model calls) are
//! used up. A call of a tool the run puts under `ask` (`--ask-tools`) is
//! asked about first (`moat_guest::approvals::request`): denied, it is not
//! made, its `tool_result` is `denied` and the model is told why. Without
//! MCP servers a run is one model call whose tool calls, if any, are the
//! caller's to run.

use std::collections::VecDeque;
use std::time::Instant;

use moat_guest::approvals::{self, Approval};
use moat_guest::http::{self, Request, Response};
use moat_guest::json::Value;
use moat_guest::sse::{ReadError, SseParser, SseReader};
use moat_guest::{DoneEvent, DoneStatus, Event, EventKind, InitEvent, Options, ToolStatus};

use crate::config::Config;
use crate::conversation::{Conversation, ToolOutput};
use crate::failure::{cut, header, status_failure, transport_failure};
use crate::mcp::{CallOutcome, MCP_ERROR};
use crate::stream::{MALFORMED_EVENT, STREAM_CUT};
use crate::tally::Tally;

/// The event a model call's usage is reported by (moat_launch's
/// `USAGE_EVENT`: the host keeps budgets by it).
const USAGE_EVENT: &str = "moat:usage";
use crate::toolbox::Toolbox;

/// Most bytes of an error response read to quote its message.
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// Most bytes of a whole (non-streamed) answer.
const MAX_WHOLE_BODY: u64 = 16 * 1024 * 1024;
/// Model calls a run with tools makes when `options.max-turns` does not
/// say: a loop that never reaches an answer ends here rather than at the
/// run's timeout, having spent less.
pub const DEFAULT_MAX_TURNS: u32 = 50;
/// The code of a tool call refused because the run's policy withholds the
/// tool.
pub const TOOL_DENIED: &str = "TOOL_DENIED";
/// The code of a tool call for a tool the model was never offered.
pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";

type ChunkReader = Box<dyn FnMut() -> Result<Option<Vec<u8>>, http::Error>>;

/// Where a run is.
enum Phase {
    /// The request is to be sent (after the pending events).
    Requesting,
    /// Reading the streamed answer.
    Streaming(SseReader<ChunkReader>),
    /// Making the answer's tool calls, one per step, before the next
    /// request.
    Calling {
        calls: VecDeque<Call>,
        outputs: Vec<ToolOutput>,
        reply: Value,
    },
    /// `done` was produced; nothing follows.
    Over,
}

/// A tool call the model asked for in the current answer.
#[derive(Debug, Clone)]
enum Call {
    /// An offered tool: made.
    Make {
        id: String,
        name: String,
        input: Value,
    },
    /// Refused (already reported): the model is told why.
    Refuse {
        id: String,
        name: String,
        why: String,
    },
}

/// What the current answer asked for.
#[derive(Debug, Default)]
struct Turn {
    calls: Vec<Call>,
    /// A call for one of the caller's own tools (`options.extra.tools`):
    /// the run ends there, the caller makes it.
    callers: bool,
    /// The answer's `done`, held back until the answer is over.
    done: Option<DoneEvent>,
}

/// One run: what the adapter's `next` returns, event by event.
pub struct Session<T> {
    config: Config,
    build: fn(&Config) -> Request,
    phase: Phase,
    translator: T,
    pending: VecDeque<Event>,
    toolbox: Option<Toolbox>,
    max_turns: u32,
    turn: Turn,
    tally: Tally,
    /// The session id of the first answer, kept for the whole run.
    session_id: Option<String>,
    /// The tools whose every call is asked about first (`--ask-tools`).
    ask_tools: Vec<String>,
}

impl<T: Conversation> Session<T> {
    /// A run of `config`, each request made by `build`; the tools of
    /// `toolbox` (when the run has MCP servers) are offered to the model
    /// next to the caller's. Its `init` names the model, `options.cwd` and
    /// every tool offered. Warns (in the host's log) when the key would
    /// travel in clear, since the user may not know the base URL is plain
    /// `http://`.
    pub fn new(
        mut config: Config,
        build: fn(&Config) -> Request,
        options: &Options,
        toolbox: Option<Toolbox>,
    ) -> Self {
        if config.endpoint.key_in_clear() {
            moat_guest::log::warn(&format!(
                "{} is sent unencrypted to {} (plain http://, not loopback)",
                config.endpoint.vendor.key_var, config.endpoint.grant
            ));
        }
        let mut tools = config.tools.clone();
        if let Some(toolbox) = &toolbox {
            let entries: Vec<Value> = toolbox
                .offered()
                .map(|(name, tool)| T::tool_entry(&name, tool))
                .collect();
            tools.extend(toolbox.offered().map(|(name, _)| name));
            if !entries.is_empty()
                && let Value::Object(body) = &mut config.body
            {
                match body.get_mut("tools") {
                    Some(Value::Array(existing)) => existing.extend(entries),
                    _ => {
                        body.insert("tools".into(), Value::Array(entries));
                    }
                }
            }
        }
        let init = InitEvent::new(Some(&config.model), options.cwd.as_deref(), tools);
        Session {
            config,
            build,
            phase: Phase::Requesting,
            translator: T::default(),
            pending: VecDeque::from([init.into()]),
            toolbox,
            max_turns: options.max_turns.unwrap_or(DEFAULT_MAX_TURNS).max(1),
            turn: Turn::default(),
            tally: Tally::default(),
            session_id: None,
            ask_tools: approvals::ask_tools(),
        }
    }

    /// Whether [`next_event`](Self::next_event) returns at once: an event
    /// is queued (the events of every SSE event already read are).
    pub fn ready(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The run's next event; `None` once `done` was returned.
    pub fn next_event(&mut self) -> Option<Event> {
        'pull: loop {
            if matches!(self.phase, Phase::Over) && self.pending.is_empty() {
                return None;
            }
            if moat_guest::interrupted() && !matches!(self.phase, Phase::Over) {
                // Dropping the reader drops the response: the request ends;
                // a tool call under way was given up by the MCP client.
                let in_flight = matches!(self.phase, Phase::Requesting | Phase::Streaming(_));
                self.phase = Phase::Over;
                self.pending.clear();
                let mut done = match self.translator.interrupted().kind {
                    EventKind::Done(done) => done,
                    _ => DoneEvent::new(DoneStatus::Interrupted),
                };
                if in_flight {
                    self.tally.unanswered(&done);
                }
                done.status = DoneStatus::Interrupted;
                done.result = None;
                return Some(self.finish(done));
            }
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            match std::mem::replace(&mut self.phase, Phase::Over) {
                Phase::Requesting => match self.send() {
                    Some(phase) => self.phase = phase,
                    // Aborted while waiting for the server: the loop's
                    // interruption check ends the run.
                    None => self.phase = Phase::Requesting,
                },
                // Every SSE event already read is translated at once, so
                // its events are queued (`ready`) rather than held in the
                // reader while the next read waits for the server.
                Phase::Streaming(mut reader) => loop {
                    let events = match reader.next() {
                        Some(Ok(event)) => self.translator.on_event(&event),
                        Some(Err(ReadError::Sse(error))) => vec![Event::error(
                            MALFORMED_EVENT,
                            format!("the server sent an event moat cannot take: {error}"),
                            true,
                        )],
                        Some(Err(ReadError::Http(http::Error::Interrupted))) => {
                            self.phase = Phase::Streaming(reader);
                            continue 'pull;
                        }
                        Some(Err(ReadError::Http(error))) => {
                            let mut failure = transport_failure(&self.config.endpoint, &error);
                            failure.error.code = Some(STREAM_CUT.into());
                            failure.error.message = format!(
                                "the response broke off mid-stream: {}",
                                failure.error.message
                            );
                            self.translator.fail(&failure)
                        }
                        None => self.translator.end_of_body(),
                    };
                    self.take(events);
                    if self.translator.ended() {
                        self.phase = self.end_of_answer();
                        break;
                    }
                    if !reader.has_ready() {
                        self.phase = Phase::Streaming(reader);
                        break;
                    }
                },
                Phase::Calling {
                    mut calls,
                    mut outputs,
                    reply,
                } => match calls.pop_front() {
                    Some(call) => {
                        outputs.extend(self.make(call));
                        self.phase = Phase::Calling {
                            calls,
                            outputs,
                            reply,
                        };
                    }
                    None => self.next_request(reply, &outputs),
                },
                Phase::Over => {}
            }
        }
    }

    /// Queues the events of the answer, noting its tool calls and holding
    /// back its `done`; with tools of its own, the session refuses (with
    /// an error event, in place of the `tool_use`) a call for a tool it
    /// did not offer.
    fn take(&mut self, events: Vec<Event>) {
        for event in events {
            if self.session_id.is_none() {
                self.session_id = event.session_id.clone();
            }
            let event = match &self.session_id {
                Some(id) => event.with_session(id.as_str()),
                None => event,
            };
            match event.kind {
                EventKind::Done(done) => self.turn.done = Some(done),
                EventKind::ToolUse(call) => {
                    let id = call.tool_use_id.clone();
                    let name = call.tool_name.clone();
                    let refusal = match &self.toolbox {
                        Some(toolbox) if !toolbox.offers(&name) => {
                            if self.config.tools.contains(&name) {
                                self.turn.callers = true;
                                None
                            } else if toolbox.withholds(&name) {
                                Some((
                                    TOOL_DENIED,
                                    format!(
                                        "the tool {name} is not allowed in this run (its tool policy withholds it)"
                                    ),
                                ))
                            } else {
                                Some((
                                    UNKNOWN_TOOL,
                                    format!(
                                        "the model asked for a tool it was not offered: {}",
                                        cut(&name, 200)
                                    ),
                                ))
                            }
                        }
                        _ => None,
                    };
                    match refusal {
                        Some((code, why)) => {
                            let error = Event::error(code, format!("{why}; not called"), true);
                            self.pending.push_back(match &self.session_id {
                                Some(id) => error.with_session(id.as_str()),
                                None => error,
                            });
                            self.turn.calls.push(Call::Refuse { id, name, why });
                        }
                        None => {
                            let input = moat_guest::serde_json::from_str(&call.input)
                                .unwrap_or(Value::Null);
                            self.turn.calls.push(Call::Make { id, name, input });
                            self.pending.push_back(Event {
                                session_id: event.session_id,
                                kind: EventKind::ToolUse(call),
                            });
                        }
                    }
                }
                kind => self.pending.push_back(Event {
                    session_id: event.session_id,
                    kind,
                }),
            }
        }
    }

    /// The answer is over: its tool calls are made when the run has tools
    /// for all of them and turns left; otherwise the run ends with its
    /// `done`.
    fn end_of_answer(&mut self) -> Phase {
        let turn = std::mem::take(&mut self.turn);
        let Some(done) = turn.done else {
            // A translator ends its answer with a `done`; should one not,
            // the run still ends with exactly one.
            self.queue(Event::error(
                MALFORMED_EVENT,
                "the answer ended without an outcome",
                false,
            ));
            let done = self.finish(DoneEvent::new(DoneStatus::Error));
            self.pending.push_back(done);
            return Phase::Over;
        };
        self.tally.add(&done);
        self.report_usage(&done);
        let wants_tools = done.status == DoneStatus::Success
            && self.toolbox.is_some()
            && !turn.calls.is_empty()
            && !turn.callers;
        if !wants_tools {
            let done = self.finish(done);
            self.pending.push_back(done);
            return Phase::Over;
        }
        if self.tally.turns >= self.max_turns {
            let done = DoneEvent {
                status: DoneStatus::MaxTurns,
                result: None,
                ..done
            };
            let done = self.finish(done);
            self.pending.push_back(done);
            return Phase::Over;
        }
        Phase::Calling {
            calls: turn.calls.into(),
            outputs: Vec::new(),
            reply: self.translator.take_reply(),
        }
    }

    /// Makes one call (or refuses it): its `tool_result` is queued, and
    /// what goes back to the model returned. `None` when the run was
    /// interrupted during the call.
    fn make(&mut self, call: Call) -> Option<ToolOutput> {
        let (id, name, input) = match call {
            Call::Refuse { id, name, why } => {
                return Some(ToolOutput {
                    id,
                    name,
                    text: why,
                    is_error: true,
                });
            }
            Call::Make { id, name, input } => (id, name, input),
        };
        if self.ask_tools.contains(&name) {
            match approvals::request(&name, &id, &input, None) {
                Approval::Allow => {}
                Approval::Deny(why) => return Some(self.denied(id, name, why)),
                Approval::Interrupted => return None,
            }
        }
        let toolbox = self.toolbox.as_mut()?;
        let started = Instant::now();
        let (text, is_error) = match toolbox.call(&name, &input) {
            Ok(CallOutcome::Answered { text, is_error }) => (text, is_error),
            Ok(CallOutcome::Interrupted) => return None,
            Err(failure) => {
                self.queue(Event::error(
                    failure.code.as_deref().unwrap_or(MCP_ERROR),
                    failure.message.as_str(),
                    true,
                ));
                (failure.message, true)
            }
        };
        let status = if is_error {
            ToolStatus::Error
        } else {
            ToolStatus::Success
        };
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.queue(
            moat_guest::ToolResultEvent::new(
                id.as_str(),
                name.as_str(),
                status,
                &Value::String(text.clone()),
            )
            .with_duration_ms(elapsed)
            .into(),
        );
        Some(ToolOutput {
            id,
            name,
            text,
            is_error,
        })
    }

    /// A call the run's user denied: its `tool_result` (status `denied`,
    /// the reason its output) is queued, and the model is told.
    fn denied(&mut self, id: String, name: String, why: String) -> ToolOutput {
        let text = format!("the user denied this call: {why}");
        self.queue(
            moat_guest::ToolResultEvent::new(
                id.as_str(),
                name.as_str(),
                ToolStatus::Denied,
                &Value::String(text.clone()),
            )
            .into(),
        );
        ToolOutput {
            id,
            name,
            text,
            is_error: true,
        }
    }

    /// The answer and its tools' outputs go into the conversation, and the
    /// next answer is asked for.
    fn next_request(&mut self, reply: Value, outputs: &[ToolOutput]) {
        if let Some(Value::Array(messages)) = self.config.body.get_mut("messages") {
            T::append_turn(messages, reply, outputs);
        }
        self.translator = T::default();
        self.phase = Phase::Requesting;
    }

    /// `done` as the run's last event: the usage of every model call. The
    /// MCP servers are told to end first (a guest's values are not dropped
    /// when the host discards the instance, so it happens here).
    fn finish(&mut self, done: DoneEvent) -> Event {
        self.toolbox = None;
        self.tag(self.tally.apply(done).into())
    }

    /// Tells the host what this model call used, as it happens (the
    /// `moat:usage` event): a budget is kept by the call, not only at the
    /// end. A call that reported nothing is not reported.
    fn report_usage(&mut self, done: &DoneEvent) {
        let Some(tokens) = &done.usage.tokens else {
            return;
        };
        let mut usage = moat_guest::json::json!({
            "inputTokens": tokens.input.total,
            "outputTokens": tokens.output.total,
        });
        if let Some(cost) = &done.usage.cost {
            usage["costUsd"] = moat_guest::json::json!(cost.usd);
        }
        self.queue(Event::extension(USAGE_EVENT, &usage));
    }

    fn queue(&mut self, event: Event) {
        let event = self.tag(event);
        self.pending.push_back(event);
    }

    fn tag(&self, event: Event) -> Event {
        match &self.session_id {
            Some(id) => event.with_session(id.as_str()),
            None => event,
        }
    }

    /// Sends the request: the phase that follows, or `None` when the run
    /// was interrupted before the answer came.
    fn send(&mut self) -> Option<Phase> {
        let request = (self.build)(&self.config);
        let events = match http::send(&request) {
            Ok(response)
                if response.status == 200
                    && self.translator.takes_whole_answers()
                    && is_json(&response) =>
            {
                match response.read_to_end(MAX_WHOLE_BODY) {
                    Ok(body) => self.translator.on_complete(&body),
                    Err(http::Error::Interrupted) => return None,
                    Err(error) => {
                        let failure = transport_failure(&self.config.endpoint, &error);
                        self.translator.fail(&failure)
                    }
                }
            }
            Ok(response) if response.status == 200 => {
                return Some(Phase::Streaming(reader(response)));
            }
            Ok(response) => {
                let status = response.status;
                let headers = response.headers.clone();
                // The body only serves to quote the server's message: a
                // failure to read it leaves it out.
                let body = response.read_to_end(MAX_ERROR_BODY).unwrap_or_default();
                let failure = status_failure(
                    &self.config.endpoint,
                    &self.config.model,
                    status,
                    &headers,
                    &body,
                );
                self.translator.fail(&failure)
            }
            Err(http::Error::Interrupted) => return None,
            Err(error) => {
                let failure = transport_failure(&self.config.endpoint, &error);
                self.translator.fail(&failure)
            }
        };
        self.take(events);
        Some(self.end_of_answer())
    }
}

/// Whether a successful response is one JSON answer rather than a stream
/// (a server that ignored `stream: true`).
fn is_json(response: &Response) -> bool {
    header(&response.headers, "content-type")
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("application/json"))
}

fn reader(mut response: Response) -> SseReader<ChunkReader> {
    let read: ChunkReader = Box::new(move || response.read_chunk());
    SseReader::new(SseParser::new(), read)
}
