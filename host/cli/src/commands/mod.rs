//! One module per subcommand.

mod adapters;
mod approvals;
mod compile;
mod doctor;
mod drive;
mod help;
mod inspect;
mod installed;
mod new;
mod parallel;
mod prompt;
mod run;
mod runs;
mod secret;
mod serve;
mod ui;
mod worker;
mod workflow;
mod workspace;

pub use adapters::adapters;
pub use approvals::{approve, deny};
pub use compile::compile;
pub use doctor::doctor;
pub use help::{completions, man};
pub use inspect::inspect;
pub use installed::{adapter, without_sandbox as adapter_without_sandbox};
pub use new::new;
pub use parallel::parallel;
pub use run::run;
pub use runs::{cancel, logs, prune, ps, show, wait};
pub use secret::secret;
pub use serve::serve;
pub use ui::ui;
pub use worker::worker;
pub use workflow::{without_sandbox as workflow_without_sandbox, workflow};
pub use workspace::{apply, diff, workspace, workspace_error};
