//! Checkpoints off the write path. SQLite's automatic checkpoint runs
//! inside whichever commit crosses its threshold, so one run's commit
//! would now and then stall for the copy of the whole WAL into the
//! database and its fsync (tens of milliseconds). Every connection turns
//! it off ([`crate::connect`]); instead the writer, after each commit,
//! wakes a thread of its own once the WAL file is big, and that thread
//! checkpoints passively, beside the commits that go on.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

/// A WAL at least this big is checkpointed.
pub(crate) const WAL_BYTES: u64 = 4 << 20;

/// A WAL at least this big when the store closes is checkpointed then and
/// cut to nothing. The process that next opens the store first reads and
/// checksums the whole WAL (SQLite's recovery, ~0.3 ms a MiB here) and
/// counts none of it as checkpointed, so a WAL only ever checkpointed
/// passively by short commands grows by each one's commits (9–60 KiB a
/// `moat run` here) and makes every later one slower. Lower than
/// [`WAL_BYTES`]: the recovery is paid by every command, the checkpoint by
/// one command in tens.
pub(crate) const CLOSE_WAL_BYTES: u64 = 1 << 20;

/// The checkpoint thread's handle; dropping it ends the thread. The thread
/// starts the first time the WAL is big: most moat processes never need
/// one.
pub(crate) struct Checkpointer {
    path: PathBuf,
    wal: PathBuf,
    thread: Option<(SyncSender<()>, JoinHandle<()>)>,
}

impl Checkpointer {
    /// The checkpointer of the store at `path`.
    pub(crate) fn new(path: &Path) -> Self {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        Self {
            path: path.to_path_buf(),
            wal: PathBuf::from(wal),
            thread: None,
        }
    }

    /// After a commit: wakes the thread (starting it the first time) when
    /// the WAL is big and the thread is not at work already.
    pub(crate) fn committed(&mut self) {
        let big = std::fs::metadata(&self.wal).is_ok_and(|m| m.len() >= WAL_BYTES);
        if !big {
            return;
        }
        if self.thread.is_none() {
            let (wake, woken) = sync_channel(1);
            let path = self.path.clone();
            let thread = std::thread::Builder::new()
                .name("moat-store-checkpoint".into())
                .spawn(move || checkpoints(&path, woken));
            match thread {
                Ok(thread) => self.thread = Some((wake, thread)),
                Err(error) => {
                    tracing::warn!("no checkpoint thread: {error}");
                    return;
                }
            }
        }
        if let Some((wake, _)) = &self.thread {
            // Full: a checkpoint is already asked for.
            let _ = wake.try_send(());
        }
    }

    /// The store closes: once the thread is done, a big WAL is
    /// checkpointed on `conn` and truncated, unless another process is
    /// using the store (then that is left to a later close: nobody waits).
    pub(crate) fn close(mut self, conn: &Connection) {
        self.stop();
        let big = std::fs::metadata(&self.wal).is_ok_and(|m| m.len() >= CLOSE_WAL_BYTES);
        if !big {
            return;
        }
        let truncated = conn.busy_timeout(Duration::ZERO).and_then(|()| {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            })
        });
        match truncated {
            Ok(0) => tracing::debug!("the run store's WAL was checkpointed and cut"),
            Ok(_) => tracing::debug!("the run store is in use elsewhere; its WAL stays"),
            Err(error) => tracing::debug!("no checkpoint on close: {error}"),
        }
    }

    fn stop(&mut self) {
        if let Some((wake, thread)) = self.thread.take() {
            drop(wake);
            let _ = thread.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn checkpoints(path: &Path, woken: Receiver<()>) {
    let conn = match crate::connect(path) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::warn!("no checkpoints: {error}");
            return;
        }
    };
    while woken.recv().is_ok() {
        if let Err(error) = checkpoint(&conn) {
            tracing::warn!("a checkpoint of the run store failed: {error}");
        }
    }
}

/// A passive checkpoint: copies what it can without waiting for anyone.
fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}
