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

use rusqlite::Connection;

/// A WAL at least this big is checkpointed.
pub(crate) const WAL_BYTES: u64 = 4 << 20;

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
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        if let Some((wake, thread)) = self.thread.take() {
            drop(wake);
            let _ = thread.join();
        }
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
