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
//! 3. it is recorded where it runs ([`Place`]: this machine's store, or a
//!    cluster), its record finished exactly once whatever happens;
//! 4. it runs, its events recorded as they pass ([`Launched`]).
//!
//! Starting a recorded, contained run without the `moat` binary:
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::StreamExt;
//! use moat_launch::{AdapterRef, Ceiling, LaunchSpec, Launcher, Place, Resolver};
//! use moat_runs::Runs;
//! use moat_sandbox::{Sandbox, SandboxConfig};
//! use moat_store::{LocalRuns, Store};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir()?;
//! let store = Arc::new(Store::open(&dir.path().join("moat.db"))?);
//! let runs = LocalRuns::new(store);
//! let sandbox = Sandbox::new(SandboxConfig::default())?;
//! let launcher = Launcher::new(Resolver::new(sandbox), Place::Local(runs.clone()));
//!
//! // The most any run started here may get: nothing but what a built-in
//! // declares it needs.
//! let ceiling = Arc::new(Ceiling::new("this program"));
//! let spec = LaunchSpec::new(AdapterRef::Named("echo".into()), "hello", ceiling);
//! let prepared = launcher.prepare(spec).await?;
//! let id = prepared.id().cloned().expect("recorded");
//! let mut events = launcher.start(prepared);
//! while let Some(event) = events.next().await {
//!     println!("{}", event.type_name());
//! }
//! drop(events);
//! let record = runs.wait(&id).await?;
//! assert_eq!(record.status, moat_runs::RunStatus::Completed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Modules, by what they own:
//! - [`resolve`]: from a name or path to a loaded adapter;
//! - [`admit`] and [`limits`]: the ceiling, admission, and how limits
//!   narrow; [`refusal`]: why a run is refused;
//! - [`spec`]: what a run is launched with; [`launcher`]: preparing,
//!   starting and spawning runs; [`events`]:
//!   their events; recording: their records;
//! - children: the runs a component starts; [`contained`]: programs
//!   that are not runs (a workflow's hooks), contained as a run's are;
//!   [`worker`]: a cluster worker's jobs; [`workspace`]: a run's
//!   workspace, here or on a worker;
//! - [`approvals`]: what a run asks for mid-run (`--ask`), recorded,
//!   answered from anywhere, never past the ceiling; [`spending`] and
//!   metering: budgets, counted as runs spend and narrowed like grants;
//! - traces: each run's OpenTelemetry spans ([`moat_telemetry`]), made
//!   from its events as they pass, wherever it was started from.

pub mod admit;
pub mod approvals;
mod budget;
mod children;
pub mod contained;
mod error;
pub mod events;
pub mod invalid;
pub mod launcher;
pub mod limits;
mod metering;
mod recording;
pub mod refusal;
pub mod request;
pub mod resolve;
pub mod secrets;
pub mod spec;
pub mod spending;
mod traces;
pub mod worker;
pub mod workspace;

pub use admit::{Admission, Asked, Ceiling, MAX_DEPTH, MAX_LIVE_CHILDREN, ParentScope, canonical};
pub use approvals::{ANSWER_EVENT, Ask};
pub use budget::{MemoryBudget, Roots};
pub use error::LaunchError;
pub use events::Launched;
pub use invalid::{Invalid, check_complete};
pub use launcher::{Launcher, Place, Prepared};
pub use limits::{AskedLimits, MAX_COUNT, Timeout};
pub use refusal::{Bound, Refusal};
pub use request::{Dialect, Field, Policy, PolicyEntry, PolicyError, RequestError, RunRequest};
pub use resolve::{ResolveError, Resolved, Resolver, Source, catalog, check_exists};
pub use secrets::{SecretError, SecretStore};
pub use spec::{AdapterRef, LaunchSpec};
pub use spending::Budget;
pub use worker::JobExecutor;
pub use workspace::RunWorkspace;
