//! A run's approval desk: where what a run asks for mid-run goes (see
//! `moat_contain::approvals` for how a request is raised).
//!
//! For each request the desk
//! 1. answers at once what an earlier `--always` answer covers, and
//!    denies at once what lies beyond the most the run may ever be given
//!    (the ceiling of whoever started it, and its parent's grants) —
//!    saying so, since no answer could change it;
//! 2. records the request with the run (the run reads `waiting`) and
//!    hands the run's consumer a `permission_request` event;
//! 3. waits for an answer from any process on the machine (`moat approve`
//!    / `moat deny`, the protocol), or denies it when the run's approval
//!    timeout passes;
//! 4. hands on a `moat:permission_answer` event and answers the sandbox.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use moat_contain::{Approver, Question, Verdict};
use moat_engine::{AgentEvent, EventPayload, ExtensionPayload, Grant};
use moat_engine::{JsonObject, PermissionRequestPayload};
use moat_grants::{Grants, NetRule};
use moat_runs::{Answer, Approval, ApprovalRequest, Requested, RunBook, RunId};
use tokio::sync::mpsc;

/// The name of the event that tells a run's consumers how one of its
/// requests was answered.
pub const ANSWER_EVENT: &str = "moat:permission_answer";

/// How a run asks: for how long a request is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// How long a request waits for an answer before it is denied;
    /// `None`: as long as the run lasts.
    pub timeout: Option<Duration>,
    /// The tools whose calls are asked about first (`--ask-tools`): the
    /// adapter lets its backend ask (Claude Code's permission prompts).
    pub tools: Vec<String>,
}

impl Ask {
    /// How long a request waits unless told otherwise: ten minutes, then
    /// it is denied.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
}

impl Default for Ask {
    fn default() -> Self {
        Self {
            timeout: Some(Self::DEFAULT_TIMEOUT),
            tools: Vec::new(),
        }
    }
}

/// The events a run's desk hands its consumer, between the engine's.
pub(crate) type Notices = mpsc::UnboundedReceiver<AgentEvent>;

/// One run's desk.
#[derive(Clone)]
pub(crate) struct Desk(Arc<Inner>);

struct Inner {
    /// Where its requests are kept: the run's record, wherever it is.
    book: Arc<dyn RunBook>,
    id: RunId,
    agent: String,
    ask: Ask,
    /// The most an answer may give the run; `None`: anything (the one who
    /// answers holds every right here: the person who started it).
    most: Option<Grants>,
    /// Who set that bound, for the denial that names it.
    holder: String,
    notices: mpsc::UnboundedSender<AgentEvent>,
    /// The session id the run's events carry until its adapter names one:
    /// a request made before the run's first event carries it too.
    session: String,
    /// What `--always` answers approved for the rest of the run.
    always: Mutex<Vec<Requested>>,
}

impl Desk {
    /// The desk of run `id` (of adapter `agent`), recorded in `runs`;
    /// answers may give it at most `most` (see [`Inner::most`]), the bound
    /// `holder` set. Its events come out of the returned receiver, with
    /// the desk's session id (see [`Desk::session`]).
    pub(crate) fn new(
        book: Arc<dyn RunBook>,
        id: RunId,
        agent: &str,
        ask: Ask,
        most: Option<Grants>,
        holder: String,
    ) -> (Self, Notices) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let inner = Inner {
            book,
            id,
            agent: agent.to_owned(),
            ask,
            most,
            holder,
            notices: sender,
            session: moat_engine::new_session_id(),
            always: Mutex::default(),
        };
        (Self(Arc::new(inner)), receiver)
    }

    /// The session id the desk's events carry: the run's engine starts
    /// with it, so that a request made before the run's first event is of
    /// the same session.
    pub(crate) fn session(&self) -> &str {
        &self.0.session
    }
}

impl Approver for Desk {
    fn ask(&self, question: Question) -> BoxFuture<'static, Verdict> {
        let inner = self.0.clone();
        async move {
            let request = match question {
                Question::Grant(denial) => match denial.remedy.as_ref().and_then(requested) {
                    Some(what) => ApprovalRequest {
                        reason: format!(
                            "{} access to {}: {}",
                            denial.request.capability(),
                            denial.request,
                            denial.reason
                        ),
                        what,
                    },
                    // Nothing a grant could allow (a prohibited address of
                    // a granted name, say): refused as it would be.
                    None => return Verdict::Denied(denial.reason),
                },
                Question::Tool {
                    name,
                    tool_use_id,
                    input,
                    reason,
                } => ApprovalRequest {
                    reason: reason.unwrap_or_else(|| format!("the agent asks to use {name}")),
                    what: Requested::Tool {
                        name,
                        tool_use_id,
                        input: serde_json::Value::Object(input),
                    },
                },
            };
            inner.decide(request).await
        }
        .boxed()
    }
}

impl Inner {
    async fn decide(self: Arc<Self>, request: ApprovalRequest) -> Verdict {
        let what = &request.what;
        let covered = self
            .always
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|approved| approved.covers(what));
        if covered {
            tracing::debug!(run = %self.id, %what, "approved by an earlier --always answer");
            return Verdict::Approved;
        }
        if let Some(most) = &self.most
            && !within(&request.what, most)
        {
            let reason = format!(
                "{} is beyond what {} may grant; no answer could allow it",
                request.what, self.holder
            );
            self.record_refusal(&request, &reason).await;
            return Verdict::Denied(reason);
        }
        let asked = match self.book.ask(&self.id, &request).await {
            Ok(asked) => asked,
            Err(error) => {
                return Verdict::Denied(format!("the request could not be recorded: {error}"));
            }
        };
        self.notify(request_event(&asked));
        // Closes the request should the run stop waiting (its end, a
        // cancel): nobody is asked for what nobody waits for.
        let mut open = OpenRequest {
            inner: Some(self.clone()),
            number: asked.number,
        };
        let answer = self.wait(asked.number).await;
        open.inner = None;
        self.notify(answer_event(asked.number, &answer));
        if answer.approved {
            if answer.always {
                self.always
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(asked.request.what);
            }
            Verdict::Approved
        } else {
            Verdict::Denied(match &answer.reason {
                Some(reason) => format!("denied by {}: {reason}", answer.by),
                None => format!("denied by {}", answer.by),
            })
        }
    }

    /// The answer to request `number`: the first one given, or the
    /// timeout's denial.
    async fn wait(&self, number: u32) -> Answer {
        let answered = self.book.answer_to(&self.id, number);
        let outcome = match self.ask.timeout {
            Some(timeout) => tokio::time::timeout(timeout, answered).await.ok(),
            None => Some(answered.await),
        };
        match outcome {
            Some(Ok(answer)) => answer,
            Some(Err(error)) => {
                let why = format!("the answer could not be read: {error}");
                self.close(number, Answer::deny("moat", Some(why))).await
            }
            None => {
                let timeout = self.ask.timeout.unwrap_or_default();
                let by = format!(
                    "the approval timeout ({})",
                    humantime::format_duration(timeout)
                );
                let why = Some("nobody answered in time".into());
                self.close(number, Answer::deny(by, why)).await
            }
        }
    }

    /// Answers request `number` with `answer`, unless someone answered it
    /// first: the answer that stands.
    async fn close(&self, number: u32, answer: Answer) -> Answer {
        match self
            .book
            .answer(&self.id, Some(number), answer.clone())
            .await
        {
            Ok(_) => answer,
            Err(error) => match self.book.answer_of(&self.id, number).await {
                Ok(Some(first)) => first,
                _ => Answer {
                    reason: Some(error.to_string()),
                    ..answer
                },
            },
        }
    }

    /// Records a request denied before anyone was asked.
    async fn record_refusal(&self, request: &ApprovalRequest, reason: &str) {
        let by = format!("the ceiling of {}", self.holder);
        let recorded = match self.book.ask(&self.id, request).await {
            Ok(asked) => {
                let answer = Answer::deny(by, Some(reason.into()));
                self.book.answer(&self.id, Some(asked.number), answer).await
            }
            Err(error) => Err(error),
        };
        if let Err(error) = recorded {
            tracing::warn!(run = %self.id, "a refused request could not be recorded: {error}");
        }
    }

    fn notify(&self, payload: EventPayload) {
        // The consumer gone, the run is ending: nobody to tell.
        let mut event = AgentEvent::by_host(self.agent.clone(), payload);
        event.session_id.clone_from(&self.session);
        let _ = self.notices.send(event);
    }
}

/// A request the desk waits for: dropped unanswered (the run stopped
/// waiting), it is closed.
struct OpenRequest {
    inner: Option<Arc<Inner>>,
    number: u32,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        let (Some(inner), Ok(runtime)) = (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let number = self.number;
        runtime.spawn(async move {
            let answer = Answer::closed();
            inner.close(number, answer).await;
        });
    }
}

/// What a refusal's remedy asks for, when it is something an answer
/// could grant.
fn requested(remedy: &Grant) -> Option<Requested> {
    match remedy {
        Grant::Net { host, port } => Some(Requested::Net {
            host: host.clone(),
            port: *port,
        }),
        Grant::Read { dir } => Some(Requested::Read { dir: dir.clone() }),
        Grant::Run { program } => Some(Requested::Run {
            program: program.clone(),
        }),
        // A variable's value, or a program named by a relative path: not
        // something to ask for. A socket is refused at once: the program's
        // `connect` cannot wait for an answer.
        Grant::Env { .. }
        | Grant::RunByNameOrPath
        | Grant::UnixSocket { .. }
        | Grant::Unmetered => None,
    }
}

/// Whether `most` covers what is asked: the grant it stands for is no
/// excess over it (the one rule of what narrows, `Grants::excess_over`).
fn within(what: &Requested, most: &Grants) -> bool {
    let mut asked = Grants::none();
    match what {
        Requested::Net { host, port } => match NetRule::parse(&format!("{host}:{port}")) {
            Ok(rule) => asked.net.push(rule),
            Err(_) => return false,
        },
        Requested::Run { program } => asked.run.push(program.clone()),
        Requested::Read { dir } => asked.read.push(dir.into()),
        Requested::Write { dir } => asked.write.push(dir.into()),
        // A tool is no grant: what may be called is the run's tool policy,
        // which the ceiling narrowed already.
        Requested::Tool { .. } => return true,
        Requested::Secret { .. } => return false,
    }
    asked.excess_over(most).is_empty()
}

/// The `permission_request` event of an open request.
fn request_event(asked: &Approval) -> EventPayload {
    let what = &asked.request.what;
    // A tool's call as cligent shows one (its own id and arguments); a
    // grant by what it names.
    let (tool_use_id, input) = match what {
        Requested::Tool {
            tool_use_id, input, ..
        } => (
            tool_use_id.clone(),
            input.as_object().cloned().unwrap_or_default(),
        ),
        _ => {
            let mut input = match serde_json::to_value(what) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => JsonObject::new(),
            };
            input.remove("kind");
            (format!("moat-request-{}", asked.number), input)
        }
    };
    EventPayload::PermissionRequest(Box::new(PermissionRequestPayload {
        tool_name: what.tool_name(),
        tool_use_id,
        input,
        reason: Some(asked.request.reason.clone()),
        request_id: Some(asked.number.to_string()),
        kind: Some(what.kind().to_owned()),
    }))
}

/// The event that says how request `number` was answered.
fn answer_event(number: u32, answer: &Answer) -> EventPayload {
    EventPayload::Extension(Box::new(ExtensionPayload {
        name: ANSWER_EVENT.to_owned(),
        payload: serde_json::json!({
            "requestId": number.to_string(),
            "decision": answer.decision(),
            "approved": answer.approved,
            "always": answer.always,
            "by": answer.by,
            "reason": answer.reason,
        }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reaches_only_as_far_as_the_bound() {
        let mut most = Grants::none();
        most.net
            .push(NetRule::parse("api.example.com:443").unwrap());
        most.run.push("git".into());
        let net = |host: &str| Requested::Net {
            host: host.into(),
            port: 443,
        };
        assert!(within(&net("api.example.com"), &most));
        assert!(!within(&net("evil.example.com"), &most));
        assert!(within(
            &Requested::Run {
                program: "git".into()
            },
            &most
        ));
        assert!(!within(
            &Requested::Run {
                program: "sh".into()
            },
            &most
        ));
        // A tool call is bounded by the tool policy, not by grants: a
        // server's ceiling lets it be asked about.
        let tool = Requested::Tool {
            name: "Bash".into(),
            tool_use_id: "t1".into(),
            input: serde_json::json!({}),
        };
        assert!(within(&tool, &most));
        assert!(within(&tool, &Grants::none()));
    }
}
