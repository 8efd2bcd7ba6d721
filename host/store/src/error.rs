//! What can go wrong with the run store.

use std::path::PathBuf;

/// An error of the run store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be opened or created at `path`.
    #[error("cannot open the run store {}: {reason}", path.display())]
    Open {
        /// Where it is.
        path: PathBuf,
        /// Why not (the system's or SQLite's words).
        reason: String,
    },
    /// The database was written by a newer moat.
    #[error(
        "the run store has schema version {found}, newer than this moat knows ({known}); \
         use a newer moat, or another store (--store PATH)"
    )]
    NewerSchema {
        /// Its version.
        found: i64,
        /// The newest this binary knows.
        known: i64,
    },
    /// No run has this id or prefix.
    #[error("no run {0}; `moat ps --all` lists them")]
    NotFound(String),
    /// A child run was asked for under a run that has ended.
    #[error("run {0} has ended; a child run needs a live parent")]
    ParentEnded(moat_runs::RunId),
    /// Several runs start with this prefix.
    #[error("{prefix} names {count} runs; give more of the id")]
    Ambiguous {
        /// What was given.
        prefix: String,
        /// How many runs it matches.
        count: usize,
        /// The first few of them, oldest first.
        candidates: Vec<moat_runs::RunId>,
    },
    /// A request the store will not carry out, in words (a request of a
    /// run that has ended, answered twice).
    #[error("{0}")]
    Refused(String),
    /// Writing failed (disk full, read-only, corrupt): what was being
    /// written is not stored.
    #[error("the run store could not be written: {0}")]
    Write(String),
    /// SQLite refused a query.
    #[error("the run store failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
}
