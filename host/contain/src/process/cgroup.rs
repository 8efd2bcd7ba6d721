//! A cgroup (v2) per run: what a run's programs start stays in it whatever
//! it does (`setsid`, double forks, its parent dying), so ending the run
//! ends all of it (`cgroup.kill`).
//!
//! It is made under moat's own cgroup, where the process may create one:
//! as root, or in a cgroup delegated to the user (systemd does for user
//! services). Where it cannot, the run falls back on process groups and
//! moat's adoption of orphans ([`super::tree`]).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use moat_engine::RunLimits;

use super::cgroup_limits::{HeldLimits, LimitsHere, NAME_PREFIX, ProgramLimits};

/// How long removing a run's cgroup waits for its killed processes to go.
const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// One run's cgroup.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    dir: PathBuf,
    /// How a child gets in; `None` for the cgroup of a moat that is gone,
    /// only removed.
    child: Option<ChildCgroup>,
    /// Where the limits of the run's programs are held.
    held: HeldLimits,
}

/// What a child needs to be in a run's cgroup, prepared before the fork.
#[derive(Debug, Clone)]
pub(crate) struct ChildCgroup {
    /// `cgroup.procs`, for a child to move itself in.
    pub(crate) procs: CString,
    /// The cgroup's directory, for `clone3` to start a child in it
    /// (`CLONE_INTO_CGROUP`), which spares the move. Close-on-exec: no
    /// program keeps it.
    pub(crate) dir: Arc<OwnedFd>,
    /// The `cgroup.procs` of the run's cgroups in v1 hierarchies, which
    /// hold limits the v2 one cannot here: a child joins each itself.
    pub(crate) also: Arc<[CString]>,
}

impl ChildCgroup {
    /// Joins the run's v1 cgroups. Async-signal-safe: for a child between
    /// fork and exec.
    pub(crate) fn join_also(&self) -> io::Result<()> {
        for procs in self.also.iter() {
            join(procs)?;
        }
        Ok(())
    }
}

impl RunCgroup {
    /// A fresh cgroup for one run, its programs held to `limits` where
    /// this machine can; `None` where cgroup v2 is not there or moat may
    /// not make one.
    pub(crate) fn create(limits: &ProgramLimits) -> Option<Self> {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let parent = parent()?;
        let name = format!(
            "{NAME_PREFIX}{}-{}",
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(&name);
        if let Err(error) = std::fs::create_dir(&dir) {
            tracing::debug!(dir = %dir.display(), "no cgroup for the run: {error}");
            return None;
        }
        let held = HeldLimits::hold(&dir, &name, limits);
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok();
        let handle = std::fs::File::open(&dir).map(OwnedFd::from);
        let child = match (procs, handle) {
            (Some(procs), Ok(handle)) => Some(ChildCgroup {
                procs,
                dir: Arc::new(handle),
                also: held.v1_procs().into(),
            }),
            _ => None,
        };
        let made = Self { dir, child, held };
        // Dropped (removed) when a child could not get in.
        made.child.is_some().then_some(made)
    }

    /// What a child needs to get in.
    pub(crate) fn child(&self) -> Option<&ChildCgroup> {
        self.child.as_ref()
    }

    /// Which of its programs' limits are held.
    pub(crate) fn held(&self) -> super::cgroup_limits::LimitsHere {
        self.held.here
    }

    /// How many forks of the run's programs its process limit refused so
    /// far; `None` when the limit is not held.
    pub(crate) fn refused_forks(&self) -> Option<u64> {
        self.held.refused_forks()
    }

    /// How many of the run's programs the kernel killed at its memory
    /// limit so far; `None` when the limit is not held.
    pub(crate) fn memory_kills(&self) -> Option<u64> {
        self.held.memory_kills()
    }

    /// Kills every process in the cgroup.
    pub(crate) fn kill(&self) {
        if std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        // Kernels before 5.14 have no cgroup.kill: one by one, until none
        // is left (a process may fork while the others are being killed).
        for _ in 0..100 {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    fn pids(&self) -> Vec<libc::pid_t> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.kill();
        let until = Instant::now() + EMPTY_WAIT;
        // The v1 ones after: what the v2 one held is gone from them too.
        for dir in std::iter::once(&self.dir).chain(&self.held.v1_dirs) {
            remove_when_empty(dir, until);
        }
    }
}

/// Removes the cgroup `dir` once the processes killed in it are gone,
/// waiting until `until` at most.
fn remove_when_empty(dir: &Path, until: Instant) {
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            // Still populated: the killed processes are on their way.
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), "cannot remove the run's cgroup: {error}");
                return;
            }
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is
/// `procs`. Async-signal-safe: for a child between fork and exec.
pub(crate) fn join(procs: &CStr) -> io::Result<()> {
    // SAFETY: open, write and close on a valid C string and a local buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        // "0": the writing process itself.
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

/// Removes what moat processes that are gone left in moat's cgroup (once
/// a process: the first run cgroup made does it too).
pub(crate) fn remove_left_behind() {
    let _ = parent();
}

/// moat's own cgroup in the cgroup v2 hierarchy, found once.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let mount = cgroup2_mount()?;
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let path = own.lines().find_map(|line| line.strip_prefix("0::"))?;
            let dir = mount.join(path.trim_start_matches('/'));
            if !dir.join("cgroup.procs").is_file() {
                return None;
            }
            remove_stale(&dir);
            Some(dir)
        })
        .as_deref()
}

/// Removes the run cgroups of moat processes that are gone. A moat killed
/// with SIGKILL (or a test binary exiting with runs still open) cannot
/// remove its own; the next moat does, killing what is still in them.
fn remove_stale(parent: &Path) {
    for dir in super::tree::left_by_gone_moats(parent, NAME_PREFIX) {
        tracing::debug!(dir = %dir.display(), "removing the cgroup of a moat that is gone");
        drop(RunCgroup {
            dir,
            child: None,
            held: HeldLimits::default(),
        });
    }
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        // "… mount-point … - cgroup2 source options"
        let (fields, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        fields.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// Which limits of a run's programs this machine holds, found once by
/// making (and removing) a run cgroup with each; none where this process
/// keeps runs out of cgroups (`Containment::cgroups` off).
pub fn program_limits_here() -> LimitsHere {
    if super::Containment::runs_without_cgroups() {
        return LimitsHere::default();
    }
    static FOUND: OnceLock<LimitsHere> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let both = ProgramLimits {
            memory_bytes: Some(RunLimits::DEFAULT_MAX_PROGRAM_MEMORY_BYTES),
            processes: Some(RunLimits::DEFAULT_MAX_PROCESSES),
            milli_cpus: Some(1000),
        };
        RunCgroup::create(&both).map_or_else(LimitsHere::default, |cgroup| cgroup.held())
    })
}

/// Which limits of the programs of a run contained as `confinement` this
/// machine holds: [`program_limits_here`], and the process limit where a
/// contained run's programs have a user namespace of their own (a user
/// who is not root), which the run's init holds with `RLIMIT_NPROC`.
pub fn program_limits_for(confinement: &moat_grants::Confinement) -> LimitsHere {
    let mut here = program_limits_here();
    let contained = *confinement != moat_grants::Confinement::Off;
    if contained && crate::NetworkContainment::detect().own_user_namespace() {
        here.processes = true;
    }
    here
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_cgroup_holds_a_process_and_its_end_kills_it() {
        let Some(cgroup) = RunCgroup::create(&ProgramLimits::default()) else {
            eprintln!("skipped: no cgroup v2 that this process may write here");
            return;
        };
        let procs = cgroup.child().unwrap().procs.clone();
        let mut command = std::process::Command::new("sleep");
        command.arg("60");
        // SAFETY: only open/write/close in the child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || super::join(&procs));
        }
        let mut child = command.spawn().unwrap();
        assert_eq!(cgroup.pids(), [child.id() as libc::pid_t]);
        drop(cgroup);
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed: {status:?}");
    }
}
