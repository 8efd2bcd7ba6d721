//! One run as an ACP client: `initialize`, `session/new` (or
//! `session/load` to resume), one `session/prompt`, and everything the
//! agent says or asks meanwhile, read one line at a time.
//!
//! The agent is untrusted: a line that is not JSON-RPC, an answer to no
//! request, an update of the wrong shape is skipped with a recoverable
//! error; a wrong answer to the handshake, a protocol version other than
//! 1, the agent exiting or falling silent during the handshake ends the run
//! with an error and `done`. Nothing here waits without a bound but the
//! prompt itself, which the run's own time limit bounds.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use moat_cli_support::{CLI_FAILED, ReadError, clip, stderr_quote};
use moat_guest::approvals::{self, Approval};
use moat_guest::json::{Value, json};
use moat_guest::{DoneEvent, DoneStatus, Event, EventKind, InitEvent};

use crate::files;
use crate::permission::{self, Decision, Policy};
use crate::rpc::{self, AUTH_REQUIRED, Incoming, METHOD_NOT_FOUND, RpcError};
use crate::transport::Transport;
use crate::updates::{Reported, Updates};

/// The ACP protocol version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

/// How long the agent may take to answer `initialize`, `session/new` and
/// `session/load` (an agent CLI starts in seconds; a stuck one must not
/// hold the run until its time limit).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(120);

/// Error code: the agent answered with an error, or spoke another
/// protocol version.
pub const ACP_ERROR: &str = "ACP_ERROR";
/// Error code: a message from the agent was not what ACP says.
pub const INVALID_AGENT_MESSAGE: &str = "INVALID_AGENT_MESSAGE";
/// Error code: the agent made a tool call the run's policy allows only
/// when asked, without asking (the engine's code for a tool outside the
/// policy).
pub const TOOL_POLICY_VIOLATION: &str = "TOOL_POLICY_VIOLATION";
/// Error code: the agent refused to go on (stop reason `refusal`).
pub const AGENT_REFUSED: &str = "AGENT_REFUSED";

/// After `session/load` is answered, how long the agent must be quiet
/// before the prompt is sent: agents (Gemini CLI) may go on replaying the
/// session's history after answering, and what comes before the prompt is
/// history, never the new turn.
pub const REPLAY_QUIET: Duration = Duration::from_millis(500);

/// The longest the replay of a loaded session may take.
pub const REPLAY_MAX: Duration = Duration::from_secs(30);

/// How many skipped lines are reported one by one (an agent that logs to
/// stdout would flood the stream).
const REPORTED_BAD_LINES: u32 = 10;

/// The request the client waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Initialize,
    NewSession,
    LoadSession,
    /// `session/load` answered; the history may still be replayed.
    Replay,
    Prompt,
}

impl Step {
    fn method(self) -> &'static str {
        match self {
            Step::Initialize => "initialize",
            Step::NewSession => "session/new",
            Step::LoadSession | Step::Replay => "session/load",
            Step::Prompt => "session/prompt",
        }
    }
}

/// What the run asks of the agent.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The agent's program, in messages.
    pub agent: String,
    /// The prompt.
    pub prompt: String,
    /// The session's working directory (absolute).
    pub cwd: String,
    /// The ACP session to load, when resuming.
    pub resume: Option<String>,
    /// The run's tool policy.
    pub policy: Policy,
    /// How long each handshake request may wait for its answer
    /// ([`HANDSHAKE_TIMEOUT`]).
    pub handshake_timeout: Duration,
}

/// One run's conversation with the agent.
pub struct Session<T: Transport> {
    transport: T,
    setup: Setup,
    step: Step,
    request_id: u64,
    deadline: Option<Instant>,
    /// The end of the replay, at the latest.
    replay_cap: Option<Instant>,
    session_id: Option<String>,
    can_load: bool,
    capabilities: Value,
    updates: Updates,
    pending: VecDeque<Event>,
    finished: bool,
    bad_lines: u32,
}

impl<T: Transport> Session<T> {
    /// Starts the conversation over `transport`: sends `initialize`.
    pub fn start(transport: T, setup: Setup) -> Self {
        let mut session = Session {
            transport,
            setup,
            step: Step::Initialize,
            request_id: 0,
            deadline: None,
            replay_cap: None,
            session_id: None,
            can_load: false,
            capabilities: Value::Null,
            updates: Updates::default(),
            pending: VecDeque::new(),
            finished: false,
            bad_lines: 0,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": true, "writeTextFile": true},
                "terminal": false,
            },
            "clientInfo": {"name": "moat", "version": env!("CARGO_PKG_VERSION")},
        });
        session.send(Step::Initialize, params);
        session
    }

    /// Whether [`next_event`](Self::next_event) returns at once.
    pub fn ready(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The next event; `None` once `done` was handed out.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            if moat_guest::interrupted() {
                self.interrupt();
                continue;
            }
            let timeout = self
                .deadline
                .map(|deadline| deadline.saturating_duration_since(Instant::now()));
            match self.transport.read_line(timeout) {
                Ok(Some(line)) => self.handle(&line),
                Ok(None) => self.agent_ended(),
                Err(ReadError::Interrupted) => self.interrupt(),
                Err(ReadError::TimedOut) if self.step == Step::Replay => {
                    if self
                        .deadline
                        .is_some_and(|deadline| Instant::now() >= deadline)
                    {
                        self.send_prompt();
                    }
                }
                Err(ReadError::TimedOut) => {
                    if self
                        .deadline
                        .is_some_and(|deadline| Instant::now() >= deadline)
                    {
                        self.fail(
                            CLI_FAILED,
                            format!(
                                "the ACP agent `{}` did not answer {} within {} s",
                                self.setup.agent,
                                self.step.method(),
                                self.setup.handshake_timeout.as_secs()
                            ),
                        );
                    }
                }
                Err(ReadError::LineTooLong(bytes)) => {
                    self.skip(format!("a {bytes} byte line, longer than moat reads"));
                }
                Err(ReadError::Failed(why)) => {
                    self.fail(
                        CLI_FAILED,
                        format!("reading the ACP agent's output failed: {why}"),
                    );
                }
            }
        }
    }

    /// One line from the agent.
    fn handle(&mut self, line: &str) {
        match rpc::parse(line) {
            Err(why) => self.skip(format!("{why}: {:?}", clip(line, 200))),
            Ok(Incoming::Response { id, outcome }) => {
                if id.as_u64() == Some(self.request_id) {
                    self.answered(outcome);
                } else {
                    self.skip(format!("an answer to no request of moat's (id {id})"));
                }
            }
            Ok(Incoming::Request { id, method, params }) => {
                let outcome = self.serve(&method, &params);
                // A write that fails means the agent is gone: reading says
                // how it ended.
                let _ = self.transport.write_line(&rpc::response(&id, outcome));
            }
            Ok(Incoming::Notification { method, params }) => {
                if method == "session/update" {
                    self.update(&params);
                }
                // Any other notification (extensions, `_`-prefixed) asks
                // nothing of the client.
            }
        }
    }

    /// The agent answered the client's request.
    fn answered(&mut self, outcome: Result<Value, RpcError>) {
        match (self.step, outcome) {
            (Step::Initialize, Ok(result)) => self.initialized(&result),
            (Step::NewSession, Ok(result)) => {
                match moat_cli_support::session_id(&result["sessionId"]) {
                    Some(id) => self.session_started(id),
                    None => self.fail(
                        INVALID_AGENT_MESSAGE,
                        "the agent answered session/new without a session id".into(),
                    ),
                }
            }
            (Step::LoadSession, Ok(_)) => {
                self.session_id = self.setup.resume.clone();
                self.step = Step::Replay;
                let now = Instant::now();
                self.replay_cap = Some(now + REPLAY_MAX);
                self.deadline = Some(now + REPLAY_QUIET);
            }
            (Step::Prompt, Ok(result)) => self.prompt_ended(&result),
            // Its id was answered already.
            (Step::Replay, _) => self.skip("a second answer to session/load".into()),
            (Step::LoadSession, Err(error)) => {
                let resume = self.setup.resume.clone().unwrap_or_default();
                self.fail(
                    moat_guest::SESSION_NOT_FOUND,
                    format!(
                        "the agent could not load session {}: {}",
                        clip(&resume, 256),
                        error.message
                    ),
                );
            }
            (step, Err(error)) => {
                let hint = if error.code == AUTH_REQUIRED {
                    " (the agent must be signed in first: sign in outside moat, or give it an \
                     API key with --allow-env)"
                } else {
                    ""
                };
                self.fail(
                    ACP_ERROR,
                    format!(
                        "the agent answered {} with error {}: {}{hint}",
                        step.method(),
                        error.code,
                        error.message
                    ),
                );
            }
        }
    }

    /// `initialize` answered: check the version, then start or load the
    /// session.
    fn initialized(&mut self, result: &Value) {
        let version = result["protocolVersion"].as_u64();
        if version != Some(PROTOCOL_VERSION) {
            return self.fail(
                ACP_ERROR,
                format!(
                    "the agent speaks ACP protocol version {}; moat's acp adapter speaks version {PROTOCOL_VERSION}",
                    clip(&result["protocolVersion"].to_string(), 50)
                ),
            );
        }
        let capabilities = &result["agentCapabilities"];
        self.can_load = capabilities["loadSession"] == Value::Bool(true);
        self.capabilities = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentInfo": result["agentInfo"],
            "agentCapabilities": capabilities,
        });
        let cwd = self.setup.cwd.clone();
        match self.setup.resume.clone() {
            Some(_) if !self.can_load => self.fail(
                moat_guest::SESSION_NOT_FOUND,
                "the agent cannot load sessions (its agentCapabilities.loadSession is not true), \
                 so the run cannot be resumed"
                    .into(),
            ),
            Some(resume) => self.send(
                Step::LoadSession,
                json!({"sessionId": resume, "cwd": cwd, "mcpServers": []}),
            ),
            None => self.send(Step::NewSession, json!({"cwd": cwd, "mcpServers": []})),
        }
    }

    /// The session exists: say so, then send the prompt.
    fn session_started(&mut self, id: String) {
        self.session_id = Some(id);
        self.send_prompt();
    }

    /// Says the session started, and sends the prompt.
    fn send_prompt(&mut self) {
        let id = self.session_id.clone().unwrap_or_default();
        let init = InitEvent::new(None, Some(&self.setup.cwd), Vec::new())
            .with_capabilities(&self.capabilities);
        self.emit(init.into());
        let prompt = json!({
            "sessionId": id,
            "prompt": [{"type": "text", "text": self.setup.prompt}],
        });
        self.send(Step::Prompt, prompt);
    }

    /// The prompt's answer: its stop reason ends the run.
    fn prompt_ended(&mut self, result: &Value) {
        let stop = result["stopReason"].as_str().unwrap_or("(none)");
        let status = match stop {
            "end_turn" => DoneStatus::Success,
            "max_tokens" => DoneStatus::MaxBudget,
            "max_turn_requests" => DoneStatus::MaxTurns,
            "cancelled" => DoneStatus::Interrupted,
            "refusal" => {
                let event = Event::error(
                    AGENT_REFUSED,
                    "the agent refused to go on (stop reason refusal)",
                    false,
                );
                self.emit(event);
                DoneStatus::Error
            }
            other => {
                let event = Event::error(
                    INVALID_AGENT_MESSAGE,
                    format!(
                        "the prompt ended with an unknown stop reason {:?}",
                        clip(other, 100)
                    ),
                    false,
                );
                self.emit(event);
                DoneStatus::Error
            }
        };
        let mut done = self
            .done(status)
            .with_metadata(&json!({"stopReason": clip(stop, 100)}));
        if !self.updates.answer().is_empty() {
            done = done.with_result(self.updates.answer());
        }
        self.emit(done.into());
        self.finished = true;
        self.transport.close();
    }

    /// A `session/update` notification.
    fn update(&mut self, params: &Value) {
        // While loading, the agent replays the session's history: the run's
        // consumer saw it in the runs that made it. The prompt waits until
        // the replay has been quiet a while.
        if self.step == Step::LoadSession {
            return;
        }
        if self.step == Step::Replay {
            let quiet = Instant::now() + REPLAY_QUIET;
            self.deadline = self.replay_cap.map(|cap| cap.min(quiet));
            return;
        }
        if self.session_id.is_none() || params["sessionId"].as_str() != self.session_id.as_deref() {
            return self.skip("a session/update for another session".into());
        }
        for event in self.updates.translate(&params["update"]) {
            if let EventKind::ToolUse(call) = &event.kind
                && !self.updates.permitted(&call.tool_use_id)
                && self.setup.policy.needs_permission(&call.tool_name)
            {
                let message = format!(
                    "the agent made a `{}` tool call ({}) without asking, which the run's policy \
                     allows only when asked (trust level, --ask-tools); the run was stopped \
                     (name the tool in --allowed-tools, or raise --trust, to let it)",
                    call.tool_name,
                    call.description.as_deref().unwrap_or("untitled")
                );
                return self.fail(TOOL_POLICY_VIOLATION, message);
            }
            self.emit(event);
        }
    }

    /// Answers a request of the agent's.
    fn serve(&mut self, method: &str, params: &Value) -> Result<Value, RpcError> {
        if method.starts_with("terminal/") {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                "terminals are not supported: moat's acp adapter runs no commands for the agent \
                 (clientCapabilities.terminal is false)",
            ));
        }
        if !matches!(
            method,
            "fs/read_text_file" | "fs/write_text_file" | "session/request_permission"
        ) {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("method not found: {}", clip(method, 100)),
            ));
        }
        if self.session_id.is_none() || params["sessionId"].as_str() != self.session_id.as_deref() {
            return Err(RpcError::invalid_params("no such session"));
        }
        match method {
            "session/request_permission" => self.permission(params),
            op => {
                let (outcome, access) = if op == "fs/read_text_file" {
                    files::read(params)
                } else {
                    files::write(params)
                };
                self.emit(Event::extension("acp:fs", &access.payload()));
                outcome
            }
        }
    }

    /// `session/request_permission`: the policy decides, or the run's user.
    fn permission(&mut self, params: &Value) -> Result<Value, RpcError> {
        let reported = Reported::parse(&params["toolCall"]).map_err(RpcError::invalid_params)?;
        let options: Vec<Value> = params["options"]
            .as_array()
            .filter(|options| {
                options
                    .iter()
                    .all(|option| option["optionId"].is_string() && option["kind"].is_string())
            })
            .cloned()
            .ok_or_else(|| {
                RpcError::invalid_params("options must be a list of {optionId, name, kind}")
            })?;
        let Some(tool) = self.updates.asked(&reported) else {
            return Ok(permission::cancelled());
        };
        let id = reported.id.clone();
        match self.setup.policy.decide(&tool) {
            Decision::Allow => {
                self.allowed(&id);
                Ok(permission::answer(&options, permission::ALLOW))
            }
            Decision::Refuse(why) => {
                self.refused(&reported, &tool, "refused", &why);
                Ok(permission::answer(&options, permission::REJECT))
            }
            Decision::Ask(why) => {
                let reason = match &reported.title {
                    Some(title) => format!("{title} ({why})"),
                    None => why,
                };
                let input = self.updates.input(&id);
                match approvals::request(&tool, &id, &input, Some(&reason)) {
                    Approval::Allow => {
                        self.allowed(&id);
                        Ok(permission::answer(&options, permission::ALLOW))
                    }
                    Approval::Deny(why) => {
                        self.refused(&reported, &tool, "denied", &why);
                        Ok(permission::answer(&options, permission::REJECT))
                    }
                    // The next turn of the loop sees the abort.
                    Approval::Interrupted => Ok(permission::cancelled()),
                }
            }
        }
    }

    fn allowed(&mut self, id: &str) {
        for event in self.updates.allowed(id) {
            self.emit(event);
        }
    }

    /// A call the agent may not make: refused by the policy, or denied by
    /// the run's user (or at once, when the run does not ask). Reported as
    /// an `acp:permission` event: the call was never made, so it has no
    /// `tool_use` a `tool_result` could answer.
    fn refused(&mut self, call: &Reported, tool: &str, decision: &str, why: &str) {
        self.updates.refused(&call.id);
        let payload = json!({
            "toolCallId": call.id,
            "toolName": tool,
            "title": call.title,
            "decision": decision,
            "reason": why,
        });
        self.emit(Event::extension("acp:permission", &payload));
    }

    /// Sends the request of `step`.
    fn send(&mut self, step: Step, params: Value) {
        self.request_id += 1;
        self.step = step;
        self.deadline =
            (step != Step::Prompt).then(|| Instant::now() + self.setup.handshake_timeout);
        let line = rpc::request(self.request_id, step.method(), params);
        // A write that fails means the agent is gone: reading says how it
        // ended.
        let _ = self.transport.write_line(&line);
    }

    /// A line skipped: reported, up to a point.
    fn skip(&mut self, what: String) {
        self.bad_lines += 1;
        if self.bad_lines > REPORTED_BAD_LINES {
            return;
        }
        let mut message = format!("skipped a message from the ACP agent: {what}");
        if self.bad_lines == REPORTED_BAD_LINES {
            message.push_str(" (further skipped messages are not reported)");
        }
        self.emit(Event::error(INVALID_AGENT_MESSAGE, message, true));
    }

    /// The agent's stdout closed before the run ended.
    fn agent_ended(&mut self) {
        let exit = self.transport.exit();
        let doing = match self.step {
            Step::Initialize => "answered initialize",
            Step::NewSession => "started a session",
            Step::LoadSession | Step::Replay => "loaded the session",
            Step::Prompt => "answered the prompt",
        };
        let mut message = format!(
            "the ACP agent `{}` {} before it {doing}",
            self.setup.agent,
            exit.describe()
        );
        let quote = stderr_quote(&self.transport.stderr_tail());
        if !quote.is_empty() {
            message.push_str(": ");
            message.push_str(&quote);
        }
        self.fail(CLI_FAILED, message);
    }

    /// The run was aborted: cancel the prompt, stop the agent, end
    /// interrupted.
    fn interrupt(&mut self) {
        if self.step == Step::Prompt
            && let Some(id) = &self.session_id
        {
            let cancel = rpc::notification("session/cancel", json!({"sessionId": id}));
            let _ = self.transport.write_line(&cancel);
        }
        self.transport.terminate();
        self.pending.clear();
        let done = self
            .done(DoneStatus::Interrupted)
            .with_metadata(&json!({"stopReason": "cancelled"}));
        self.emit(done.into());
        self.finished = true;
    }

    /// Ends the run with an error.
    fn fail(&mut self, code: &str, message: String) {
        self.emit(Event::error(code, message, false));
        let done = self.done(DoneStatus::Error);
        self.emit(done.into());
        self.finished = true;
        self.transport.terminate();
    }

    /// A `done` of `status` with what the run knows: its tool calls, and
    /// the session to resume when the agent can load it.
    fn done(&self, status: DoneStatus) -> DoneEvent {
        let mut done = DoneEvent::new(status).with_tool_uses(self.updates.tool_uses());
        if self.can_load
            && let Some(id) = &self.session_id
        {
            done = done.with_resume_token(id.clone());
        }
        done
    }

    /// Queues an event, with the session id once known.
    fn emit(&mut self, event: Event) {
        let event = match &self.session_id {
            Some(id) => event.with_session(id.clone()),
            None => event,
        };
        self.pending.push_back(event);
    }
}

#[cfg(test)]
mod tests {
    //! The conversation over a scripted agent.

    use super::*;
    use moat_cli_support::Exit;
    use moat_guest::Options;

    /// What the scripted agent does when read: write a line, stay silent
    /// (the read times out), or close its stdout.
    enum Act {
        Line(Value),
        Silent,
        /// The run is aborted: the host makes the read return at once.
        Abort,
    }

    #[derive(Default)]
    struct Scripted {
        acts: VecDeque<Act>,
        written: Vec<Value>,
        terminated: bool,
    }

    impl Transport for Scripted {
        fn read_line(&mut self, timeout: Option<Duration>) -> Result<Option<String>, ReadError> {
            match self.acts.pop_front() {
                Some(Act::Line(line)) => Ok(Some(line.to_string())),
                Some(Act::Silent) => {
                    if let Some(timeout) = timeout {
                        std::thread::sleep(timeout);
                    }
                    Err(ReadError::TimedOut)
                }
                Some(Act::Abort) => Err(ReadError::Interrupted),
                None => Ok(None),
            }
        }
        fn write_line(&mut self, line: &str) -> Result<(), String> {
            self.written
                .push(moat_guest::serde_json::from_str(line).unwrap());
            Ok(())
        }
        fn close(&mut self) {}
        fn terminate(&mut self) {
            self.terminated = true;
        }
        fn exit(&mut self) -> Exit {
            Exit::code(3)
        }
        fn stderr_tail(&mut self) -> String {
            "agent: out of luck".into()
        }
    }

    fn answer(id: u64, result: Value) -> Act {
        Act::Line(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn update(session: &str, update: Value) -> Act {
        Act::Line(json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}))
    }

    fn initialized(load: bool) -> Act {
        answer(
            1,
            json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": load}}),
        )
    }

    fn run(acts: Vec<Act>, resume: Option<&str>) -> (Vec<Event>, Scripted) {
        let transport = Scripted {
            acts: acts.into(),
            ..Scripted::default()
        };
        let setup = Setup {
            agent: "agent".into(),
            prompt: "hi".into(),
            cwd: "/work".into(),
            resume: resume.map(str::to_owned),
            policy: Policy::new(&Options::default(), Vec::new()),
            handshake_timeout: Duration::from_millis(50),
        };
        let mut session = Session::start(transport, setup);
        let events: Vec<Event> = std::iter::from_fn(|| session.next_event()).collect();
        (events, session.transport)
    }

    fn done(events: &[Event]) -> &DoneEvent {
        match &events.last().unwrap().kind {
            EventKind::Done(done) => done,
            other => panic!("{other:?}"),
        }
    }

    fn error(events: &[Event]) -> &moat_guest::ErrorInfo {
        events
            .iter()
            .find_map(|event| match &event.kind {
                EventKind::Error(error) => Some(error),
                _ => None,
            })
            .expect("an error")
    }

    #[test]
    fn a_turn_is_initialize_new_session_and_prompt_in_acp_version_1() {
        let (events, agent) = run(
            vec![
                initialized(false),
                answer(2, json!({"sessionId": "s1"})),
                update(
                    "s1",
                    json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "hello"}}),
                ),
                answer(3, json!({"stopReason": "end_turn"})),
            ],
            None,
        );
        assert!(matches!(events[0].kind, EventKind::Init(_)));
        assert_eq!(events[1], Event::text_delta("hello").with_session("s1"));
        let done = done(&events);
        assert_eq!(done.status, DoneStatus::Success);
        assert_eq!(done.result.as_deref(), Some("hello"));
        assert_eq!(done.resume_token, None, "the agent cannot load sessions");
        let methods: Vec<&str> = agent
            .written
            .iter()
            .map(|m| m["method"].as_str().unwrap())
            .collect();
        assert_eq!(methods, ["initialize", "session/new", "session/prompt"]);
        let init = &agent.written[0]["params"];
        assert_eq!(init["protocolVersion"], 1);
        assert_eq!(init["clientCapabilities"]["terminal"], false);
        assert_eq!(init["clientCapabilities"]["fs"]["writeTextFile"], true);
        assert_eq!(
            agent.written[1]["params"],
            json!({"cwd": "/work", "mcpServers": []})
        );
        assert_eq!(
            agent.written[2]["params"]["prompt"],
            json!([{"type": "text", "text": "hi"}])
        );
    }

    #[test]
    fn another_protocol_version_a_silent_agent_or_one_that_exits_ends_the_run() {
        let (events, agent) = run(vec![answer(1, json!({"protocolVersion": 2}))], None);
        assert!(error(&events).message.contains("version 2"));
        assert_eq!(done(&events).status, DoneStatus::Error);
        assert!(agent.terminated);

        let (events, _) = run(vec![Act::Silent, Act::Silent], None);
        assert!(error(&events).message.contains("did not answer initialize"));

        let (events, _) = run(
            vec![initialized(true), answer(2, json!({"sessionId": "s1"}))],
            None,
        );
        let message = &error(&events).message;
        assert!(
            message.contains("exited with code 3 before it answered the prompt")
                && message.contains("out of luck"),
            "{message}"
        );
        assert_eq!(done(&events).resume_token.as_deref(), Some("s1"));
    }

    #[test]
    fn a_loaded_sessions_replay_is_not_streamed_and_the_prompt_waits_for_it() {
        let old = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "old"}});
        let (events, agent) = run(
            vec![
                initialized(true),
                answer(2, Value::Null),
                // Replayed after the answer, as Gemini CLI does.
                update("s0", old),
                Act::Silent,
                update(
                    "s0",
                    json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "new"}}),
                ),
                answer(3, json!({"stopReason": "end_turn"})),
            ],
            Some("s0"),
        );
        let texts: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::TextDelta(_)))
            .collect();
        assert_eq!(texts, [&Event::text_delta("new").with_session("s0")]);
        assert_eq!(done(&events).resume_token.as_deref(), Some("s0"));
        assert_eq!(agent.written[1]["method"], "session/load");
        assert_eq!(agent.written[2]["method"], "session/prompt");

        let (events, _) = run(vec![initialized(false)], Some("s0"));
        assert_eq!(
            error(&events).code.as_deref(),
            Some(moat_guest::SESSION_NOT_FOUND)
        );
    }

    #[test]
    fn an_abort_mid_prompt_cancels_it_stops_the_agent_and_ends_interrupted() {
        let (events, agent) = run(
            vec![
                initialized(true),
                answer(2, json!({"sessionId": "s1"})),
                Act::Abort,
            ],
            None,
        );
        let done = done(&events);
        assert_eq!(done.status, DoneStatus::Interrupted);
        assert_eq!(done.resume_token.as_deref(), Some("s1"));
        let cancel = agent.written.last().unwrap();
        assert_eq!(
            (&cancel["method"], &cancel["params"]),
            (&json!("session/cancel"), &json!({"sessionId": "s1"}))
        );
        assert!(cancel.get("id").is_none(), "a notification");
        assert!(agent.terminated);
    }

    #[test]
    fn requests_it_does_not_serve_are_answered_with_errors_and_junk_is_skipped() {
        let request = |id: u64, method: &str| {
            Act::Line(json!({"jsonrpc": "2.0", "id": id, "method": method,
                "params": {"sessionId": "s1"}}))
        };
        let (events, agent) = run(
            vec![
                initialized(false),
                answer(2, json!({"sessionId": "s1"})),
                Act::Line(json!("not a message")),
                request(7, "terminal/create"),
                request(8, "x/unknown"),
                answer(3, json!({"stopReason": "refusal"})),
            ],
            None,
        );
        let answers: Vec<&Value> = agent
            .written
            .iter()
            .filter(|m| m.get("id").is_some_and(|id| id == 7 || id == 8))
            .collect();
        assert_eq!(answers[0]["error"]["code"], METHOD_NOT_FOUND);
        assert!(
            answers[0]["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("terminals are not supported")
        );
        assert_eq!(answers[1]["error"]["code"], METHOD_NOT_FOUND);
        let skipped = error(&events);
        assert!(skipped.recoverable && skipped.message.contains("not a JSON object"));
        assert_eq!(done(&events).status, DoneStatus::Error);
        assert!(events.iter().any(
            |e| matches!(&e.kind, EventKind::Error(e) if e.code.as_deref() == Some(AGENT_REFUSED))
        ));
    }
}
