//! The process groups of one run's children, reachable from any thread:
//! the abort signals them from the engine's side while the guest may be
//! waiting in a host call, and the end of the run kills them.
//!
//! Each child leads its own process group, so a signal reaches whatever it
//! started too (a CLI's shells and tools), not only the child itself.

use std::sync::{Arc, Mutex, PoisonError};

use super::Signal;

/// The number of `signal` on this system.
fn number(signal: Signal) -> libc::c_int {
    match signal {
        Signal::Interrupt => libc::SIGINT,
        Signal::Terminate => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    }
}

/// The live process groups of a run. Cheap to clone; clones share them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildGroups(Arc<Mutex<Vec<u32>>>);

impl ChildGroups {
    /// Records the group led by `pid`.
    pub(crate) fn add(&self, pid: u32) {
        self.lock().push(pid);
    }

    /// Kills the group led by `pid` and forgets it.
    pub(crate) fn kill_and_remove(&self, pid: u32) {
        let mut groups = self.lock();
        if let Some(at) = groups.iter().position(|&g| g == pid) {
            groups.swap_remove(at);
            let _ = signal_group(pid, Signal::Kill);
        }
    }

    /// How many groups are live.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Sends `signal` to the group led by `pid`, if it is one of ours.
    pub(crate) fn signal(&self, pid: u32, signal: Signal) -> std::io::Result<()> {
        if !self.lock().contains(&pid) {
            return Err(std::io::Error::other("the child has been released"));
        }
        signal_group(pid, signal)
    }

    /// Sends `signal` to every group.
    pub(crate) fn signal_all(&self, signal: Signal) {
        for &pid in self.lock().iter() {
            let _ = signal_group(pid, signal);
        }
    }

    /// Kills every group and forgets them.
    pub(crate) fn kill_all(&self) {
        for pid in std::mem::take(&mut *self.lock()) {
            let _ = signal_group(pid, Signal::Kill);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Signals the process group `pgid`. A group that is already gone is not
/// an error: the point is that nothing of it runs.
fn signal_group(pgid: u32, signal: Signal) -> std::io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return Ok(());
    };
    if pgid <= 1 {
        // Never: 0 would be our own group and 1 init's.
        return Ok(());
    }
    // SAFETY: killpg has no memory-safety preconditions.
    let result = unsafe { libc::killpg(pgid, number(signal)) };
    if result == -1 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, "cannot signal a child's process group: {error}");
            return Err(error);
        }
    }
    Ok(())
}
