//! Asking instead of refusing: a run started to ask (`--ask`) carries an
//! [`Approver`], and a request of its component that its grants do not
//! cover (a host it may not reach, a program it may not start) is put to
//! it before it is refused. The guest's call waits for the answer — the
//! run is `waiting`, no CPU spent — and then goes on as if granted, or is
//! refused as it would have been, with the answer's reason.
//!
//! The sandbox only asks: who answers, how the request is recorded and
//! shown, how far an answer may reach (never past the ceiling of whoever
//! started the run) and how long it is waited for belong to the layer
//! that launched the run.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use moat_engine::Denial;

/// The variable that gives an adapter whose run asks the URL of the run's
/// approvals as an MCP server (on its proxy: for the agent CLI it starts;
/// `moat_guest::approvals` reads it).
pub const APPROVALS_VARIABLE: &str = "MOAT_APPROVALS_URL";

/// The variable that names, comma-separated, the tools the run's policy
/// puts under `ask`: the adapter lets its backend ask before each.
pub const ASK_TOOLS_VARIABLE: &str = "MOAT_ASK_TOOLS";

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Granted, for this request.
    Approved,
    /// Refused, and why (who refused and their reason, in words).
    Denied(String),
}

/// What a run asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// What `denial` would refuse: its remedy names the grant wanted.
    Grant(Denial),
    /// A call of a tool, which its adapter (or the agent the adapter
    /// drives) asks before making.
    Tool {
        /// The tool's name.
        name: String,
        /// The call's id.
        tool_use_id: String,
        /// Its arguments.
        input: moat_engine::JsonObject,
        /// Why it is asked, in the asker's words.
        reason: Option<String>,
    },
}

/// Who answers a run's requests.
pub trait Approver: Send + Sync {
    /// Asks `question`. Dropping the future before it resolves (the run
    /// stopped) abandons the request: the implementation closes it.
    fn ask(&self, question: Question) -> BoxFuture<'static, Verdict>;
}

/// A run's [`Approver`], as its scope carries it.
#[derive(Clone)]
pub struct Asking(pub Arc<dyn Approver>);

impl fmt::Debug for Asking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Asking")
    }
}

/// The same approver, not an equal one.
impl PartialEq for Asking {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Asking {
    /// Asks for what `denial` refuses: `Ok` when approved, else the
    /// denial to record, its reason the answer's.
    pub(crate) async fn ask(&self, denial: Denial) -> Result<(), Denial> {
        let _waiting = crate::control::Waiting::begin();
        match self.0.ask(Question::Grant(denial.clone())).await {
            Verdict::Approved => Ok(()),
            Verdict::Denied(reason) => Err(Denial { reason, ..denial }),
        }
    }

    /// Asks whether the tool call may be made: `Ok` when approved, else
    /// why not.
    pub async fn ask_tool(
        &self,
        name: String,
        tool_use_id: String,
        input: moat_engine::JsonObject,
        reason: Option<String>,
    ) -> Result<(), String> {
        let _waiting = crate::control::Waiting::begin();
        let question = Question::Tool {
            name,
            tool_use_id,
            input,
            reason,
        };
        match self.0.ask(question).await {
            Verdict::Approved => Ok(()),
            Verdict::Denied(reason) => Err(reason),
        }
    }
}
