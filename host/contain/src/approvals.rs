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
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

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
pub struct Asking {
    /// Who answers.
    pub approver: Arc<dyn Approver>,
    /// The tools whose every call the run asks about first
    /// (`--ask-tools`): its adapter lets its backend ask.
    pub tools: Vec<String>,
}

impl fmt::Debug for Asking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Asking")
    }
}

/// The same approver, not an equal one.
impl PartialEq for Asking {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.approver, &other.approver) && self.tools == other.tools
    }
}

impl Asking {
    /// Asks for what `denial` refuses: `Ok` when approved, else the
    /// denial to record, its reason the answer's.
    pub async fn ask(&self, denial: Denial) -> Result<(), Denial> {
        match self.approver.ask(Question::Grant(denial.clone())).await {
            Verdict::Approved => Ok(()),
            Verdict::Denied(reason) => Err(Denial { reason, ..denial }),
        }
    }

    /// [`ask`](Self::ask) for the guest's own call (its HTTP request, its
    /// spawn): no guest code of the run runs until the answer comes, so
    /// the run counts as waiting ([`Waiting`]). A program's
    /// request (through the proxy) asks with [`ask`](Self::ask): its guest
    /// may be running meanwhile.
    pub async fn ask_for_guest(&self, denial: Denial) -> Result<(), Denial> {
        let _waiting = Waiting::begin();
        self.ask(denial).await
    }

    /// Asks whether the tool call may be made: `Ok` when approved, else
    /// why not. (Asked by a program the run started: its guest may be
    /// running meanwhile, so the run does not count as waiting.)
    pub async fn ask_tool(
        &self,
        name: String,
        tool_use_id: String,
        input: moat_engine::JsonObject,
        reason: Option<String>,
    ) -> Result<(), String> {
        let question = Question::Tool {
            name,
            tool_use_id,
            input,
            reason,
        };
        match self.approver.ask(question).await {
            Verdict::Approved => Ok(()),
            Verdict::Denied(reason) => Err(reason),
        }
    }
}

/// How many runs of the process wait for an answer to a request: no guest
/// code of theirs runs until it comes.
static WAITING: Mutex<usize> = Mutex::new(0);

/// Woken when a run stops waiting for an answer.
static WAITING_ENDED: Condvar = Condvar::new();

/// A run waiting for an answer, counted while it is held.
pub struct Waiting(());

impl Waiting {
    /// Counts one more run waiting, until the value is dropped.
    pub fn begin() -> Self {
        *WAITING.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Waiting(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = WAITING.lock().unwrap_or_else(PoisonError::into_inner);
        *waiting = waiting.saturating_sub(1);
        WAITING_ENDED.notify_all();
    }
}

/// Blocks while every one of the process's runs (`live_runs` counts them)
/// waits for an answer, and at least one does; returns at once otherwise,
/// and after at most `longest` in any case (a run started meanwhile is
/// noticed then). The sandbox's epoch ticker idles so.
pub fn idle_while_all_wait(live_runs: impl FnOnce() -> usize, longest: Duration) {
    let waiting = WAITING.lock().unwrap_or_else(PoisonError::into_inner);
    if *waiting == 0 || *waiting < live_runs() {
        return;
    }
    let _ = WAITING_ENDED.wait_timeout(waiting, longest);
}
