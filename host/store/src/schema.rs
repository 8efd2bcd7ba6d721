//! The store's schema, versioned with SQLite's `user_version`: each
//! migration takes the database one version up, in one transaction, when
//! the store is opened. A database of a newer version than this binary
//! knows is refused, never altered.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// The migrations, in order: `MIGRATIONS[n]` takes version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: runs and their events.
    "CREATE TABLE runs (
        id               TEXT PRIMARY KEY,
        parent_id        TEXT,
        adapter          TEXT NOT NULL,
        component_sha256 TEXT NOT NULL,
        prompt           TEXT NOT NULL,
        options          TEXT NOT NULL,
        grants           TEXT NOT NULL,
        limits           TEXT NOT NULL,
        timeout_ms       INTEGER,
        status           TEXT NOT NULL
                         CHECK (status IN ('pending', 'running', 'completed', 'failed')),
        reason           TEXT,
        done             TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        owner            TEXT NOT NULL,
        owner_pid        INTEGER NOT NULL,
        created_ms       INTEGER NOT NULL,
        started_ms       INTEGER,
        ended_ms         INTEGER
    );
    CREATE INDEX runs_by_status ON runs (status);
    CREATE INDEX runs_by_parent ON runs (parent_id);
    CREATE INDEX runs_by_owner ON runs (owner) WHERE status IN ('pending', 'running');
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq    INTEGER NOT NULL,
        kind   TEXT NOT NULL,
        event  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX one_done_per_run ON events (run_id) WHERE kind = 'done';",
];

/// The schema version this binary writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings `conn` to [`VERSION`], or refuses a newer database. Several
/// processes may open a new store at once: the version is read inside a
/// write transaction, so one of them migrates and the others find it done.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version = |conn: &Connection| -> rusqlite::Result<i64> {
        conn.query_row("PRAGMA user_version", [], |row| row.get(0))
    };
    let found = version(conn)?;
    if found > VERSION {
        return Err(StoreError::NewerSchema {
            found,
            known: VERSION,
        });
    }
    if found == VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = version(&tx)?;
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.execute_batch(migration)?;
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
        tracing::info!(version = from + 1, "run store migrated");
    }
    tx.commit()?;
    Ok(())
}
