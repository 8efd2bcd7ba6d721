//! What a child does between fork and exec to hold to its run's grants.
//!
//! Everything is prepared by the host before the fork (the Landlock
//! ruleset, the seccomp filter, the namespaces' handles); the child only
//! makes system calls, in this order:
//!
//! 1. the parent-death signal;
//! 2. with namespaces ([`Namespaces`]): it joins the run's network
//!    namespace (and its user namespace when it has one), makes a PID and
//!    a mount namespace of its own, and forks twice: an init (PID 1 of the
//!    new namespace), started in the run's cgroup, which mounts a private
//!    `/proc` (only the run's processes in it) and reaps, and the program
//!    (PID 2). The first child stays behind in moat's namespace, and
//!    outside the cgroup, as the program's stand-in: moat waits for it,
//!    signals it, reads its exit status, which it relays from the program
//!    ([`relay`]). Without namespaces the child joins the run's cgroup
//!    itself;
//! 3. the program drops every capability (a program moat starts as root
//!    may not load a kernel module nor reconfigure the network), then
//!    enters its Landlock domain and installs the seccomp filter.
//!
//! Signals reach the program through its process group, which the three
//! share: the stand-in ignores the ones a program may handle and dies with
//! `SIGKILL`, and the init, as PID 1, is immune to all but `SIGKILL`;
//! its death ends everything left in the namespace.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use seccompiler::BpfProgram;

use super::cgroup::ChildCgroup;

/// The namespaces a child joins: the run's network namespace (and the user
/// namespace that owns it, if any).
#[derive(Debug, Clone)]
pub(crate) struct Namespaces {
    pub(crate) net: Arc<OwnedFd>,
    pub(crate) user: Option<Arc<OwnedFd>>,
}

/// How one child is contained; made by the host before the fork.
#[derive(Debug, Default)]
pub(crate) struct Containment {
    /// The run's cgroup, when it has one.
    pub(crate) cgroup: Option<ChildCgroup>,
    /// The run's namespaces; `None`: the host's (no namespace available,
    /// or not contained).
    pub(crate) namespaces: Option<Namespaces>,
    /// The Landlock ruleset; `None`: no Landlock here, or not contained.
    pub(crate) landlock: Option<OwnedFd>,
    /// The Landlock rights (`LANDLOCK_ACCESS_FS_*` bits) on the private
    /// `/proc`, which exists only once the child has mounted it, so its
    /// rule is added in the child.
    pub(crate) proc_access: u64,
    /// The socket filter; `None`: not contained.
    pub(crate) seccomp: Option<Arc<BpfProgram>>,
    /// Where moat's command line and environment are in its memory, which
    /// the init, a copy of moat the program sees as PID 1, blanks.
    pub(crate) startup_text: Option<StartupText>,
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
    unsafe fn blank(self) {
        for (start, end) in [self.args, self.env] {
            if end > start {
                // SAFETY: the kernel's bounds of the strings on this
                // process's (copied) stack, which is writable.
                unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
            }
        }
    }
}

impl Containment {
    /// Whether the program drops its capabilities: whenever it is contained
    /// at all.
    fn contained(&self) -> bool {
        self.namespaces.is_some() || self.landlock.is_some() || self.seccomp.is_some()
    }

    /// Run in the forked child, before exec. Returns only in the process
    /// that goes on to exec the program.
    pub(crate) fn enter(&self, host_pid: u32) -> io::Result<()> {
        // SAFETY: prctl and getppid have no memory-safety preconditions.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The host may have died between fork and prctl.
            if libc::getppid() as u32 != host_pid {
                return Err(io::Error::other("the host exited"));
            }
        }
        if let Some(namespaces) = &self.namespaces {
            enter_namespaces(namespaces, self.cgroup.as_ref(), self.startup_text)?;
            if let Some(ruleset) = &self.landlock {
                allow_private_proc(ruleset.as_raw_fd(), self.proc_access)?;
            }
        } else if let Some(cgroup) = &self.cgroup {
            super::spawner::join_cgroup(&cgroup.procs)?;
        }
        if self.contained() {
            drop_capabilities()?;
        }
        // Last: joining the cgroup and the namespaces needs what these
        // take away.
        if let Some(ruleset) = &self.landlock {
            restrict_self(ruleset.as_raw_fd())?;
        }
        if let Some(filter) = &self.seccomp {
            // SAFETY: prctl with integer arguments. Landlock set it
            // already when there is a ruleset; the filter needs it either
            // way.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
                return Err(io::Error::last_os_error());
            }
            super::seccomp::install(filter)?;
        }
        Ok(())
    }
}

/// Joins the run's namespaces, then makes the PID and mount namespaces and
/// the init of this child, in `cgroup`; returns in the program only.
fn enter_namespaces(
    namespaces: &Namespaces,
    cgroup: Option<&ChildCgroup>,
    startup_text: Option<StartupText>,
) -> io::Result<()> {
    // SAFETY: system calls on descriptors the host keeps open, local
    // buffers and static strings; the two processes that do not return
    // leave with `_exit`.
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
        let mut status_pipe = [-1; 2];
        if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) == -1 {
            return Err(io::Error::last_os_error());
        }
        let [status_read, status_write] = status_pipe;
        let init = fork_into(cgroup)?;
        if init > 0 {
            libc::close(status_write);
            relay(init, status_read);
        }
        libc::close(status_read);
        // PID 1 of the new namespace. A copy of moat's memory, environment
        // included: not dumpable, so the program (which holds no
        // capability) cannot read its `/proc/1/environ` or memory.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1
            || libc::prctl(libc::PR_SET_DUMPABLE, 0) == -1
        {
            return Err(io::Error::last_os_error());
        }
        // What the program sees of it: its name, and no command line.
        libc::prctl(libc::PR_SET_NAME, c"moat-init".as_ptr());
        if let Some(text) = startup_text {
            text.blank();
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) == -1
        {
            return Err(io::Error::last_os_error());
        }
        let program = libc::fork();
        if program == -1 {
            return Err(io::Error::last_os_error());
        }
        if program > 0 {
            reap(program, status_write);
        }
        libc::close(status_write);
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Forks; the child starts in `cgroup` when there is one. `clone3` with
/// `CLONE_INTO_CGROUP` puts it there as it is made: moving a process in
/// afterwards takes the kernel's cgroup-wide lock for writing, which can
/// wait for an RCU grace period (9–23 ms in 2–3 % of spawns, measured:
/// the tail of a spawn's cost). A kernel without it (before 5.7) gets a
/// fork, and the child moves itself in.
///
/// # Safety
/// For a single-threaded child between fork and exec: what follows in
/// either process makes system calls only.
unsafe fn fork_into(cgroup: Option<&ChildCgroup>) -> io::Result<libc::pid_t> {
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
    // arguments are a local structure; fork and the cgroup's join as in
    // `enter_namespaces`.
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
        let pid = libc::fork();
        if pid == -1 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0
            && let Some(cgroup) = cgroup
        {
            super::spawner::join_cgroup(&cgroup.procs)?;
        }
        Ok(pid)
    }
}

/// The init of the namespace: reaps every process until the program ends,
/// sends its wait status to the stand-in, and exits, which ends whatever
/// else is left in the namespace.
unsafe fn reap(program: libc::pid_t, status_write: RawFd) -> ! {
    // SAFETY: system calls on local buffers; see `enter_namespaces`.
    unsafe {
        keep_only(status_write);
        loop {
            let mut status = 0;
            let reaped = libc::waitpid(-1, &mut status, 0);
            if reaped == program {
                libc::write(status_write, (&status as *const i32).cast(), 4);
                libc::_exit(0);
            }
            if reaped == -1 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
    }
}

/// The stand-in: waits for the init's report and ends as the program did.
unsafe fn relay(init: libc::pid_t, status_read: RawFd) -> ! {
    // SAFETY: system calls on local buffers; see `enter_namespaces`.
    unsafe {
        // What a program may handle reaches it through the process group;
        // the stand-in waits on.
        for signal in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        keep_only(status_read);
        let mut status: i32 = 0;
        let mut read = 0usize;
        while read < 4 {
            let got = libc::read(
                status_read,
                (&mut status as *mut i32).cast::<u8>().add(read).cast(),
                4 - read,
            );
            if got > 0 {
                read += got as usize;
            } else if got == 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        let mut init_status = 0;
        libc::waitpid(init, &mut init_status, 0);
        if read < 4 {
            // The init died before the program's end: killed, with the
            // run's cgroup. The stand-in, outside it, ends as killed too.
            if !libc::WIFSIGNALED(init_status) {
                libc::_exit(127);
            }
            status = init_status;
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

/// Closes every descriptor but `keep`: the stand-in and the init never
/// exec, and must not hold the program's pipes (nor the one on which the
/// host learns that exec succeeded) open.
unsafe fn keep_only(keep: RawFd) {
    // SAFETY: closing descriptors of this process only.
    unsafe {
        if keep > 0 {
            libc::close_range(0, keep as u32 - 1, 0);
        }
        libc::close_range(keep as u32 + 1, u32::MAX, 0);
    }
}

/// Adds the private `/proc` to the Landlock ruleset, with `access`.
fn allow_private_proc(ruleset: RawFd, access: u64) -> io::Result<()> {
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
fn drop_capabilities() -> io::Result<()> {
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
fn restrict_self(ruleset: RawFd) -> io::Result<()> {
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
