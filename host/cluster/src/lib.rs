//! moat past one machine: the same run, await, cancel and subscribe
//! operations as the local store, over a NATS JetStream cluster whose
//! `moat worker`s execute the runs.
//!
//! - Submitted runs go on a work-queue stream (`moat.runs`); each worker
//!   pulls at most `--max-runs` at a time, claims a run by a compare-and-set
//!   on its record (so no run executes twice at once) and acknowledges its
//!   message once the run's `done` is published.
//! - Run records live in a key-value bucket (`moat-runs`) with the local
//!   store's fields and status machine; every run's events in a stream, on
//!   `moat.events.<run-id>`, so late subscribers replay them.
//! - Workers beat into a bucket whose entries expire; a run whose worker
//!   stopped beating fails `worker lost` with one `done` (or is queued
//!   again when its job allows), whoever notices first.
//! - Components travel by SHA-256 through an object store; built-ins by
//!   name. A run with a workspace gets its project the same way (a git
//!   bundle of its files at the base), and its worker sends back its
//!   changes (a diff) before the run's `done`.
//! - A job's grants must lie within the worker's ceiling; the binary's
//!   [`Executor`] checks them and runs the job in the local sandbox.
//!
//! Every name in JetStream is in [`layout`]; connection settings and
//! credentials in [`settings`].

mod book;
mod cluster;
mod error;
mod events;
pub mod layout;
mod record;
mod runs;
pub mod settings;
mod worker;

pub use cluster::Cluster;
pub use cluster::objects::{MAX_CHANGES_BYTES, MAX_COMPONENT_BYTES, MAX_PROJECT_BYTES, hex_sha256};
pub use error::ClusterError;
pub use events::NumberedEvent;
pub use moat_runs::job::{ComponentRef, Job, JobAsk, JobWorkspace, MAX_JOB_BYTES, is_sha256};
pub use moat_runs::workers::{Executor, JobRefusal};
pub use record::{BOUNDARY_VIOLATION, ClusterRun, WORKER_LOST};
pub use settings::{Auth, Settings, Tls};
pub use worker::{HEARTBEAT, WorkerConfig, new_worker_id, run_worker};
