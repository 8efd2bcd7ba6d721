//! The store's schema, versioned with SQLite's `user_version`: each
//! migration takes the database one version up, in one transaction, when
//! the store is opened. A database of a newer version than this binary
//! knows is refused, never altered.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// The migrations, in order: `MIGRATIONS[n]` takes version `n` to `n + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
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
    // 2: events stored in blocks: one row per run and write batch, its
    // events as newline-separated JSON (seqs first_seq..=last_seq), so a
    // batch of thousands of events is a handful of rows; `encoding` says
    // whether it is LZ4-compressed (blocks.rs). `has_done` marks the block
    // that ends with the run's done: one per run.
    "CREATE TABLE event_blocks (
        run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        first_seq INTEGER NOT NULL,
        last_seq  INTEGER NOT NULL,
        has_done  INTEGER NOT NULL CHECK (has_done IN (0, 1)),
        encoding  TEXT NOT NULL CHECK (encoding IN ('ndjson', 'ndjson+lz4')),
        events    BLOB NOT NULL,
        PRIMARY KEY (run_id, first_seq),
        CHECK (last_seq >= first_seq)
    );
    CREATE UNIQUE INDEX one_done_block_per_run ON event_blocks (run_id) WHERE has_done = 1;
    INSERT INTO event_blocks (run_id, first_seq, last_seq, has_done, encoding, events)
        SELECT run_id, seq, seq, kind = 'done', 'ndjson', CAST(event AS BLOB) FROM events;
    DROP TABLE events;",
    // 3: a run's effective trust level, as its admission decided it
    // (NULL for runs recorded before, and for a workflow's own record).
    "ALTER TABLE runs ADD COLUMN trust TEXT
        CHECK (trust IS NULL OR trust IN ('sandbox', 'controlled', 'unrestricted'));",
    // 4: what runs ask for mid-run (approval.rs), each numbered in its run
    // from 1; `answer` is NULL while the request is open, and a `running`
    // run with an open request reads as `waiting` (the runs table's own
    // status is left as it was: a waiting run is still running there, so
    // every moat that reads `running` goes on working).
    "CREATE TABLE approvals (
        run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        number    INTEGER NOT NULL CHECK (number >= 1),
        request   TEXT NOT NULL,
        asked_ms  INTEGER NOT NULL,
        answer    TEXT,
        PRIMARY KEY (run_id, number)
    ) WITHOUT ROWID;
    CREATE INDEX open_approvals ON approvals (run_id) WHERE answer IS NULL;",
    // 5: what a run with a budget (and its children) spent so far, as
    // JSON (`Spent`), written as it spends.
    "ALTER TABLE runs ADD COLUMN spent TEXT;",
    // 6: the part a run plays among its siblings (a workflow's task).
    "ALTER TABLE runs ADD COLUMN role TEXT;",
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
