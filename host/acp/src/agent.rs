//! What moat answers as an ACP agent: `initialize`, `session/new`,
//! `session/prompt` (a run through the launch layer, its events streamed
//! as `session/update`s), `session/cancel`; the run's requests for
//! approval asked of the editor with `session/request_permission`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use moat_engine::{EventPayload, McpServers, PermissionRequestPayload};
use moat_launch::{LaunchError, LaunchSpec, Launcher};
use moat_runs::{Answer, RunId};

use crate::editor::Editor;
use crate::jsonrpc::RpcError;
use crate::transcript::Transcript;
use crate::updates::{Updates, stop_reason};
use crate::{PROTOCOL_VERSION, prompt};

/// The most sessions one `moat acp` holds: each keeps its conversation, and
/// an editor that opened sessions in a loop must not grow it without end.
pub const MAX_SESSIONS: usize = 1024;

/// One prompt of a session, for the caller to make a run of.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The prompt, with the conversation before it when the adapter keeps
    /// no session of its own.
    pub prompt: String,
    /// The session's working directory (absolute, checked with
    /// [`TurnSpecs::check_cwd`]).
    pub cwd: PathBuf,
    /// The session to continue: the resume token the previous turn's run
    /// ended with.
    pub resume: Option<String>,
    /// The MCP servers the editor gave the session, checked.
    pub mcp_servers: Option<McpServers>,
    /// Stops the run (`session/cancel`, the editor gone).
    pub abort: CancellationToken,
}

/// How the caller (the `moat acp` command) starts its sessions' runs: the
/// adapter, grants, limits and policy it was given, for each turn.
pub trait TurnSpecs: Send + Sync {
    /// Refuses a session's working directory the runs could not work in,
    /// saying what would let them.
    fn check_cwd(&self, cwd: &Path) -> Result<(), String>;
    /// The run of `turn`.
    fn spec(&self, turn: Turn) -> Result<LaunchSpec, String>;
}

/// moat as an ACP agent: the launcher its runs start through, and how.
pub struct AcpAgent {
    launcher: Launcher,
    specs: Arc<dyn TurnSpecs>,
    /// The adapter its sessions run, for the editor's title.
    adapter: String,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// One editor session: its directory, what it said so far, its running
/// turn.
struct Session {
    id: String,
    cwd: PathBuf,
    mcp_servers: Option<McpServers>,
    /// Held for the whole of a turn: a second prompt while one runs is
    /// refused, not queued.
    memory: tokio::sync::Mutex<Memory>,
    live: Mutex<Option<Live>>,
}

#[derive(Default)]
struct Memory {
    /// What the last turn's run left to continue with.
    resume: Option<String>,
    /// The turns so far, for an adapter that leaves no resume token.
    transcript: Transcript,
}

/// The run a session's turn is in.
struct Live {
    abort: CancellationToken,
    run: Option<RunId>,
}

impl AcpAgent {
    /// An agent whose sessions' runs are started by `launcher` as `specs`
    /// says, of `adapter`.
    pub fn new(launcher: Launcher, specs: Arc<dyn TurnSpecs>, adapter: impl Into<String>) -> Self {
        Self {
            launcher,
            specs,
            adapter: adapter.into(),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// `initialize`: the protocol version and what moat supports.
    pub(crate) fn initialize(&self, params: &Value) -> Result<Value, RpcError> {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_u64)
            .ok_or_else(|| RpcError::invalid_params("protocolVersion must be a number"))?;
        tracing::debug!(asked, "initialize");
        Ok(json!({
            // The version moat speaks, whatever was asked: the editor
            // disconnects if it cannot speak it.
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": false,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
            },
            "authMethods": [],
            "agentInfo": {
                "name": "moat",
                "title": format!("{} (moat)", self.adapter),
                "version": env!("CARGO_PKG_VERSION"),
            },
        }))
    }

    /// `session/new`: a session in a directory the runs may work in.
    pub(crate) fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = params
            .get("cwd")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("session/new needs cwd"))?;
        let cwd = PathBuf::from(cwd);
        if !cwd.is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "cwd {} is not an absolute path",
                cwd.display()
            )));
        }
        if !cwd.is_dir() {
            return Err(RpcError::invalid_params(format!(
                "cwd {} is not a directory",
                cwd.display()
            )));
        }
        self.specs
            .check_cwd(&cwd)
            .map_err(RpcError::invalid_params)?;
        let mcp_servers = crate::mcp::servers_of(params.get("mcpServers").unwrap_or(&Value::Null))?;
        let id = format!("moat-{}", RunId::new().as_str().trim_start_matches("r_"));
        let session = Session {
            id: id.clone(),
            cwd,
            mcp_servers,
            memory: tokio::sync::Mutex::new(Memory::default()),
            live: Mutex::new(None),
        };
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= MAX_SESSIONS {
            return Err(RpcError::invalid_params(format!(
                "this moat acp holds {MAX_SESSIONS} sessions already: restart the agent server for more"
            )));
        }
        sessions.insert(id.clone(), Arc::new(session));
        Ok(json!({"sessionId": id}))
    }

    fn session(&self, params: &Value) -> Result<Arc<Session>, RpcError> {
        let id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("sessionId must be a string"))?;
        lock(&self.sessions).get(id).cloned().ok_or_else(|| {
            RpcError::new(
                RpcError::RESOURCE_NOT_FOUND,
                format!("no session {id} (sessions last as long as this moat acp)"),
            )
        })
    }

    /// `session/prompt`: one run of the adapter, its events sent as the
    /// session's updates; the answer once its `done` came.
    pub(crate) async fn prompt<E: Editor>(
        &self,
        editor: &Arc<E>,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let session = self.session(params)?;
        let text = prompt::text_of(params.get("prompt").unwrap_or(&Value::Null))?;
        let mut memory = session.memory.try_lock().map_err(|_| {
            RpcError::invalid_params(
                "a prompt is running in this session: wait for its answer or cancel it",
            )
        })?;
        let abort = CancellationToken::new();
        let turn = Turn {
            prompt: match memory.resume {
                Some(_) => text.clone(),
                None => memory.transcript.prompt_with(&text),
            },
            cwd: session.cwd.clone(),
            resume: memory.resume.clone(),
            mcp_servers: session.mcp_servers.clone(),
            abort: abort.clone(),
        };
        let spec = self.specs.spec(turn).map_err(RpcError::invalid_params)?;
        let names = spec.names.clone();
        let prepared = self
            .launcher
            .prepare(spec)
            .await
            .map_err(|error| launch_error(error, names.as_ref()))?;
        let run = prepared.id().cloned();
        *lock(&session.live) = Some(Live {
            abort: abort.clone(),
            run: run.clone(),
        });
        // Ends the editor's questions of this turn when the turn ends,
        // however it ends (a request the run stopped waiting for would
        // otherwise wait for the editor as long as the connection lasts).
        let asking = abort.child_token();
        let _asking = asking.clone().drop_guard();
        let mut events = self.launcher.start(prepared);
        let mut updates = Updates::default();
        let mut answer = String::new();
        let mut fatal = None;
        let mut done = None;
        while let Some(event) = events.next().await {
            match &event.payload {
                EventPayload::PermissionRequest(request) => {
                    if let (Some(run), Some(_)) = (&run, &request.request_id) {
                        self.ask_editor(editor, &session.id, run, request, &asking);
                    }
                }
                EventPayload::TextDelta(text) => answer.push_str(&text.delta),
                EventPayload::Error(error) if !error.recoverable => {
                    fatal = Some(error.message.clone());
                }
                EventPayload::Done(payload) => done = Some(payload.clone()),
                _ => {}
            }
            for update in updates.of(&event) {
                editor
                    .notify(
                        "session/update",
                        json!({"sessionId": session.id, "update": update}),
                    )
                    .await;
            }
        }
        drop(events);
        *lock(&session.live) = None;
        let run_shown = run.as_ref().map(RunId::as_str).unwrap_or("(not recorded)");
        let meta = json!({"moatRun": run.as_ref().map(RunId::as_str)});
        let Some(done) = done else {
            return Err(RpcError::internal(format!(
                "run {run_shown} ended without its done"
            )));
        };
        // A cancelled turn says so, whatever the run's end made of it.
        let reason = match abort.is_cancelled() {
            true => Some("cancelled"),
            false => stop_reason(done.status),
        };
        // The session goes on from where the run left it: its resume token
        // (a cancelled run's too), else the turn joins the transcript.
        match (&done.resume_token, reason) {
            (Some(token), _) => memory.resume = Some(token.clone()),
            (None, Some("cancelled") | None) => {}
            (None, Some(_)) => {
                let answered = done.result.clone().unwrap_or(answer);
                memory.transcript.push(&text, &answered);
            }
        }
        match reason {
            Some(reason) => Ok(json!({"stopReason": reason, "_meta": meta})),
            None => Err(RpcError::internal(format!(
                "run {run_shown} failed: {} (moat logs {run_shown})",
                fatal.unwrap_or_else(|| "no error was given".into())
            ))),
        }
    }

    /// Asks the editor about a request the run waits on, and answers it
    /// with what the user picked; `turn_over` stops the asking.
    fn ask_editor<E: Editor>(
        &self,
        editor: &Arc<E>,
        session: &str,
        run: &RunId,
        request: &PermissionRequestPayload,
        turn_over: &CancellationToken,
    ) {
        let Some(runs) = self.launcher.runs() else {
            return;
        };
        let Some(number) = request
            .request_id
            .as_deref()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return;
        };
        let params = permission_params(session, request);
        let (editor, run, turn_over) = (editor.clone(), run.clone(), turn_over.clone());
        tokio::spawn(async move {
            let outcome = tokio::select! {
                outcome = editor.request("session/request_permission", params) => outcome,
                () = turn_over.cancelled() => return,
            };
            let by = format!(
                "{} through moat acp (pid {})",
                editor.client_name(),
                std::process::id()
            );
            let answer = answer_of(outcome, by);
            if let Err(error) = runs.answer(&run, Some(number), answer).await {
                tracing::info!(run = %run, "the editor's answer came too late: {error}");
            }
        });
    }

    /// `session/cancel`: the session's running turn stops; its prompt is
    /// answered `cancelled` once the run's `done` came.
    pub(crate) async fn cancel(&self, params: &Value) {
        let Ok(session) = self.session(params) else {
            return;
        };
        let live = lock(&session.live)
            .as_ref()
            .map(|live| (live.abort.clone(), live.run.clone()));
        if let Some((abort, run)) = live {
            abort.cancel();
            // Recorded as `moat cancel` records it.
            if let (Some(run), Some(runs)) = (run, self.launcher.runs())
                && let Err(error) = runs.cancel(&run).await
            {
                tracing::warn!(run = %run, "cannot cancel: {error}");
            }
        }
    }

    /// Waits until no session has a running turn.
    pub async fn idle(&self) {
        loop {
            let running = lock(&self.sessions)
                .values()
                .any(|session| lock(&session.live).is_some());
            if !running {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Stops every session's running turn (the editor is gone, or moat
    /// acp is stopping); each ends with its `done`.
    pub async fn cancel_all(&self) {
        let ids: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        for id in ids {
            self.cancel(&json!({"sessionId": id})).await;
        }
    }
}

/// `session/request_permission`'s parameters for a run's request: allow
/// once, always (the run's later requests of its kind), or deny.
fn permission_params(session: &str, request: &PermissionRequestPayload) -> Value {
    let mut tool_call = json!({
        "toolCallId": request.tool_use_id,
        "title": request.tool_name,
        "status": "pending",
        "rawInput": request.input,
    });
    if let Some(reason) = &request.reason {
        tool_call["content"] =
            json!([{"type": "content", "content": {"type": "text", "text": reason}}]);
    }
    json!({
        "sessionId": session,
        "toolCall": tool_call,
        "options": [
            {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow_always", "name": format!("Always allow {}", request.tool_name), "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Deny", "kind": "reject_once"},
        ],
    })
}

/// The answer the editor's reply makes.
fn answer_of(outcome: Result<Value, RpcError>, by: String) -> Answer {
    let reply = match outcome {
        Ok(reply) => reply,
        Err(error) => {
            return Answer::deny(
                by,
                Some(format!("the editor could not ask: {}", error.message)),
            );
        }
    };
    let outcome = &reply["outcome"];
    match (outcome["outcome"].as_str(), outcome["optionId"].as_str()) {
        (Some("selected"), Some("allow_once")) => Answer::approve(by, false),
        (Some("selected"), Some("allow_always")) => Answer::approve(by, true),
        (Some("selected"), Some("reject_once")) => {
            Answer::deny(by, Some("denied in the editor".into()))
        }
        (Some("cancelled"), _) => Answer::deny(by, Some("the editor cancelled the prompt".into())),
        _ => Answer::deny(
            by,
            Some(format!(
                "the editor answered with no option moat offered: {reply}"
            )),
        ),
    }
}

/// A run that could not start, as the prompt's error.
fn launch_error(error: LaunchError, names: &dyn moat_engine::SettingNames) -> RpcError {
    match error {
        LaunchError::Refused(refusal) => {
            RpcError::invalid_params(format!("BOUNDARY_VIOLATION: {}", refusal.message(names)))
        }
        LaunchError::Invalid(invalid) => RpcError::invalid_params(invalid.message(names)),
        other => RpcError::internal(other.to_string()),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editors_choice_becomes_the_answer_and_anything_else_denies() {
        let by = || "editor".to_string();
        let pick =
            |option: &str| Ok(json!({"outcome": {"outcome": "selected", "optionId": option}}));
        let once = answer_of(pick("allow_once"), by());
        assert!(once.approved && !once.always);
        let always = answer_of(pick("allow_always"), by());
        assert!(always.approved && always.always);
        assert_eq!(answer_of(pick("reject_once"), by()).decision(), "denied");
        assert_eq!(answer_of(pick("made_up"), by()).decision(), "denied");
        let cancelled = Ok(json!({"outcome": {"outcome": "cancelled"}}));
        assert_eq!(answer_of(cancelled, by()).decision(), "denied");
        let failed = Err(RpcError::internal("gone"));
        assert_eq!(answer_of(failed, by()).decision(), "denied");
    }
}
