//! Where moat keeps things in JetStream: every stream, bucket and subject
//! name, in one place.

/// The work queue of submitted runs (one message per run to execute).
pub const RUNS_STREAM: &str = "MOAT_RUNS";
/// The subject runs are submitted on.
pub const RUNS_SUBJECT: &str = "moat.runs";
/// The durable consumer every worker pulls runs from (one queue, shared).
pub const WORKERS_CONSUMER: &str = "moat-workers";
/// Every run's events, each run on a subject of its own.
pub const EVENTS_STREAM: &str = "MOAT_EVENTS";
/// Run records, keyed by run id: the local store's fields and statuses.
pub const RECORDS_BUCKET: &str = "moat-runs";
/// The runs executing now, keyed by run id, valued by the worker's id:
/// what the search for lost workers reads.
pub const LIVE_BUCKET: &str = "moat-live";
/// Workers' heartbeats, keyed by worker id; an entry expires when its
/// worker stops beating (the bucket's max age is the worker timeout).
pub const WORKERS_BUCKET: &str = "moat-workers";
/// Components, keyed by their SHA-256.
pub const COMPONENTS_BUCKET: &str = "moat-components";
/// Workspaces: projects (git bundles) keyed by their SHA-256, and runs'
/// changes keyed `RUN.diff`.
pub const WORKSPACES_BUCKET: &str = "moat-workspaces";
/// Header carrying the number (in its run) of a message's first event.
pub const SEQ_HEADER: &str = "Moat-Seq";
/// Header carrying how many events a message holds (one per line).
pub const COUNT_HEADER: &str = "Moat-Count";

/// The subject of run `id`'s events.
pub fn events_subject(id: &str) -> String {
    format!("moat.events.{id}")
}

/// Every run's events.
pub const EVENTS_SUBJECTS: &str = "moat.events.>";

/// The subject a cancel of run `id` is published on.
pub fn cancel_subject(id: &str) -> String {
    format!("moat.cancel.{id}")
}

/// Every cancel, as a worker listens for them.
pub const CANCEL_SUBJECTS: &str = "moat.cancel.*";

/// A run id safe in a subject and a key: moat's own ids are
/// (`r_` and base32), anything else read from outside is refused.
pub fn is_run_id(text: &str) -> bool {
    moat_runs::RunId::parse(text).is_some()
}
