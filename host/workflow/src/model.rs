//! What a checked workflow is made of: its tasks with their options,
//! loops and retries, the commands moat runs itself, the hook commands
//! and the points of a task's life they run at, and the defaults and
//! limits a workflow file is held to. Plain data: this module imports
//! nothing else of the crate, so the file's checks
//! ([`definition`](crate::definition)), the graph ([`graph`](crate::graph))
//! and the hooks ([`hooks`](crate::hooks)) all build on it. Its types are
//! named through [`definition`](crate::definition) (and [`HookPoint`]
//! through [`hooks`](crate::hooks)).

use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_grants::Grants;
use moat_launch::RunRequest;
use serde::Serialize;

/// How many bytes of assembled context a task gets unless the file says.
pub const DEFAULT_CONTEXT_BUDGET: usize = 256 * 1024;
/// How long a hook command may take unless the file says.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);
/// The first wait before a retry unless the task says; it doubles each time.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// The most retries a task may ask for.
pub const MAX_RETRIES: u32 = 100;
/// The most iterations a loop may ask for.
pub const MAX_ITERATIONS: u32 = 1000;

/// A checked workflow.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// Its name: where its state lives (`.moat/workflows/<name>/`).
    pub name: String,
    /// The file it was read from.
    pub file: PathBuf,
    /// The directory its relative paths are relative to (the file's, made
    /// absolute): the project.
    pub project: PathBuf,
    /// SHA-256 of the file's bytes, lowercase hex: a resumed workflow must
    /// be the one its state was written for.
    pub hash: String,
    /// The constitution's files, in merge order (absolute).
    pub constitution: Vec<PathBuf>,
    /// How many tasks may run at once, if the file says.
    pub max_parallel: Option<usize>,
    /// The most bytes of context a task's prompt may have.
    pub context_budget: usize,
    /// The tasks, in file order.
    pub tasks: Vec<Task>,
    /// The hook commands, in file order.
    pub hooks: Vec<HookCommand>,
}

/// One task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Its id, unique in the workflow.
    pub id: String,
    /// A built-in adapter's name or a component's path.
    pub adapter: String,
    /// Its prompt template (`{{task}}`, `{{workflow}}`, `{{attempt}}`,
    /// `{{iteration}}`).
    pub prompt: String,
    /// The tasks that must complete before it starts.
    pub depends_on: Vec<String>,
    /// Files whose contents go into its context (relative to the project).
    pub inputs: Vec<PathBuf>,
    /// Files it must produce (relative to the project).
    pub outputs: Vec<PathBuf>,
    /// A file moat writes the final answer to (relative to the project).
    pub save_answer: Option<PathBuf>,
    /// What each attempt's run asks for: its options, the grants it may
    /// have of the workflow's (all of them when it names none), its limits
    /// — a run request in the workflow file's words.
    pub request: RunRequest,
    /// How many times a failed attempt is retried.
    pub retries: u32,
    /// The wait before the first retry; it doubles each time.
    pub backoff: Duration,
    /// When it repeats until a condition holds.
    pub repeat: Option<Loop>,
}

impl Task {
    /// A workspace of its own (starting from its upstream tasks'
    /// changes), or `None`: it works in the project.
    pub fn workspace(&self) -> Option<moat_workspace::Mode> {
        self.request.workspace
    }

    /// How long to wait before attempt `attempt` (from 2): the backoff,
    /// doubled for each retry before it, at most an hour.
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(2).min(20);
        (self.backoff * 2u32.pow(doublings)).min(Duration::from_secs(3600))
    }

    /// Every file it produces: its outputs and the saved answer.
    pub fn produces(&self) -> impl Iterator<Item = &PathBuf> {
        self.outputs.iter().chain(&self.save_answer)
    }

    /// Its adapter as the resolver takes it: a relative component path is
    /// the project's, like every path in the file; a name is a name.
    pub fn adapter_in(&self, project: &Path) -> String {
        if self.adapter.contains('/') || self.adapter.ends_with(".wasm") {
            project.join(&self.adapter).to_string_lossy().into_owned()
        } else {
            self.adapter.clone()
        }
    }
}

/// A task repeated until a condition holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Loop {
    /// The most iterations.
    pub max_iterations: u32,
    /// The condition that ends it.
    pub until: Until,
    /// What the task becomes when the last iteration ends without it.
    pub on_max: OnMax,
}

/// What ends a loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Until {
    /// A command exiting 0 (given the iteration as JSON on stdin), run as
    /// `sandbox` says.
    Command(Command, CommandSandbox),
    /// A field of the iteration's handover equal to a value.
    Handover {
        /// A JSON pointer into the handover (`/approved`).
        pointer: String,
        /// The value it must have.
        equals: serde_json::Value,
    },
}

/// What a loop that reached its most iterations without its condition
/// makes of its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMax {
    /// The task fails (the default).
    Fail,
    /// The task completes with its last iteration's handover.
    Complete,
}

/// A command moat runs itself (not in the sandbox): a hook or a loop's
/// check, written by whoever wrote the workflow file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `sh -c STRING`.
    Shell(String),
    /// A program and its arguments.
    Argv(Vec<String>),
}

impl Command {
    /// The program and its arguments.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Self::Shell(script) => vec!["sh".into(), "-c".into(), script.clone()],
            Self::Argv(argv) => argv.clone(),
        }
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Shell(script) => f.write_str(script),
            Self::Argv(argv) => f.write_str(&argv.join(" ")),
        }
    }
}

/// A hook command from the file.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCommand {
    /// When it runs.
    pub point: HookPoint,
    /// For which task: an id, or `*` for all.
    pub task: String,
    /// What runs.
    pub command: Command,
    /// The most it may take.
    pub timeout: Duration,
    /// What it may reach.
    pub sandbox: CommandSandbox,
}

/// What a hook or a loop's check command may reach. Contained by default:
/// an agent granted the project may have written the script it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandSandbox {
    /// Contained as a task's programs are: the project readable (not
    /// writable), no network, its own program and `MOAT_*` variables,
    /// and what these grants add (directories to read or write, hosts,
    /// variables, more programs). Boxed: grants are large beside the
    /// other variant.
    Contained(Box<Grants>),
    /// With the user's full rights (`unsandboxed = true` in the file).
    Unsandboxed,
}

impl CommandSandbox {
    /// Whether it runs with the user's full rights.
    pub fn is_unsandboxed(&self) -> bool {
        matches!(self, Self::Unsandboxed)
    }
}

/// Where in a task's life a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookPoint {
    /// Before each attempt; a failing hook fails the task (no retry).
    PreTask,
    /// After each successful attempt (or loop iteration), once its outputs
    /// are checked; a failing hook fails the attempt, which is retried.
    PostTask,
    /// Once the task has failed for good (after its retries).
    OnFailure,
    /// When a task's loop ends, by its condition or its iteration limit.
    OnLoopExit,
}

impl HookPoint {
    /// Every point, in the order of a task's life.
    pub const ALL: [HookPoint; 4] = [
        Self::PreTask,
        Self::PostTask,
        Self::OnFailure,
        Self::OnLoopExit,
    ];

    /// Its name in files, events and `MOAT_HOOK`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreTask => "pre-task",
            Self::PostTask => "post-task",
            Self::OnFailure => "on-failure",
            Self::OnLoopExit => "on-loop-exit",
        }
    }

    /// The point named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|point| point.as_str() == name)
    }
}

impl Workflow {
    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|task| task.id == id)
    }

    /// The hooks and loop checks that run with the user's full rights
    /// (`unsandboxed = true`), each as its place in the file and its
    /// command: what `validate`, `status` and every run say.
    pub fn unsandboxed(&self) -> Vec<String> {
        let hooks = self
            .hooks
            .iter()
            .enumerate()
            .filter(|(_, hook)| hook.sandbox.is_unsandboxed())
            .map(|(index, hook)| format!("hook[{index}] `{}`", hook.command));
        let checks = self.tasks.iter().filter_map(|task| match &task.repeat {
            Some(Loop {
                until: Until::Command(command, sandbox),
                ..
            }) if sandbox.is_unsandboxed() => {
                Some(format!("task {}'s loop check `{command}`", task.id))
            }
            _ => None,
        });
        hooks.chain(checks).collect()
    }
}
