//! One module per subcommand.

mod adapters;
pub(crate) mod cluster;
mod compile;
mod drive;
mod inspect;
mod installed;
mod new;
mod parallel;
pub(crate) mod recording;
mod run;
mod runs;
mod workflow;

pub use adapters::adapters;
pub use compile::compile;
pub use inspect::inspect;
pub use installed::{adapter, without_sandbox as adapter_without_sandbox};
pub use new::new;
pub use parallel::parallel;
pub use run::{run, run_on_cluster};
pub use runs::{cancel, logs, prune, ps, record_json, show, wait};
pub use workflow::{without_sandbox as workflow_without_sandbox, workflow};
