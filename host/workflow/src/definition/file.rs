//! The workflow file as written: TOML (`[[task]]`, `[[hook]]` tables) or
//! JSON (the same keys; `tasks` and `hooks` also accepted). Nothing here is
//! checked beyond its shape: [`super::load`] checks the meaning.

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowFile {
    /// The workflow's name; its file's stem when left out.
    pub name: Option<String>,
    /// Files merged, in order, into the constitution every task gets.
    #[serde(default)]
    pub constitution: OneOrMany,
    /// How many tasks may run at once (the command line may lower it).
    pub max_parallel: Option<usize>,
    /// The most bytes of assembled context a task's prompt may have, e.g.
    /// "256KiB".
    pub context_budget: Option<String>,
    /// The tasks, in any order.
    #[serde(default, rename = "task", alias = "tasks")]
    pub tasks: Vec<TaskEntry>,
    /// Commands run at hook points.
    #[serde(default, rename = "hook", alias = "hooks")]
    pub hooks: Vec<HookEntry>,
    /// Every task's workspace (`worktree`, `copy` or `none`), unless the
    /// task says otherwise.
    pub workspace: Option<String>,
}

/// A string or a list of strings.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// Nothing given.
    #[default]
    None,
    /// One.
    One(String),
    /// Several, in order.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The strings, in order.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::None => Vec::new(),
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// One task as written: the workflow's own keys, and the rest — its
/// adapter, prompt, options, grants, limits, workspace — a run request in
/// the workflow's words, read (and its unknown keys refused) by the one
/// request reader.
#[derive(Debug, Deserialize)]
pub struct TaskEntry {
    pub id: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub outputs: Vec<String>,
    pub save_answer: Option<String>,
    #[serde(default)]
    pub retries: u32,
    pub backoff: Option<String>,
    #[serde(rename = "loop")]
    pub repeat: Option<LoopEntry>,
    /// Every other key: the run request.
    #[serde(flatten)]
    pub request: serde_json::Map<String, serde_json::Value>,
}

/// The keys of a task that are the workflow's own, not its run's.
pub const TASK_KEYS: &[&str] = &[
    "id",
    "depends_on",
    "inputs",
    "outputs",
    "save_answer",
    "retries",
    "backoff",
    "loop",
];

/// A task's grants: what it may have of the workflow's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantsEntry {
    #[serde(default)]
    pub net: Vec<String>,
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub run: Vec<String>,
}

/// A task repeated until a condition holds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopEntry {
    pub max_iterations: u32,
    pub until: UntilEntry,
    pub on_max: Option<String>,
}

/// When a loop ends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UntilEntry {
    /// A command: the loop ends when it exits 0.
    pub command: Option<CommandEntry>,
    /// What the command may reach besides the project (read) …
    pub grants: Option<GrantsEntry>,
    /// … or run it with the user's full rights.
    #[serde(default)]
    pub unsandboxed: bool,
    /// A field of the iteration's handover (a top-level key, or a JSON
    /// pointer such as `/review/approved`) …
    pub handover: Option<String>,
    /// … equal to this value (`true` when left out).
    pub equals: Option<serde_json::Value>,
}

/// A command: a string run by `sh -c`, or a program and its arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CommandEntry {
    /// `sh -c STRING`.
    Shell(String),
    /// A program and its arguments.
    Argv(Vec<String>),
}

/// A hook as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    pub on: String,
    #[serde(default = "any_task")]
    pub task: String,
    pub command: CommandEntry,
    pub timeout: Option<String>,
    /// What the command may reach besides the project (read) …
    pub grants: Option<GrantsEntry>,
    /// … or run it with the user's full rights.
    #[serde(default)]
    pub unsandboxed: bool,
}

fn any_task() -> String {
    "*".into()
}
