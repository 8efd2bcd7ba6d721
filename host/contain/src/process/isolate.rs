//! The system calls that hold a process of a run to its grants, made
//! between fork and exec: by a child of an uncontained run (its cgroup
//! only, [`Containment`]), and by a contained run's init and the programs
//! it starts ([`super::init`]). Everything is prepared by the host before
//! the fork (the Landlock ruleset, the seccomp filter, the namespaces'
//! handles); these functions only make system calls, allocating nothing.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use super::cgroup::ChildCgroup;
use crate::egress::Namespaces;

/// How a child of an uncontained run is held: only in the run's cgroup,
/// so that nothing it starts outlives the run.
#[derive(Debug, Default)]
pub(crate) struct Containment {
    /// The run's cgroup, when it has one.
    pub(crate) cgroup: Option<ChildCgroup>,
}

impl Containment {
    /// Run in the forked child, before exec.
    pub(crate) fn enter(&self, host_pid: u32) -> io::Result<()> {
        // SAFETY: prctl and getppid have no memory-safety preconditions.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The host may have died between fork and prctl.
            if libc::getppid() as u32 != host_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        if let Some(cgroup) = &self.cgroup {
            super::cgroup::join(&cgroup.procs)?;
            cgroup.join_also()?;
        }
        Ok(())
    }
}

/// Joins the run's namespaces (its user namespace first, when it has one,
/// which owns the network one), then makes a PID and a mount namespace for
/// what this process starts next; its mounts stay private to it.
pub(crate) fn join_and_unshare(namespaces: &Namespaces) -> io::Result<()> {
    // SAFETY: system calls on descriptors the host keeps open and static
    // strings.
    unsafe {
        if let Some(user) = &namespaces.user
            && libc::setns(user.as_raw_fd(), libc::CLONE_NEWUSER) == -1
        {
            return Err(io::Error::last_os_error());
        }
        if libc::setns(namespaces.net.as_raw_fd(), libc::CLONE_NEWNET) == -1 {
            return Err(io::Error::last_os_error());
        }
        if libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) == -1 {
            return Err(io::Error::last_os_error());
        }
        // The private /proc must not show in moat's mount namespace.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == -1
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Mounts a `/proc` of the calling process's PID namespace over `/proc`:
/// only the run's processes are in it.
pub(crate) fn mount_private_proc() -> io::Result<()> {
    // SAFETY: mount with static strings.
    let mounted = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if mounted == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One path made read-only in the run's mount namespace: a bind mount of
/// it over itself, remounted read-only with the flags of the mount it is
/// on (a user namespace may add flags to a mount, never take its locked
/// ones away).
#[derive(Debug)]
pub(crate) struct ReadOnlyMount {
    path: std::ffi::CString,
    flags: libc::c_ulong,
}

impl ReadOnlyMount {
    /// The mounts of `paths`, prepared on the host: those that exist and
    /// whose mount's flags can be read.
    pub(crate) fn prepare(paths: &[std::path::PathBuf]) -> Vec<Self> {
        use std::os::unix::ffi::OsStrExt;
        paths
            .iter()
            .filter_map(|path| {
                let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
                // SAFETY: statvfs fills the zeroed struct; the path is a
                // valid C string.
                let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
                if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } == -1 {
                    return None;
                }
                let kept = [
                    (libc::ST_NOSUID, libc::MS_NOSUID),
                    (libc::ST_NODEV, libc::MS_NODEV),
                    (libc::ST_NOEXEC, libc::MS_NOEXEC),
                    (libc::ST_NOATIME, libc::MS_NOATIME),
                    (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
                    (libc::ST_RELATIME, libc::MS_RELATIME),
                ];
                let flags = kept
                    .iter()
                    .filter(|(st, _)| stat.f_flag & *st != 0)
                    .fold(0, |flags, (_, ms)| flags | ms);
                Some(Self { path, flags })
            })
            .collect()
    }
}

/// Makes each of `mounts` read-only in the calling process's mount
/// namespace. One that cannot be made (gone since) is left as it was —
/// a bind mount that could not be made read-only is taken off again, so a
/// rename over the path still works — and the launch layer puts back
/// whatever the run changes there anyway.
pub(crate) fn mount_read_only(mounts: &[ReadOnlyMount]) {
    for mount in mounts {
        // SAFETY: mount with prepared C strings.
        unsafe {
            let bound = libc::mount(
                mount.path.as_ptr(),
                mount.path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            );
            if bound == 0
                && libc::mount(
                    std::ptr::null(),
                    mount.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | mount.flags,
                    std::ptr::null(),
                ) == -1
            {
                libc::umount2(mount.path.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// The addresses of moat's command line and environment strings (from
/// `/proc/self/stat`), read once on the host: the child may not allocate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartupText {
    args: (usize, usize),
    env: (usize, usize),
}

impl StartupText {
    /// moat's, or `None` when `/proc/self/stat` does not say.
    pub(crate) fn of_moat() -> Option<Self> {
        static FOUND: std::sync::OnceLock<Option<StartupText>> = std::sync::OnceLock::new();
        *FOUND.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // Fields after the command's name (which may hold anything but
            // ends at the last parenthesis) start with the third.
            let (_, rest) = stat.rsplit_once(')')?;
            let fields: Vec<usize> = rest
                .split_whitespace()
                .map(|field| field.parse().unwrap_or(0))
                .collect();
            // arg_start, arg_end, env_start, env_end: fields 48 to 51.
            let at = |field: usize| fields.get(field - 3).copied().filter(|&a| a != 0);
            Some(Self {
                args: (at(48)?, at(49)?),
                env: (at(50)?, at(51)?),
            })
        })
    }

    /// Zeroes the strings in this process's memory: `/proc/PID/cmdline`
    /// then shows nothing of how moat was started.
    ///
    /// # Safety
    /// Only in a child between fork and exec that never reads its
    /// arguments or environment again.
    pub(crate) unsafe fn blank(self) {
        for (start, end) in [self.args, self.env] {
            if end > start {
                // SAFETY: the kernel's bounds of the strings on this
                // process's (copied) stack, which is writable.
                unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
            }
        }
    }
}

/// Forks; the child starts in `cgroup` when there is one. `clone3` with
/// `CLONE_INTO_CGROUP` puts it there as it is made: moving a process in
/// afterwards takes the kernel's cgroup-wide lock for writing, which can
/// wait for an RCU grace period (9–23 ms in 2–3 % of spawns, measured:
/// the tail of a spawn's cost). A kernel without it (before 5.7) gets a
/// fork, and the child moves itself in.
///
/// # Safety
/// For a child between fork and exec: what follows in either process
/// makes system calls only.
pub(crate) unsafe fn fork_into(cgroup: Option<&ChildCgroup>) -> io::Result<libc::pid_t> {
    /// `struct clone_args` of `linux/sched.h`, up to `cgroup` (its size
    /// tells the kernel which fields are there).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    // SAFETY: clone3 without CLONE_VM or a stack behaves as fork; the
    // arguments are a local structure.
    unsafe {
        if let Some(cgroup) = cgroup {
            let args = CloneArgs {
                flags: CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                cgroup: cgroup.dir.as_raw_fd() as u64,
                ..CloneArgs::default()
            };
            let pid = libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            );
            if pid >= 0 {
                return Ok(pid as libc::pid_t);
            }
            let error = io::Error::last_os_error();
            if !matches!(
                error.raw_os_error(),
                Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG)
            ) {
                return Err(error);
            }
        }
        let pid = raw_fork()?;
        if pid == 0
            && let Some(cgroup) = cgroup
        {
            super::cgroup::join(&cgroup.procs)?;
        }
        Ok(pid)
    }
}

/// `fork` as the system call, without the C library's fork handlers:
/// for a process that is itself a child of a multi-threaded one, whose
/// library state another thread may have left mid-change.
///
/// # Safety
/// As [`fork_into`].
pub(crate) unsafe fn raw_fork() -> io::Result<libc::pid_t> {
    // SAFETY: clone with only the exit signal and no stack behaves as fork.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// Adds the private `/proc` to the Landlock ruleset, with `access`.
pub(crate) fn allow_private_proc(ruleset: RawFd, access: u64) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    // SAFETY: open, the Landlock syscall on a local struct, close.
    unsafe {
        let proc = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if proc == -1 {
            return Err(io::Error::last_os_error());
        }
        let rule = PathBeneath {
            allowed_access: access,
            parent_fd: proc,
        };
        // LANDLOCK_RULE_PATH_BENEATH
        let added = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            1,
            &rule as *const PathBeneath,
            0,
        );
        let error = io::Error::last_os_error();
        libc::close(proc);
        if added == -1 {
            return Err(error);
        }
    }
    Ok(())
}

/// Drops every capability, for good: the bounding set, the ambient set and
/// the current ones. A program started as root keeps its user but none of
/// root's powers.
pub(crate) fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset on a local header and zeroed data.
    unsafe {
        for capability in 0..64 {
            // EINVAL: no such capability on this kernel; the rest are gone.
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) == -1
                && *libc::__errno_location() == libc::EINVAL
            {
                break;
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
        let mut header = CapHeader {
            version: 0x2008_0522,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Puts the calling process under the Landlock ruleset `ruleset` for good
/// (and its future children: the domain is inherited). `no_new_privs`
/// first, as the kernel requires: a set-user-id program cannot undo it.
pub(crate) fn restrict_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: prctl and a raw syscall with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
