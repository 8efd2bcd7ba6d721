//! moat's workflows: a DAG of agent tasks, each a sandboxed, recorded,
//! cancellable moat run, dispatched in parallel where the graph allows,
//! persisted after every transition and resumable after a crash.
//!
//! - [`definition`]: the workflow file, checked before anything runs;
//! - [`graph`]: the DAG's order, cycles and pictures;
//! - [`engine`]: dispatch, failure, cancel and resume over a
//!   [`TaskRunner`] (moat's runs in production, [`MockRunner`] in tests);
//! - [`context`]: how each task's prompt is assembled;
//! - [`handover`]: what a task leaves for the ones after it;
//! - [`hooks`]: commands and callbacks at fixed points of a task's life;
//! - [`launched`]: the runner that launches each attempt as a moat run;
//! - [`started`]: a workflow started, wherever from: its record, budget,
//!   span and end;
//! - [`state`]: the state file.
//!
//! docs/workflows.md is the user's guide.

pub mod context;
pub mod definition;
pub mod engine;
pub mod events;
mod followed;
pub mod graph;
pub mod handover;
pub mod hooks;
pub mod launched;
pub mod mock;
mod model;
mod project;
pub mod runner;
pub mod started;
pub mod state;
mod step;
pub mod template;

pub use definition::{DefinitionError, Task, Workflow, load};
pub use engine::{Engine, Opened, Settings, Start, Summary, WorkflowError};
pub use events::WorkflowEvent;
pub use hooks::{Hook, HookEvent, HookPoint, Hooks};
pub use launched::LaunchRunner;
pub use mock::{MockRunner, Scripted};
pub use runner::{
    AttemptStatus, NotRecorded, Reattach, RunNotice, TaskDispatch, TaskReport, TaskRunner,
};
pub use started::{
    DEFAULT_PARALLEL, Finished, StartError, Starter, WORKFLOW_ADAPTER, WorkflowLaunch, parallelism,
    status_of,
};
pub use state::{State, TaskStatus, WorkflowStatus};
pub use step::Emit;
