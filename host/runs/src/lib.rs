//! moat's words for runs, shared by every place runs live and every
//! caller that reads them: [`RunId`], [`RunStatus`] and [`FailReason`],
//! what a run is started with ([`NewRun`]) and its [`RunRecord`], and the
//! [`Runs`] and [`RunBook`] traits that this machine's store (`moat-store`) and a NATS
//! JetStream cluster (`moat-cluster`) both implement. Commands, the
//! protocol server and workflows are written once against [`Runs`];
//! `--nats` only decides which one they are given.
//!
//! - [`approval`]: what a run asks for mid-run, and the answers;
//! - [`id`]: run ids, unique without coordination and sortable by time;
//! - [`status`]: a run's life (`pending → running ⇄ waiting → completed | failed`)
//!   and how it ended;
//! - [`record`]: what a run was started with, its record, and filters;
//! - [`limits`]: limits as records keep them;
//! - [`runs`]: the trait, its errors and events;
//! - [`book`]: [`RunBook`], the writes: creating, recording, asking,
//!   answering, ending;
//! - [`workers`] and [`job`]: runs handed to workers elsewhere;
//! - [`result`]: a run's result and other questions asked of any [`Runs`];
//! - [`traffic`]: a run's traffic and its usage, metered and reported;
//! - [`state`]: where moat keeps its files.

pub mod approval;
pub mod book;
pub mod id;
pub mod job;
pub mod limits;
pub mod record;
pub mod result;
pub mod runs;
pub mod state;
pub mod status;
pub mod traffic;
pub mod workers;

pub use approval::{
    ANSWER_POLL, Answer, Approval, ApprovalRequest, MAX_REQUESTS, Requested, pick_open,
};
pub use book::{RunBook, RunLog};
pub use id::{PREFIX as RUN_ID_PREFIX, RunId, SHORT_MIN as SHORT_ID_MIN, short_ids};
pub use job::{ComponentRef, InvalidJob, Job, JobAsk, JobWorkspace, MAX_JOB_BYTES, is_sha256};
pub use limits::{AskedProgramLimits, RecordedLimits, Spent};
pub use record::{NewRun, RunFilter, RunRecord};
pub use result::{check_from, result};
pub use runs::{EventStream, LAST, Runs, RunsError, StoredEvent};
pub use status::{FailReason, Outcome, RunStatus};
pub use traffic::{RunTraffic, UsageCount, traffic};
pub use workers::{Executor, JobRefusal, Workers};
