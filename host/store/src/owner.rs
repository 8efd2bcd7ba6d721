//! Which moat process owns a run, and whether it is still there: a lease
//! that dies with the process. Each process that opens the store holds an
//! exclusive `flock` on a file of its own (`<store>.owners/<owner>.lock`)
//! for as long as it runs; the kernel releases it when the process ends,
//! however it ends (even `kill -9`). Another process that can take the lock
//! knows the owner is gone — a pid alone could have been reused.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// This process's lease.
#[derive(Debug)]
pub(crate) struct Owner {
    id: String,
    path: PathBuf,
    /// Held open (and locked) for the lease's life.
    _file: File,
}

impl Owner {
    /// Takes a fresh lease in `dir`.
    pub(crate) fn take(dir: &Path) -> std::io::Result<Self> {
        crate::private::create_dir(dir)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(format!("{id}.lock"));
        // Locked before it appears under its name: another process must
        // never find the lease unlocked and take its owner for gone.
        let staging = dir.join(format!("{id}.new"));
        let file = File::create(&staging)?;
        if !try_lock(&file)? {
            return Err(std::io::Error::other("a fresh lease is already locked"));
        }
        std::fs::rename(&staging, &path)?;
        Ok(Self {
            id,
            path,
            _file: file,
        })
    }

    /// The lease's id, stored on every run this process owns.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether the owner `id` (a lease in `dir`) still holds its lease. A lease
/// found abandoned is removed.
pub(crate) fn is_alive(dir: &Path, id: &str) -> bool {
    // An id is hex (see `take`); anything else names no lease file.
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let path = dir.join(format!("{id}.lock"));
    let Ok(file) = File::options().read(true).write(true).open(&path) else {
        return false;
    };
    match try_lock(&file) {
        Ok(true) => {
            let _ = std::fs::remove_file(&path);
            false
        }
        Ok(false) => true,
        // Cannot tell: assume alive rather than fail someone's run.
        Err(_) => true,
    }
}

/// Takes an exclusive lock on `file` if no one holds one: `Ok(false)` when
/// someone does.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor we own.
    let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if result == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_alive_while_held_and_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let owner = Owner::take(dir.path()).unwrap();
        let id = owner.id().to_owned();
        assert!(is_alive(dir.path(), &id));
        drop(owner);
        assert!(!is_alive(dir.path(), &id));
        assert!(!is_alive(dir.path(), "../etc"));
    }
}
