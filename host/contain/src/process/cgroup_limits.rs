//! What a run's programs may take together (`--max-memory`,
//! `--max-processes`, `--cpus`), held by the kernel's cgroup controllers.
//!
//! The run's cgroup ([`super::cgroup`]) is a cgroup v2 one. Where its
//! parent may hand it the `memory`, `pids` and `cpu` controllers, the
//! limits are files of that cgroup (`memory.max` with `memory.swap.max`
//! 0, `pids.max`, `cpu.max`). On a machine that still
//! mounts those controllers as cgroup v1 hierarchies (a "hybrid" layout),
//! the run gets a cgroup of its own in each such hierarchy too, beside
//! moat's, which its programs join as they start; it goes with the run's.
//! A limit that neither can hold (a user without a delegated cgroup) is
//! said once and not held.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use moat_engine::RunLimits;

/// How a run's cgroup is named (in the v2 hierarchy and each v1 one):
/// then the id of the moat process that made it and a sequence number.
pub(crate) const NAME_PREFIX: &str = "moat-";

/// The period `cpu.max` and `cpu.cfs_quota_us` count in, in µs (the
/// kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// What the programs of one run may take together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramLimits {
    /// Most memory together, in bytes (`memory.max`, swap off).
    pub(crate) memory_bytes: Option<u64>,
    /// Most processes and threads at once (`pids.max`).
    pub(crate) processes: Option<u64>,
    /// CPU time in thousandths of a CPU (`cpu.max`).
    pub(crate) milli_cpus: Option<u64>,
}

impl ProgramLimits {
    /// A run's limits for its programs.
    pub fn of(limits: &RunLimits) -> Self {
        Self {
            memory_bytes: Some(limits.max_program_memory_bytes),
            processes: Some(limits.max_processes),
            milli_cpus: limits.milli_cpus,
        }
    }
}

/// A controller that holds one of the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    const ALL: [Self; 3] = [Self::Memory, Self::Pids, Self::Cpu];

    fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Pids => "pids",
            Self::Cpu => "cpu",
        }
    }

    /// Its limit among `limits`, if any.
    fn limit(self, limits: &ProgramLimits) -> Option<u64> {
        match self {
            Self::Memory => limits.memory_bytes,
            Self::Pids => limits.processes,
            Self::Cpu => limits.milli_cpus,
        }
    }

    /// Sets `limit` in the cgroup v2 `dir`.
    fn set_v2(self, dir: &Path, limit: u64) -> io::Result<()> {
        match self {
            Self::Memory => {
                std::fs::write(dir.join("memory.max"), limit.to_string())?;
                // No swap: past the limit a program is killed, not paged
                // out slowly. (No such file where swap is not accounted:
                // nothing to turn off.)
                set_if_there(&dir.join("memory.swap.max"), "0")
            }
            Self::Pids => std::fs::write(dir.join("pids.max"), limit.to_string()),
            Self::Cpu => std::fs::write(
                dir.join("cpu.max"),
                format!("{} {CPU_PERIOD_US}", quota_us(limit)),
            ),
        }
    }

    /// Sets `limit` in the cgroup v1 `dir` of this controller.
    fn set_v1(self, dir: &Path, limit: u64) -> io::Result<()> {
        match self {
            Self::Memory => {
                std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string())?;
                // Memory and swap together at the same: no swap.
                set_if_there(&dir.join("memory.memsw.limit_in_bytes"), &limit.to_string())
            }
            Self::Pids => std::fs::write(dir.join("pids.max"), limit.to_string()),
            Self::Cpu => {
                std::fs::write(dir.join("cpu.cfs_period_us"), CPU_PERIOD_US.to_string())?;
                std::fs::write(dir.join("cpu.cfs_quota_us"), quota_us(limit).to_string())
            }
        }
    }
}

/// Writes `value` to `file` where the kernel has it.
fn set_if_there(file: &Path, value: &str) -> io::Result<()> {
    match std::fs::write(file, value) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The CPU time of `milli_cpus` per [`CPU_PERIOD_US`] (at least the
/// kernel's least, 1 ms).
fn quota_us(milli_cpus: u64) -> u64 {
    (milli_cpus.saturating_mul(CPU_PERIOD_US) / 1000).max(1000)
}

/// Which limits of a run's programs this machine holds, for this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitsHere {
    /// `--max-memory` (for the programs).
    pub memory: bool,
    /// `--max-processes`.
    pub processes: bool,
    /// `--cpus`.
    pub cpus: bool,
}

/// Where one run's limits are held, beside its cgroup v2.
#[derive(Debug, Default)]
pub(crate) struct HeldLimits {
    /// The run's cgroups in v1 hierarchies: its programs join each.
    pub(crate) v1_dirs: Vec<PathBuf>,
    /// The file that counts the forks refused at the limit
    /// (`pids.events`), when the process limit is held.
    pids_events: Option<PathBuf>,
    /// The file that counts the programs the kernel killed at the memory
    /// limit (`memory.events`, or v1's `memory.oom_control`), when held.
    memory_events: Option<PathBuf>,
    /// Which of the limits asked are held.
    pub(crate) here: LimitsHere,
}

impl HeldLimits {
    /// Holds `limits` for the run whose cgroup v2 is `run_dir` (named
    /// `name`); what cannot be held is said once and left.
    pub(crate) fn hold(run_dir: &Path, name: &str, limits: &ProgramLimits) -> Self {
        let mut held = Self::default();
        for controller in Controller::ALL {
            let Some(limit) = controller.limit(limits) else {
                continue;
            };
            // The file of kills or refusals: v2's and v1's are named alike,
            // but for memory.
            let (dir, v1) = match hold_v2(run_dir, controller, limit) {
                Ok(()) => (Some(run_dir.to_path_buf()), false),
                Err(v2) => match hold_v1(name, controller, limit) {
                    Ok(dir) => {
                        // Controllers mounted together share the cgroup.
                        if !held.v1_dirs.contains(&dir) {
                            held.v1_dirs.push(dir.clone());
                        }
                        (Some(dir), true)
                    }
                    Err(v1) => {
                        say_unheld(controller, &v2, &v1);
                        (None, false)
                    }
                },
            };
            match controller {
                Controller::Memory => {
                    held.here.memory = dir.is_some();
                    let events = if v1 {
                        "memory.oom_control"
                    } else {
                        "memory.events"
                    };
                    held.memory_events = dir.map(|dir| dir.join(events));
                }
                Controller::Pids => {
                    held.here.processes = dir.is_some();
                    held.pids_events = dir.map(|dir| dir.join("pids.events"));
                }
                Controller::Cpu => held.here.cpus = dir.is_some(),
            }
        }
        held
    }

    /// The `cgroup.procs` files of the run's v1 cgroups, for a child to
    /// join before it runs anything.
    pub(crate) fn v1_procs(&self) -> Vec<CString> {
        self.v1_dirs
            .iter()
            .filter_map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok())
            .collect()
    }

    /// How many forks of the run's programs the process limit refused so
    /// far; `None` when it is not held.
    pub(crate) fn refused_forks(&self) -> Option<u64> {
        count_in(self.pids_events.as_ref()?, "max ")
    }

    /// How many of the run's programs the kernel killed at the memory
    /// limit so far; `None` when it is not held.
    pub(crate) fn memory_kills(&self) -> Option<u64> {
        count_in(self.memory_events.as_ref()?, "oom_kill ")
    }
}

/// The count on the line of `file` that starts with `key` (`max 3`).
fn count_in(file: &Path, key: &str) -> Option<u64> {
    let events = std::fs::read_to_string(file).ok()?;
    events
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|count| count.trim().parse().ok())
}

/// Hands `controller` to the run's cgroup v2 and sets `limit` there.
fn hold_v2(run_dir: &Path, controller: Controller, limit: u64) -> io::Result<()> {
    let parent = run_dir.parent().ok_or(io::ErrorKind::NotFound)?;
    let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))?;
    if !enabled.split_whitespace().any(|c| c == controller.name()) {
        // Refused (EBUSY) where moat's own cgroup holds processes and is
        // not the root, or where the controller is a v1 hierarchy's.
        std::fs::write(
            parent.join("cgroup.subtree_control"),
            format!("+{}", controller.name()),
        )?;
    }
    controller.set_v2(run_dir, limit)
}

/// Makes the run's cgroup `name` in the v1 hierarchy of `controller`,
/// beside moat's own, with `limit` set.
fn hold_v1(name: &str, controller: Controller, limit: u64) -> io::Result<PathBuf> {
    let parent = v1_parent(controller).ok_or(io::ErrorKind::NotFound)?;
    let dir = parent.join(name);
    match std::fs::create_dir(&dir) {
        // Made for another controller of the same hierarchy.
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        other => other?,
    }
    if let Err(error) = controller.set_v1(&dir, limit) {
        let _ = std::fs::remove_dir(&dir);
        return Err(error);
    }
    Ok(dir)
}

/// moat's own cgroup in the v1 hierarchy of `controller`, found once (and
/// the cgroups of moats that are gone removed from it).
fn v1_parent(controller: Controller) -> Option<&'static Path> {
    static MEMORY: OnceLock<Option<PathBuf>> = OnceLock::new();
    static PIDS: OnceLock<Option<PathBuf>> = OnceLock::new();
    static CPU: OnceLock<Option<PathBuf>> = OnceLock::new();
    let found = match controller {
        Controller::Memory => &MEMORY,
        Controller::Pids => &PIDS,
        Controller::Cpu => &CPU,
    };
    found
        .get_or_init(|| {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let dir = v1_dir(&mountinfo, &own, controller.name())?;
            if !dir.join("cgroup.procs").is_file() {
                return None;
            }
            for stale in super::tree::left_by_gone_moats(&dir, NAME_PREFIX) {
                let _ = std::fs::remove_dir(stale);
            }
            Some(dir)
        })
        .as_deref()
}

/// Where this process's cgroup of the v1 hierarchy of `controller` is,
/// from `/proc/self/mountinfo` and `/proc/self/cgroup`.
fn v1_dir(mountinfo: &str, own: &str, controller: &str) -> Option<PathBuf> {
    let mount = mountinfo.lines().find_map(|line| {
        // "… mount-point … - cgroup source super-options"
        let (fields, fs) = line.split_once(" - ")?;
        let mut fs = fs.split_whitespace();
        if fs.next()? != "cgroup" {
            return None;
        }
        let options = fs.nth(1)?;
        options
            .split(',')
            .any(|option| option == controller)
            .then(|| fields.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    // "N:controllers:/path"
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _ = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    Some(mount.join(path.trim_start_matches('/')))
}

/// Says once per controller that a limit is not held here, and why.
fn say_unheld(controller: Controller, v2: &io::Error, v1: &io::Error) {
    static SAID: [OnceLock<()>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let at = controller as usize;
    SAID[at].get_or_init(|| {
        tracing::warn!(
            controller = controller.name(),
            "the limit of the runs' programs is not held here (cgroup v2: {v2}; v1: {v1}): \
             run moat in a delegated cgroup, e.g. `systemd-run --user --scope moat …`"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_hierarchy_is_found_by_its_controller_and_this_process_path_in_it() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let own = "8:pids:/build/job\n1:cpu:/\n0::/\n";
        assert_eq!(
            v1_dir(mountinfo, own, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids/build/job"))
        );
        assert_eq!(
            v1_dir(mountinfo, own, "cpu"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(v1_dir(mountinfo, own, "memory"), None);
    }

    #[test]
    fn a_cpu_limit_is_a_quota_of_the_period() {
        assert_eq!(quota_us(1000), 100_000);
        assert_eq!(quota_us(500), 50_000);
        assert_eq!(quota_us(2500), 250_000);
        assert_eq!(quota_us(1), 1000, "the kernel's least");
    }
}
