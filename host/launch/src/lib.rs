//! moat's one way to start a run. Every path that starts runs — `moat
//! run`, `moat parallel`, `moat serve`, a workflow's tasks, a cluster
//! worker's jobs, and the runs components start themselves — goes
//! through a [`Launcher`], so whatever touches every run is written here
//! once:
//!
//! 1. the adapter is resolved ([`Resolver`]: a built-in, an installed
//!    adapter, or a component file);
//! 2. the run is admitted ([`Ceiling::admit`]): its grants, trust and
//!    limits narrowed by the ceiling of whoever starts it and by its
//!    parent, or refused ([`Refusal`], the same typed refusal on every
//!    path); its granted directories are opened now, and the run reaches
//!    them through these handles only;
//! 3. it is recorded where runs are kept ([`moat_runs::RunBook`]: this
//!    machine's store, or a cluster, whose workers execute it), its record
//!    finished exactly once whatever happens;
//! 4. it runs, its events recorded as they pass ([`Launched`]).
//!
//! The launch layer knows neither the store nor the cluster: it is
//! written against [`moat_runs::RunBook`] and [`moat_runs::Workers`], and
//! whoever makes a [`Launcher`] gives it one (`tests/all/launch/embedding.rs`
//! starts a recorded, contained run this way, without the `moat` binary).
//!
//! Modules, by what they own:
//! - [`resolve`]: from a name or path to a loaded adapter;
//! - [`admit`] and [`limits`]: the ceiling, admission, and how limits
//!   narrow; [`refusal`]: why a run is refused;
//! - [`spec`]: what a run is launched with; [`launcher`]: preparing,
//!   starting and spawning runs; [`events`]:
//!   their events; recording: their records;
//! - children: the runs a component starts (programs that are not runs,
//!   a workflow's hooks, are contained by `moat-contain` directly);
//!   [`worker`]: the jobs of a worker (a cluster's); [`workspace`]: a run's
//!   workspace, here or on a worker;
//! - [`approvals`]: what a run asks for mid-run (`--ask`), recorded,
//!   answered from anywhere, never past the ceiling; [`spending`] and
//!   metering: budgets, counted as runs spend and narrowed like grants;
//! - [`protected`]: files that run code later, put back before a run's
//!   `done` whatever its grants let it write;
//! - traces: each run's OpenTelemetry spans ([`moat_telemetry`]), made
//!   from its events as they pass, wherever it was started from.

pub mod admit;
pub mod approvals;
mod budget;
mod children;
mod error;
pub mod events;
pub mod invalid;
pub mod launcher;
pub mod limits;
mod metering;
pub mod protected;
mod recording;
pub mod refusal;
pub mod request;
pub mod resolve;
pub mod secrets;
pub mod spec;
pub mod spending;
mod traces;
mod traffic;
pub mod worker;
pub mod workspace;

pub use admit::{Admission, Asked, Ceiling, MAX_DEPTH, MAX_LIVE_CHILDREN, ParentScope, canonical};
pub use approvals::{ANSWER_EVENT, Ask};
pub use budget::{MemoryBudget, Roots};
pub use error::LaunchError;
pub use events::Launched;
pub use invalid::{Invalid, check_complete};
pub use launcher::{Launcher, Prepared};
pub use limits::{AskedLimits, MAX_COUNT, Timeout};
pub use refusal::{Bound, Refusal};
pub use request::{Dialect, Field, Policy, PolicyEntry, PolicyError, RequestError, RunRequest};
pub use resolve::{ResolveError, Resolved, Resolver, Source, catalog, check_exists};
pub use secrets::{SecretError, SecretStore};
pub use spec::{AdapterRef, LaunchSpec};
pub use spending::Budget;
pub use worker::JobExecutor;
pub use workspace::RunWorkspace;
