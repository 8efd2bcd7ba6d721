//! What one run's children started, reachable from any thread: the abort
//! signals it from the engine's side while the guest may be waiting in a
//! host call, and the end of the run kills all of it.
//!
//! Each child leads its own process group, so a signal reaches whatever it
//! started too (a CLI's shells and tools). Killing goes further than the
//! groups, so that nothing outlives the run: the run's cgroup where there
//! is one ([`super::cgroup`]), else the process tree and moat's adopted
//! orphans ([`super::tree`]).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use super::Signal;
use super::cgroup::{ChildCgroup, RunCgroup};
use super::cgroup_limits::ProgramLimits;
use super::tree;
use moat_engine::ProgramLimitHit;

/// The number of `signal` on this system.
fn number(signal: Signal) -> libc::c_int {
    match signal {
        Signal::Interrupt => libc::SIGINT,
        Signal::Terminate => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    }
}

/// What the runs of this process started directly, and how many runs
/// without a cgroup have children: the adopted orphans' possible owners.
#[derive(Debug, Default)]
struct Started {
    pids: HashSet<u32>,
    uncontained_runs: usize,
}

static STARTED: LazyLock<Mutex<Started>> = LazyLock::new(Mutex::default);

fn started() -> MutexGuard<'static, Started> {
    STARTED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts a helper process of a run (a run's init, [`super::init`]) with
/// `start`, which returns its pid, and counts it as moat's own: the sweep
/// of orphans moat adopted at the end of another run must not take it for
/// one. Under the lock that sweep holds, so no sweep sees it in between.
pub(crate) fn start_helper(
    start: impl FnOnce() -> std::io::Result<libc::pid_t>,
) -> std::io::Result<libc::pid_t> {
    let mut started = started();
    let pid = start()?;
    started.pids.insert(pid as u32);
    Ok(pid)
}

/// Forgets helper `pid`, ended and reaped.
pub(crate) fn end_helper(pid: libc::pid_t) {
    started().pids.remove(&(pid as u32));
}

/// How the processes a run starts are kept from outliving it (beyond
/// process groups, which a process can leave).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Containment {
    /// Each run's programs live in a cgroup of the run's own, where the
    /// process may make one: nothing they start can leave it.
    pub cgroups: bool,
    /// Without a cgroup, the process becomes the subreaper of what runs
    /// start and kills the orphans it adopts when a run ends (when no
    /// other run without a cgroup could have started them). Only for a
    /// process that starts no children of its own besides runs' (the
    /// `moat` binary): any other child of the process would count as an
    /// orphan too.
    pub adopt_orphans: bool,
}

/// Whether this process keeps runs out of cgroups of their own (see
/// [`Containment::for_this_process`]).
static NO_RUN_CGROUPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Containment {
    /// Makes this the containment of the process's runs, for what asks
    /// which limits hold here before any run starts
    /// ([`program_limits_here`](super::program_limits_here)): runs kept out
    /// of cgroups have no limit a cgroup holds. One per process, like the
    /// sandbox that calls it.
    pub fn for_this_process(self) -> Self {
        NO_RUN_CGROUPS.store(!self.cgroups, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Whether this process keeps runs out of cgroups of their own.
    pub(crate) fn runs_without_cgroups() -> bool {
        NO_RUN_CGROUPS.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Default for Containment {
    fn default() -> Self {
        Self {
            cgroups: true,
            adopt_orphans: false,
        }
    }
}

/// A run's children. Cheap to clone; clones share them.
#[derive(Debug, Clone)]
pub struct ChildGroups(Arc<Mutex<Groups>>);

#[derive(Debug)]
struct Groups {
    /// How to keep what the run starts from outliving it.
    containment: Containment,
    /// The live process groups (each led by a child).
    leaders: Vec<u32>,
    /// Where the run's children live, once it has had one; `None` inside
    /// when no cgroup could be made.
    cgroup: Option<Option<RunCgroup>>,
    /// What the run's programs may take together, held by its cgroup.
    limits: ProgramLimits,
    /// The forks refused at the process limit, as last reported.
    refused_forks: u64,
    /// The programs killed at the memory limit, as last reported.
    memory_kills: u64,
    /// Whether this run counts in [`Started::uncontained_runs`].
    uncontained: bool,
    /// The run's own empty directory (its children's working and temporary
    /// directory), made at the first child that needs it and removed with
    /// the children, also when the host stops every run.
    private_dir: Option<tempfile::TempDir>,
}

impl ChildGroups {
    /// No children yet; they will be contained as `containment` says.
    pub fn new(containment: Containment) -> Self {
        Self(Arc::new(Mutex::new(Groups {
            containment,
            leaders: Vec::new(),
            cgroup: None,
            limits: ProgramLimits::default(),
            refused_forks: 0,
            memory_kills: 0,
            uncontained: false,
            private_dir: None,
        })))
    }

    /// Holds the run's programs to `limits` (before its first child).
    pub fn set_limits(&self, limits: ProgramLimits) {
        self.lock().limits = limits;
    }

    /// The limits that held the run's programs back since the last call:
    /// a fork refused at the process limit, a program killed at the
    /// memory limit.
    pub fn limits_hit(&self) -> Vec<ProgramLimitHit> {
        let mut groups = self.lock();
        let Some(Some(cgroup)) = &groups.cgroup else {
            return Vec::new();
        };
        let refused = cgroup.refused_forks().unwrap_or(0);
        let killed = cgroup.memory_kills().unwrap_or(0);
        let mut hits = Vec::new();
        if refused > groups.refused_forks {
            groups.refused_forks = refused;
            hits.extend(groups.limits.processes.map(ProgramLimitHit::Processes));
        }
        if killed > groups.memory_kills {
            groups.memory_kills = killed;
            hits.extend(groups.limits.memory_bytes.map(ProgramLimitHit::Memory));
        }
        hits
    }

    /// Where the next child should join before it runs: the run's cgroup,
    /// made at the first child. `None` when there is no cgroup: then moat
    /// adopts orphans, to find them at the end.
    pub(crate) fn cgroup_for_child(&self) -> Option<ChildCgroup> {
        let mut groups = self.lock();
        if groups.cgroup.is_none() {
            let limits = groups.limits;
            let cgroup = groups
                .containment
                .cgroups
                .then(|| RunCgroup::create(&limits))
                .flatten();
            if cgroup.is_none() && groups.containment.adopt_orphans {
                tree::adopt_orphans();
            }
            groups.cgroup = Some(cgroup);
        }
        groups
            .cgroup
            .as_ref()
            .and_then(Option::as_ref)
            .and_then(RunCgroup::child)
            .cloned()
    }

    /// The run's process limit when its cgroup (made by
    /// [`cgroup_for_child`](Self::cgroup_for_child)) does not hold it: the
    /// run's init holds it then with `RLIMIT_NPROC`, where the run's
    /// programs have a user namespace of their own.
    pub(crate) fn processes_unheld(&self) -> Option<u64> {
        let groups = self.lock();
        let held = groups
            .cgroup
            .as_ref()
            .and_then(Option::as_ref)
            .is_some_and(|cgroup| cgroup.held().processes);
        groups.limits.processes.filter(|_| !held)
    }

    /// The run's own empty directory, made now if it has none yet.
    pub(crate) fn private_dir(&self) -> std::io::Result<std::path::PathBuf> {
        let mut groups = self.lock();
        if groups.private_dir.is_none() {
            remove_stale_private_dirs();
            let prefix = format!("{PRIVATE_DIR_PREFIX}{}-", std::process::id());
            groups.private_dir = Some(tempfile::Builder::new().prefix(&prefix).tempdir()?);
        }
        let dir = groups.private_dir.as_ref().expect("made above");
        Ok(dir.path().to_path_buf())
    }

    /// Records the child `pid`, leader of its group.
    pub(crate) fn add(&self, pid: u32) {
        let mut groups = self.lock();
        groups.leaders.push(pid);
        let mut started = started();
        started.pids.insert(pid);
        let contained = matches!(groups.cgroup, Some(Some(_)));
        if !contained && groups.containment.adopt_orphans && !groups.uncontained {
            groups.uncontained = true;
            started.uncontained_runs += 1;
        }
    }

    /// Kills the group led by `pid` and forgets it.
    pub(crate) fn kill_and_remove(&self, pid: u32) {
        let mut groups = self.lock();
        if let Some(at) = groups.leaders.iter().position(|&g| g == pid) {
            groups.leaders.swap_remove(at);
            kill_tree(&[pid]);
            let _ = signal_group(pid, Signal::Kill);
            started().pids.remove(&pid);
        }
    }

    /// How many groups are live.
    pub(crate) fn len(&self) -> usize {
        self.lock().leaders.len()
    }

    /// Sends `signal` to the group led by `pid`, if it is one of ours.
    pub(crate) fn signal(&self, pid: u32, signal: Signal) -> std::io::Result<()> {
        if !self.lock().leaders.contains(&pid) {
            return Err(std::io::Error::other("the child has been released"));
        }
        signal_group(pid, signal)
    }

    /// Sends `signal` to every group.
    pub fn signal_all(&self, signal: Signal) {
        for &pid in &self.lock().leaders {
            let _ = signal_group(pid, signal);
        }
    }

    /// Kills everything the run started, wherever it went.
    pub fn kill_all(&self) {
        let mut groups = self.lock();
        let leaders = std::mem::take(&mut groups.leaders);
        match &groups.cgroup {
            Some(Some(cgroup)) => cgroup.kill(),
            _ => kill_tree(&leaders),
        }
        for &pid in &leaders {
            let _ = signal_group(pid, Signal::Kill);
        }
        let mut started = started();
        if groups.uncontained {
            groups.uncontained = false;
            started.uncontained_runs -= 1;
            // Orphans moat adopted can only be this run's when no other
            // run without a cgroup has children. (Its own children, the
            // leaders, are not orphans: whoever started them waits for
            // them.)
            if started.uncontained_runs == 0 {
                let adopted = tree::adopted(&started.pids);
                tree::kill_and_reap(&adopted);
            }
        }
        for pid in &leaders {
            started.pids.remove(pid);
        }
        // Nothing of the run is left to use it.
        groups.private_dir = None;
    }

    fn lock(&self) -> MutexGuard<'_, Groups> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        if self.uncontained {
            started().uncontained_runs -= 1;
        }
        // The cgroup, when there is one, kills what is left and goes.
    }
}

/// How a run's private directory is named: then the id of the moat process
/// that made it, so the next moat can tell the left-behind ones.
const PRIVATE_DIR_PREFIX: &str = "moat-run-";

/// Removes the private directories of moat processes that are gone (once
/// a process): one killed with `SIGKILL` cannot remove its own.
pub(crate) fn remove_stale_private_dirs() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        for dir in tree::left_by_gone_moats(&std::env::temp_dir(), PRIVATE_DIR_PREFIX) {
            tracing::debug!(dir = %dir.display(), "removing the directory of a moat that is gone");
            let _ = std::fs::remove_dir_all(dir);
        }
    });
}

/// Kills every descendant of `leaders` found in the process tree: those
/// that left their process group are found while their parents live.
fn kill_tree(leaders: &[u32]) {
    if leaders.is_empty() {
        return;
    }
    tree::kill_and_reap(&tree::descendants(leaders));
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
