//! moat's run store: every run is a process record — an id at once, its
//! adapter, prompt, options, grants and limits, a status the host writes
//! (`pending → running → completed | failed`, with a reason) — and its
//! events in order, in one SQLite database (WAL) that every moat process
//! on the machine shares.
//!
//! - Events are written in batches by a thread of their own
//!   ([`writer`](crate::Store::record_event)): a run pays a channel send
//!   per event; a `kill -9` loses at most the batch being written. A run's
//!   record is created, started and ended through the same thread, so
//!   runs that start or end together share a commit
//!   ([`Store::create_run_as_awaiting`], [`Store::finish`]).
//! - A run's terminal status is written once: later attempts change
//!   nothing ([`Store::finish`]). Ending a run ends its live children with
//!   `parent ended`.
//! - Each process holds a lease that dies with it; opening the store fails
//!   the runs of owners that are gone with `engine restart`, and only
//!   those ([`Store::reconcile`]), each given a synthesized `done` so every
//!   ended run has exactly one.
//!
//! ```no_run
//! use moat_runs::{NewRun, Outcome, RecordedLimits, RunStatus};
//! use moat_store::Store;
//! # fn main() -> Result<(), moat_store::StoreError> {
//! let store = Store::open(&Store::default_path().expect("a home directory"))?;
//! let id = store.create_run(&NewRun {
//!     parent: None,
//!     adapter: "echo".into(),
//!     component_sha256: "…".into(),
//!     prompt: "hi".into(),
//!     options: serde_json::json!({}),
//!     grants: Default::default(),
//!     trust: None,
//!     limits: Some(RecordedLimits::of(&Default::default())),
//!     role: None,
//! })?;
//! store.mark_running(&id)?;
//! // store.record_event(&id, seq, &event)? for each event, then:
//! store.finish(&id, &Outcome { status: RunStatus::Completed, reason: None, done: None })?;
//! # Ok(()) }
//! ```

mod approvals;
mod blocks;
mod book;
mod checkpoint;
mod error;
mod live;
mod local;
mod owner;
pub mod private;
mod recorder;
mod schema;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use moat_engine::AgentEvent;
use moat_runs::{
    FailReason, NewRun, Outcome, RecordedLimits, RunFilter, RunId, RunRecord, RunStatus,
    StoredEvent,
};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

pub use error::StoreError;
pub use live::{EVENT_BUFFER, LiveRun, LiveRuns, Publisher};
pub use local::LocalRuns;
pub use recorder::Recorder;
pub use schema::VERSION as SCHEMA_VERSION;

use owner::Owner;
use writer::Writer;

/// How long a query waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why `dir` cannot be written, when it cannot (e.g. "Read-only file
/// system"): a file is made there and removed again.
fn unwritable(dir: &Path) -> Option<String> {
    let probe = dir.join(format!(".moat-write-check-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(error) => Some(error.to_string()),
    }
}

/// The run store of this process: the database, its writer thread and this
/// process's lease.
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
    writer: Writer,
    owner: Owner,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

pub use moat_runs::state::{state_dir, state_file};

impl Store {
    /// `$MOAT_STORE`, else `$XDG_STATE_HOME/moat/moat.db`, else
    /// `~/.local/state/moat/moat.db`.
    pub fn default_path() -> Option<PathBuf> {
        state_file("MOAT_STORE", "moat.db")
    }

    /// Opens (creating, migrating) the store at `path`, takes this
    /// process's lease and fails the runs of owners that are gone.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let open_error = |reason: String| StoreError::Open {
            path: path.to_path_buf(),
            reason,
        };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            private::create_dir(dir).map_err(|e| open_error(e.to_string()))?;
        }
        // A new database is this user's alone from the start (SQLite gives
        // its WAL and shared memory the database's mode).
        private::create_file(path).map_err(|e| open_error(e.to_string()))?;
        // SQLite may say only "unable to open database file" where the
        // directory cannot be written: the OS's words say why.
        let explained = |error: StoreError| match dir.and_then(unwritable) {
            Some(reason) => open_error(reason),
            None => error,
        };
        let mut conn = connect(path).map_err(explained)?;
        schema::migrate(&mut conn).map_err(|error| match error {
            StoreError::NewerSchema { .. } => error,
            other => explained(open_error(other.to_string())),
        })?;
        // A store an older moat left readable by others, once it is known
        // to be a store.
        narrow_store(path, dir).map_err(|e| open_error(e.to_string()))?;
        let owner = Owner::take(&owners_dir(path)).map_err(|e| open_error(e.to_string()))?;
        let writer = Writer::start(path)?;
        let store = Self {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            writer,
            owner,
        };
        // A store that cannot be written now (a full disk) can still be
        // read: the runs of owners that are gone are failed next time.
        if let Err(error) = store.reconcile() {
            tracing::warn!("the runs of moats that are gone stay as they are for now: {error}");
        }
        Ok(store)
    }

    /// Where the store is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a run, `pending`, owned by this process: its id.
    pub fn create_run(&self, run: &NewRun) -> Result<RunId, StoreError> {
        self.create_run_as(RunId::new(), run)
    }

    /// Records a run under `id`, chosen by the caller (who may have
    /// written it down before the run existed): as [`Store::create_run`].
    /// An id recorded already is refused.
    pub fn create_run_as(&self, id: RunId, run: &NewRun) -> Result<RunId, StoreError> {
        self.writer.change(self.insert_run(&id, run))??;
        Ok(id)
    }

    /// [`Store::create_run_as`] without blocking the thread: runs created
    /// together (a server asked for many at once) share one commit.
    pub async fn create_run_as_awaiting(
        &self,
        id: RunId,
        run: &NewRun,
    ) -> Result<RunId, StoreError> {
        self.writer
            .change_awaiting(self.insert_run(&id, run))
            .await??;
        Ok(id)
    }

    /// The change that records `run` as `id`, `pending`, owned by this
    /// process.
    fn insert_run(&self, id: &RunId, run: &NewRun) -> writer::Apply {
        let (id, run) = (id.clone(), run.clone());
        let (owner, created_ms) = (self.owner.id().to_owned(), now_ms());
        Box::new(move |conn| {
            // With a parent, its status is read and the child written in
            // one transaction (under the write lock): a parent never ends
            // between the two unnoticed.
            if let Some(parent) = &run.parent {
                let status: Option<String> = query_row(
                    conn,
                    "SELECT status FROM runs WHERE id = ?1",
                    [parent.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
                match status.as_deref() {
                    None => return Err(StoreError::NotFound(parent.to_string())),
                    Some("pending" | "running") => {}
                    Some(_) => return Err(StoreError::ParentEnded(parent.clone())),
                }
            }
            let limits = match &run.limits {
                Some(limits) => serde_json::to_string(limits).expect("limits are plain data"),
                None => "{}".to_owned(),
            };
            execute(
                conn,
                "INSERT INTO runs (id, parent_id, adapter, component_sha256, prompt, options, grants,
                                   limits, timeout_ms, trust, status, owner, owner_pid, created_ms, role)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', ?11, ?12, ?13, ?14)",
                params![
                    id.as_str(),
                    run.parent.as_ref().map(RunId::as_str),
                    run.adapter,
                    run.component_sha256,
                    run.prompt,
                    run.options.to_string(),
                    serde_json::to_string(&run.grants).expect("grants are plain data"),
                    limits,
                    run.timeout_ms().map(|ms| ms as i64),
                    run.trust.map(|trust| trust.as_str()),
                    owner,
                    std::process::id(),
                    created_ms as i64,
                    run.role,
                ],
            )
            .map_err(write_error)?;
            Ok(true)
        })
    }

    /// `pending → running`, when its adapter starts. A run already ended
    /// (cancelled before it started) stays ended: `Ok(false)`.
    pub fn mark_running(&self, id: &RunId) -> Result<bool, StoreError> {
        set_running(&self.conn(), id.as_str(), now_ms())
    }

    /// [`Store::mark_running`] without waiting for the commit: the writer
    /// commits it at once, with whatever else is queued (other runs
    /// starting, events), and the record says `running` from now.
    pub fn mark_running_unwaited(&self, id: &RunId) -> Result<(), StoreError> {
        let (id, started) = (id.as_str().to_owned(), now_ms());
        self.writer
            .change_unwaited(Box::new(move |conn| set_running(conn, &id, started)))
    }

    /// Queues the run's event number `seq` (from 0, in order) for the next
    /// batch. An error once writing has failed: the caller must end the
    /// run rather than lose events silently.
    pub fn record_event(&self, id: &RunId, seq: u64, event: &AgentEvent) -> Result<(), StoreError> {
        self.writer.event(&id.as_str().into(), seq, event)
    }

    /// Waits until every queued event is in the database.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.writer.flush()
    }

    /// Ends the run as `outcome` says, after its queued events are stored;
    /// then ends its live children with `parent ended`. Only the first end
    /// counts: `Ok(false)` when it had ended already.
    ///
    /// When its events could not all be stored, it ends failed with `store
    /// error` instead (if the store takes even that), and the write error
    /// is returned.
    ///
    /// The end is made in the transaction of the run's last events (and of
    /// other runs' ends queued meanwhile): one commit.
    pub fn finish(&self, id: &RunId, outcome: &Outcome) -> Result<bool, StoreError> {
        let ending = {
            let (id, outcome) = (id.as_str().to_owned(), outcome.clone());
            Box::new(move |conn: &Connection| end_owned(conn, &id, &outcome))
        };
        match self.writer.change(ending) {
            Ok(ended) => ended,
            Err(unwritten) => {
                let unrecorded = Outcome {
                    status: RunStatus::Failed,
                    reason: Some(FailReason::StoreError),
                    done: None,
                };
                let _ = self.end(id, &unrecorded);
                Err(unwritten)
            }
        }
    }

    fn end(&self, id: &RunId, outcome: &Outcome) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(write_error)?;
        let changed = end_owned(&tx, id.as_str(), outcome)?;
        tx.commit().map_err(write_error)?;
        Ok(changed)
    }

    /// Records what run `id` (with its children) has spent so far.
    pub fn set_spent(&self, id: &RunId, spent: &moat_runs::Spent) -> Result<(), StoreError> {
        execute(
            &self.conn(),
            "UPDATE runs SET spent = ?2 WHERE id = ?1",
            params![
                id.as_str(),
                serde_json::to_string(spent).expect("spending is plain data")
            ],
        )
        .map_err(write_error)?;
        Ok(())
    }

    /// Asks the moat that owns the run to cancel it (it polls
    /// [`Store::cancels_requested`]). Idempotent: a run that ended, was
    /// already asked, or does not exist needs nothing more.
    pub fn request_cancel(&self, id: &RunId) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE runs SET cancel_requested = 1
                 WHERE id = ?1 AND status IN ('pending', 'running')",
                [id.as_str()],
            )
            .map_err(write_error)?;
        Ok(())
    }

    /// This process's runs to stop, until it ends them
    /// ([`Store::finish`]): those someone asked to cancel, and those the
    /// store ended from outside (their parent ended), which [`cascade`]
    /// marks the same way.
    pub fn cancels_requested(&self) -> Result<Vec<RunId>, StoreError> {
        let conn = self.conn();
        let mut query =
            conn.prepare_cached("SELECT id FROM runs WHERE owner = ?1 AND cancel_requested = 1")?;
        let ids: Vec<String> = query
            .query_map([self.owner.id()], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids.iter().filter_map(|id| RunId::parse(id)).collect())
    }

    /// The run with this id.
    pub fn get(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let conn = self.conn();
        let record = query_row(
            &conn,
            &format!("SELECT {COLUMNS} FROM runs WHERE id = ?1"),
            [id.as_str()],
            record,
        )
        .optional()?;
        Ok(record)
    }

    /// The run whose id is `text` or starts with it (a prefix long enough
    /// to name one run, like git's).
    pub fn resolve(&self, text: &str) -> Result<RunId, StoreError> {
        let text = text.trim();
        let escaped: String = text
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if escaped.len() != text.len() || text.is_empty() {
            return Err(StoreError::NotFound(text.to_owned()));
        }
        let conn = self.conn();
        let mut query =
            conn.prepare_cached("SELECT id FROM runs WHERE id >= ?1 AND id < ?2 LIMIT 2")?;
        // Every id starting with `text` sorts in [text, text + '~').
        let ids: Vec<String> = query
            .query_map(params![text, format!("{text}~")], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        match ids.as_slice() {
            [one] => RunId::parse(one).ok_or_else(|| StoreError::NotFound(text.to_owned())),
            [] => Err(StoreError::NotFound(text.to_owned())),
            _ => {
                let count: i64 = conn.query_row(
                    "SELECT count(*) FROM runs WHERE id >= ?1 AND id < ?2",
                    params![text, format!("{text}~")],
                    |row| row.get(0),
                )?;
                let mut query = conn.prepare(
                    "SELECT id FROM runs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3",
                )?;
                let candidates: Vec<String> = query
                    .query_map(
                        params![text, format!("{text}~"), AMBIGUOUS_SHOWN as i64],
                        |row| row.get(0),
                    )?
                    .collect::<Result<_, _>>()?;
                Err(StoreError::Ambiguous {
                    prefix: text.to_owned(),
                    count: count as usize,
                    candidates: candidates
                        .iter()
                        .filter_map(|id| RunId::parse(id))
                        .collect(),
                })
            }
        }
    }

    /// Runs as `filter` says, newest first.
    pub fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        // Only the filters given, so SQLite can use the indexes (by
        // status, by parent) for them.
        let mut conditions = Vec::new();
        let mut values: Vec<(&str, &dyn rusqlite::ToSql)> = Vec::new();
        if !filter.statuses.is_empty() {
            // The statuses' own names: nothing a caller typed. A waiting
            // run is `pending` or `running` in its row: the row's status
            // narrows first (by its index), the open requests then tell
            // them apart.
            let stored = |status: RunStatus| match status {
                RunStatus::Waiting => vec![RunStatus::Pending, RunStatus::Running],
                other => vec![other],
            };
            let mut names: Vec<String> = filter
                .statuses
                .iter()
                .flat_map(|s| stored(*s))
                .map(|s| format!("'{}'", s.as_str()))
                .collect();
            names.sort();
            names.dedup();
            conditions.push(format!("status IN ({})", names.join(", ")));
            let open =
                "EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = runs.id AND a.answer IS NULL)";
            let waits = format!("(status IN ('pending', 'running') AND {open})");
            let waiting = filter.statuses.contains(&RunStatus::Waiting);
            // A row that waits is listed as waiting only; one that does
            // not, as its own status only.
            conditions.push(if waiting {
                let others: Vec<String> = filter
                    .statuses
                    .iter()
                    .filter(|s| **s != RunStatus::Waiting)
                    .map(|s| format!("'{}'", s.as_str()))
                    .collect();
                if others.is_empty() {
                    waits
                } else {
                    format!("({waits} OR status IN ({}))", others.join(", "))
                }
            } else {
                format!("NOT {waits}")
            });
        }
        if let Some(adapter) = &filter.adapter {
            conditions.push("adapter = :adapter".to_owned());
            values.push((":adapter", adapter));
        }
        let parent = filter.parent.as_ref().map(RunId::as_str);
        if let Some(parent) = &parent {
            conditions.push("parent_id = :parent".to_owned());
            values.push((":parent", parent));
        }
        let condition = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let limit = filter.limit.map_or(-1, |n| n as i64);
        values.push((":limit", &limit));
        let mut query = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM runs {condition} ORDER BY id DESC LIMIT :limit"
        ))?;
        let records = query
            .query_map(values.as_slice(), record)?
            .collect::<Result<_, _>>()?;
        Ok(records)
    }

    /// The run's stored events from number `from` on, in order.
    pub fn events(&self, id: &RunId, from: u64) -> Result<Vec<(u64, AgentEvent)>, StoreError> {
        let mut events = Vec::new();
        self.each_stored(
            id,
            from,
            Take::AtMost(usize::MAX),
            |seq, json| match AgentEvent::from_json(json) {
                Ok(event) => events.push((seq, event)),
                Err(error) => {
                    tracing::warn!(run = %id, seq, "a stored event does not parse: {error}")
                }
            },
        )?;
        Ok(events)
    }

    /// At most `max` of the run's stored events from number `from` on, in
    /// order, as the JSON they were stored as (each checked to be a JSON
    /// object with a `type`, and that type): for a reader that passes them
    /// on without needing them parsed, a page at a time.
    pub fn event_lines(
        &self,
        id: &RunId,
        from: u64,
        max: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.stored_lines(id, from, Take::AtMost(max))
    }

    /// A page of the run's stored events from number `from` on, as
    /// [`event_lines`](Self::event_lines) reads them, but ending where a
    /// stored block ends: whole blocks until at least `at_least` events
    /// (fewer only at the end of what is stored). A replay a page at a time
    /// then reads each block once — a page that ended inside one would
    /// decode it again for the next — and holds at most `at_least` events
    /// and one block (a block is one commit of the writer, a few hundred
    /// KiB at most, however many events that is).
    pub fn event_page(
        &self,
        id: &RunId,
        from: u64,
        at_least: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.stored_lines(id, from, Take::WholeBlocks(at_least))
    }

    fn stored_lines(
        &self,
        id: &RunId,
        from: u64,
        take: Take,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        /// Only the `type` of an event, read without building the rest.
        #[derive(serde::Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        let mut lines = Vec::new();
        self.each_stored(id, from, take, |seq, json| {
            match serde_json::from_slice::<Kind<'_>>(json) {
                Ok(Kind { kind }) => lines.push(StoredEvent {
                    seq,
                    done: kind == "done",
                    json: String::from_utf8_lossy(json).into(),
                }),
                Err(error) => {
                    tracing::warn!(run = %id, seq, "a stored event does not parse: {error}")
                }
            }
        })?;
        Ok(lines)
    }

    /// Calls `each` with the number and JSON of the run's stored events
    /// from number `from` on, in order, as many as `take` says.
    fn each_stored(
        &self,
        id: &RunId,
        from: u64,
        take: Take,
        mut each: impl FnMut(u64, &[u8]),
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        // From the block holding `from` (the last to begin at or before
        // it): found through the primary key, as are the blocks after it,
        // not by reading every earlier block of the run.
        let mut query = conn.prepare_cached(
            "SELECT first_seq, encoding, events FROM event_blocks
             WHERE run_id = ?1 AND last_seq >= ?2 AND first_seq >= coalesce(
                 (SELECT max(first_seq) FROM event_blocks WHERE run_id = ?1 AND first_seq <= ?2),
                 0)
             ORDER BY first_seq",
        )?;
        let rows = query.query_map(params![id.as_str(), from as i64], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get(2)?))
        })?;
        let mut taken = 0;
        for row in rows {
            if let Take::WholeBlocks(at_least) = take
                && taken >= at_least
            {
                return Ok(());
            }
            let (first, encoding, stored) = row?;
            let block = match blocks::decode(&encoding, stored) {
                Ok(block) => block,
                Err(error) => {
                    tracing::warn!(run = %id, first, "a stored block cannot be read: {error}");
                    continue;
                }
            };
            for (seq, json) in (first as u64..).zip(block.split(|&byte| byte == b'\n')) {
                if seq < from {
                    continue;
                }
                if let Take::AtMost(max) = take
                    && taken == max
                {
                    return Ok(());
                }
                each(seq, json);
                taken += 1;
            }
        }
        Ok(())
    }

    /// Removes ended runs (and their events) that ended before `age` ago;
    /// how many.
    pub fn prune(&self, age: Duration) -> Result<usize, StoreError> {
        let before = now_ms().saturating_sub(age.as_millis() as u64) as i64;
        let conn = self.conn();
        conn.execute("PRAGMA foreign_keys = ON", [])?;
        let removed = conn
            .execute(
                "DELETE FROM runs WHERE status IN ('completed', 'failed') AND ended_ms < ?1",
                [before],
            )
            .map_err(write_error)?;
        Ok(removed)
    }

    /// Fails every live run whose owner is gone (`engine restart`), with a
    /// synthesized `done` each, and their live children (`parent ended`):
    /// the runs that failed.
    pub fn reconcile(&self) -> Result<Vec<RunId>, StoreError> {
        let owners: Vec<String> = {
            let conn = self.conn();
            let mut query = conn.prepare(
                "SELECT DISTINCT owner FROM runs WHERE status IN ('pending', 'running')",
            )?;
            query
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        let dir = owners_dir(&self.path);
        let gone: Vec<String> = owners
            .into_iter()
            .filter(|owner| owner != self.owner.id() && !owner::is_alive(&dir, owner))
            .collect();
        let mut failed = Vec::new();
        for owner in gone {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(write_error)?;
            let ids: Vec<String> = {
                let mut query = tx.prepare(
                    "SELECT id FROM runs WHERE owner = ?1 AND status IN ('pending', 'running')",
                )?;
                query
                    .query_map([&owner], |row| row.get(0))?
                    .collect::<Result<_, _>>()?
            };
            for id in &ids {
                let outcome = Outcome {
                    status: RunStatus::Failed,
                    reason: Some(FailReason::EngineRestart),
                    done: None,
                };
                if end_run(&tx, id, &outcome)? {
                    cascade(&tx, id)?;
                    failed.extend(RunId::parse(id));
                }
            }
            tx.commit().map_err(write_error)?;
            if !ids.is_empty() {
                // Not a warning: any moat command may be the one that
                // notices, and `moat ps` shows these runs as failed.
                tracing::info!(
                    owner,
                    runs = ids.len(),
                    "runs of a moat that is gone failed: engine restart"
                );
            }
        }
        Ok(failed)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `sql` with `params` through the connection's statement cache:
/// what a store that records many runs does for each is parsed once.
fn execute(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// [`execute`]'s query of one row.
fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, row)
}

/// The columns [`record`] reads, in its order.
const COLUMNS: &str = concat!(
    "id, parent_id, adapter, component_sha256, prompt, options, grants, limits, trust, ",
    // A live run with an open request waits: its row may still say
    // `pending` when the request was recorded before the writer committed
    // its start (`mark_running_unwaited`).
    "CASE WHEN status IN ('pending', 'running') AND EXISTS (SELECT 1 FROM approvals a ",
    "WHERE a.run_id = runs.id AND a.answer IS NULL) THEN 'waiting' ELSE status END, ",
    "reason, done, owner_pid, created_ms, started_ms, ended_ms, spent, role"
);

/// How many runs an ambiguous prefix's error names.
const AMBIGUOUS_SHOWN: usize = 5;

fn record(row: &Row<'_>) -> rusqlite::Result<RunRecord> {
    let text = |index: usize| -> rusqlite::Result<String> { row.get(index) };
    let id: String = row.get(0)?;
    let status: String = row.get(9)?;
    let done: Option<String> = row.get(11)?;
    // What bounds its children is read strictly: a field that is there and
    // does not read is named, never taken for "none recorded".
    let mut unreadable = Vec::new();
    let grants = serde_json::from_str(&text(6)?).unwrap_or_else(|_| {
        unreadable.push("grants");
        moat_grants::Grants::default()
    });
    let stored_limits = text(7)?;
    let limits = serde_json::from_str::<RecordedLimits>(&stored_limits)
        // `{}`: recorded without limits (a workflow's record).
        .map_err(|_| {
            if stored_limits != "{}" {
                unreadable.push("limits");
            }
        })
        .ok();
    let trust = row.get::<_, Option<String>>(8)?.and_then(|trust| {
        serde_json::from_value(serde_json::Value::String(trust))
            .map_err(|_| unreadable.push("trust"))
            .ok()
    });
    let spent = row.get::<_, Option<String>>(16)?.and_then(|text| {
        serde_json::from_str(&text)
            .map_err(|_| unreadable.push("spent"))
            .ok()
    });
    Ok(RunRecord {
        id: RunId::parse(&id).unwrap_or_default(),
        run: NewRun {
            parent: row
                .get::<_, Option<String>>(1)?
                .and_then(|parent| RunId::parse(&parent)),
            adapter: row.get(2)?,
            component_sha256: row.get(3)?,
            prompt: row.get(4)?,
            options: serde_json::from_str(&text(5)?).unwrap_or(serde_json::Value::Null),
            grants,
            limits,
            trust,
            role: row.get(17)?,
        },
        status: status.parse().unwrap_or(RunStatus::Failed),
        reason: row
            .get::<_, Option<String>>(10)?
            .map(|reason| FailReason::from_stored(&reason)),
        done: done.and_then(|text| serde_json::from_str(&text).ok()),
        owner_pid: row.get::<_, i64>(12)? as u32,
        worker: None,
        created_ms: row.get::<_, i64>(13)? as u64,
        started_ms: row.get::<_, Option<i64>>(14)?.map(|ms| ms as u64),
        ended_ms: row.get::<_, Option<i64>>(15)?.map(|ms| ms as u64),
        spent,
        unreadable,
    })
}

/// `pending → running` of run `id`, started at `started_ms`: whether it
/// was pending (a run ended before it started stays ended).
fn set_running(conn: &Connection, id: &str, started_ms: u64) -> Result<bool, StoreError> {
    let changed = execute(
        conn,
        "UPDATE runs SET status = 'running', started_ms = ?2
         WHERE id = ?1 AND status = 'pending'",
        params![id, started_ms as i64],
    )
    .map_err(write_error)?;
    Ok(changed == 1)
}

/// Ends run `id` by its owner, as `outcome` says, with its live children
/// (inside the caller's transaction): whether this ended it.
fn end_owned(conn: &Connection, id: &str, outcome: &Outcome) -> Result<bool, StoreError> {
    let changed = end_run(conn, id, outcome)?;
    if changed {
        cascade(conn, id)?;
    }
    // Its owner has stopped it: nothing is left to ask of it.
    execute(
        conn,
        "UPDATE runs SET cancel_requested = 0 WHERE id = ?1",
        [id],
    )
    .map_err(write_error)?;
    Ok(changed)
}

/// Writes the run's terminal status if it has none yet; when it ended
/// without a stored `done` (its owner died, or it was ended from outside),
/// stores one so every ended run has exactly one.
fn end_run(tx: &Connection, id: &str, outcome: &Outcome) -> Result<bool, StoreError> {
    let changed = execute(
        tx,
        "UPDATE runs SET status = ?2, reason = ?3, done = ?4, ended_ms = ?5
             WHERE id = ?1 AND status IN ('pending', 'running')",
        params![
            id,
            outcome.status.as_str(),
            outcome.reason.as_ref().map(FailReason::as_str),
            outcome.done.as_ref().map(serde_json::Value::to_string),
            now_ms() as i64,
        ],
    )
    .map_err(write_error)?;
    if changed == 0 {
        return Ok(false);
    }
    // Its open requests are closed with it, in the same transaction: a
    // desk closing one as the run stops may come too late (the process
    // exiting, or the run already ended), and an ended run's requests are
    // never left open.
    execute(
        tx,
        "UPDATE approvals SET answer = ?2 WHERE run_id = ?1 AND answer IS NULL",
        params![
            id,
            serde_json::to_string(&moat_runs::Answer::closed()).expect("an answer is plain data")
        ],
    )
    .map_err(write_error)?;
    let has_done: bool = query_row(tx, writer::HAS_DONE, [id], |row| row.get(0))?;
    if !has_done {
        let (next, agent): (i64, String) = tx.query_row(
            "SELECT coalesce((SELECT max(last_seq) + 1 FROM event_blocks WHERE run_id = ?1), 0),
                    (SELECT adapter FROM runs WHERE id = ?1)",
            [id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let event = outcome.synthesized_done(&agent);
        let json = serde_json::to_vec(&event)
            .map_err(|e| StoreError::Write(format!("cannot encode an event: {e}")))?;
        let plain = blocks::Encoding::Plain.as_str();
        tx.execute(
            writer::INSERT_BLOCK,
            params![id, next, next, true, plain, json],
        )
        .map_err(write_error)?;
    }
    Ok(true)
}

/// Ends every live descendant of `parent` with `parent ended`.
fn cascade(tx: &Connection, parent: &str) -> Result<(), StoreError> {
    let children: Vec<String> = {
        let mut query = tx.prepare_cached(
            "SELECT id FROM runs WHERE parent_id = ?1 AND status IN ('pending', 'running')",
        )?;
        query
            .query_map([parent], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    };
    for child in children {
        let outcome = Outcome {
            status: RunStatus::Failed,
            reason: Some(FailReason::ParentEnded),
            done: None,
        };
        if end_run(tx, &child, &outcome)? {
            // Its owner stops it as it would a cancel.
            tx.execute(
                "UPDATE runs SET cancel_requested = 1 WHERE id = ?1",
                [&child],
            )
            .map_err(write_error)?;
            cascade(tx, &child)?;
        }
    }
    Ok(())
}

/// The `done` the store writes for a run that ended without one.
/// A connection to the store at `path`, set up for sharing: WAL, a busy
/// timeout, foreign keys.
pub(crate) fn connect(path: &Path) -> Result<Connection, StoreError> {
    let open_error = |error: rusqlite::Error| StoreError::Open {
        path: path.to_path_buf(),
        reason: error.to_string(),
    };
    let conn = Connection::open(path).map_err(open_error)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
    // Room for every statement a run's record goes through (rusqlite keeps
    // 16), so none is parsed again as others come and go.
    conn.set_prepared_statement_cache_capacity(64);
    use_wal(&conn).map_err(open_error)?;
    // WAL with NORMAL: a crash of the process loses nothing committed; a
    // crash of the machine at most the last transactions.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(open_error)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(open_error)?;
    // No checkpoint inside a commit: the writer has them made on a thread
    // of their own (checkpoint.rs). After a checkpoint the WAL file is cut
    // back, so its size says how much waits to be checkpointed.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(open_error)?;
    conn.pragma_update(None, "journal_size_limit", 0)
        .map_err(open_error)?;
    // Nor when the last connection closes: that would make every short
    // command (a `moat run` of a few events) pay a checkpoint and its
    // syncs on its way out. The WAL stays, as durable as the database;
    // the checkpoint thread cuts it back once it is big, and the writer,
    // closing, once it is past 1 MiB (checkpoint.rs).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .map_err(open_error)?;
    Ok(conn)
}

/// Puts the database in WAL mode (it stays so once set). While another
/// connection has the file open, SQLite refuses the switch of a new
/// database at once, without its busy wait: the first commands of a fresh
/// store, started together, would fail "database is locked". They try
/// again here for as long as any lock is waited for.
fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(error)
                if error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            done => return done,
        }
    }
}

/// Where the leases of the processes using the store at `path` live.
/// Takes from the store at `path` — its database, WAL, shared memory and
/// owners' leases, and moat's own state directory when the store is in it
/// (a directory the user named keeps its mode) — what other users may do
/// with it, saying so in one line.
fn narrow_store(path: &Path, dir: Option<&Path>) -> std::io::Result<()> {
    let mut narrowed = Vec::new();
    if let Some(dir) = dir
        && state_dir().as_deref() == Some(dir)
    {
        narrowed.extend(private::narrow(dir, private::DIR_MODE)?);
    }
    for file in [
        path.to_path_buf(),
        suffixed(path, "-wal"),
        suffixed(path, "-shm"),
    ] {
        narrowed.extend(private::narrow(&file, private::FILE_MODE)?);
    }
    narrowed.extend(private::narrow(&owners_dir(path), private::DIR_MODE)?);
    if !narrowed.is_empty() {
        tracing::warn!(
            "the run store {} was readable by other users ({}): made it this user's alone",
            path.display(),
            narrowed.join(", ")
        );
    }
    Ok(())
}

/// `path` with `suffix` after its file name (`moat.db-wal`).
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn owners_dir(path: &Path) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".owners");
    PathBuf::from(dir)
}

fn write_error(error: rusqlite::Error) -> StoreError {
    StoreError::Write(error.to_string())
}

fn now_ms() -> u64 {
    moat_engine::now_ms()
}

/// How many stored events a read takes.
#[derive(Clone, Copy)]
enum Take {
    /// This many at most.
    AtMost(usize),
    /// Whole blocks, until at least this many.
    WholeBlocks(usize),
}
