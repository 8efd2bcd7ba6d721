//! What the run's init does, in the process moat forks for it. Nothing
//! here allocates: the fork copied a multi-threaded process, whose
//! allocator's locks another thread may have held. Everything it needs was
//! prepared by the host ([`InitSetup`]); a request's strings come in a
//! memory file, mapped, and the program's argument and environment arrays
//! are built in an anonymous mapping.
//!
//! The forked process (the init's stand-in in moat's namespaces, which
//! only waits) joins the run's network namespace, makes the PID and mount
//! namespaces, and starts the init in the run's cgroup; the init mounts
//! the private `/proc`, drops its capabilities, installs the socket filter
//! and then serves: for each request it forks the program, which takes its
//! descriptors, enters the program's Landlock domain and execs.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use seccompiler::BpfProgram;

use super::wire::{self, MAX_FDS, report, request};
use crate::egress::Namespaces;
use crate::process::cgroup::ChildCgroup;
use crate::process::isolate::{self, StartupText};

/// How many programs of a run the init follows at once (the run's limit
/// on live children is lower).
const MAX_PROGRAMS: usize = 256;

/// What the init is given, prepared by the host before the fork.
pub(crate) struct InitSetup {
    /// The init's end of the socket pair.
    pub(crate) socket: OwnedFd,
    /// The run's namespaces; `None`: the host's (Landlock and the socket
    /// filter hold the network).
    pub(crate) namespaces: Option<Namespaces>,
    /// The run's cgroup, which the init starts in.
    pub(crate) cgroup: Option<ChildCgroup>,
    /// The most processes and threads the run's programs may have, held
    /// by `RLIMIT_NPROC` in the run's own user namespace (where the run's
    /// cgroup does not hold it): counted there, they are the run's only.
    pub(crate) max_processes: Option<u64>,
    /// The socket filter the init and every program hold.
    pub(crate) seccomp: Arc<BpfProgram>,
    /// The filter that hands the programs' connections to moat (in the
    /// run's own network), whose listener the init sends with its ready.
    pub(crate) connect_filter: Option<Arc<BpfProgram>>,
    /// The Landlock rights on the private `/proc`.
    pub(crate) proc_access: u64,
    /// moat's command line and environment, which the init blanks.
    pub(crate) startup_text: Option<StartupText>,
    /// Files that run code later, made read-only in the run's mount
    /// namespace (prepared by the host; with namespaces only).
    pub(crate) read_only: Vec<isolate::ReadOnlyMount>,
    /// The host's process id, to know it did not die before the
    /// parent-death signal was set.
    pub(crate) host_pid: u32,
}

/// Becomes the run's init (and its stand-in). Never returns.
///
/// # Safety
/// Only in a child just forked from moat's spawner thread.
pub(crate) unsafe fn become_init(setup: &InitSetup) -> ! {
    let socket = setup.socket.as_raw_fd();
    // SAFETY: system calls on prepared data; see the module's doc.
    unsafe {
        let (signals, listener) = match start(setup) {
            Ok(started) => started,
            Err(error) => {
                let errno = error.raw_os_error().unwrap_or(libc::EIO);
                let _ = wire::send(socket, &[report::READY, 0, errno as u64], &[]);
                libc::_exit(1);
            }
        };
        let sent = match listener {
            Some(fd) => wire::send(socket, &[report::READY, 0, 0], &[fd]),
            None => wire::send(socket, &[report::READY, 0, 0], &[]),
        };
        // Only moat answers the programs' connections: no copy stays here,
        // where the programs are forked.
        if let Some(fd) = listener {
            libc::close(fd);
        }
        if sent.is_err() {
            libc::_exit(1);
        }
        serve(socket, signals, setup)
    }
}

/// Enters the namespaces and starts the init; returns in the init only,
/// with its `SIGCHLD` signalfd and the listener of the programs'
/// connections, when they are handed to moat.
unsafe fn start(setup: &InitSetup) -> io::Result<(RawFd, Option<RawFd>)> {
    // SAFETY: see the module's doc.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
        if libc::getppid() as u32 != setup.host_pid {
            libc::_exit(1);
        }
        // Out of moat's process group: a Ctrl-C at moat's terminal is for
        // moat, which ends the run its own way.
        check(libc::setpgid(0, 0))?;
        // The run's v1 cgroups (a hybrid layout's limits) before its user
        // namespace: the init and every program inherit them.
        if let Some(cgroup) = &setup.cgroup {
            cgroup.join_also()?;
        }
        if let Some(namespaces) = &setup.namespaces {
            isolate::join_and_unshare(namespaces)?;
        }
        if let Some(most) = setup.max_processes {
            // The stand-in and the init count too; never above the user's
            // own hard limit, which an unprivileged process cannot raise.
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            check(libc::getrlimit(libc::RLIMIT_NPROC, &mut limit))?;
            let most = most.saturating_add(2).min(limit.rlim_max);
            limit = libc::rlimit {
                rlim_cur: most,
                rlim_max: most,
            };
            check(libc::setrlimit(libc::RLIMIT_NPROC, &limit))?;
        }
        let init = isolate::fork_into(setup.cgroup.as_ref())?;
        if init > 0 {
            stand_in(init);
        }
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
        // A copy of moat's memory: not dumpable, so no program reads it or
        // its environment; and nothing of moat's command line shown.
        check(libc::prctl(libc::PR_SET_DUMPABLE, 0))?;
        libc::prctl(libc::PR_SET_NAME, c"moat-init".as_ptr());
        if let Some(text) = setup.startup_text {
            text.blank();
        }
        // Without a PID namespace the programs' orphans go where they
        // went before (moat, which adopts them where it has no cgroup).
        if setup.namespaces.is_some() {
            isolate::mount_private_proc()?;
            isolate::mount_read_only(&setup.read_only);
        }
        // The programs start from the defaults, not moat's.
        for signal in 1..32 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let mut children: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut children);
        libc::sigaddset(&mut children, libc::SIGCHLD);
        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            &children,
            std::ptr::null_mut(),
        ))?;
        let signals = libc::signalfd(-1, &children, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        check(signals)?;
        isolate::drop_capabilities()?;
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        crate::process::seccomp::install(&setup.seccomp)?;
        let listener = match &setup.connect_filter {
            Some(filter) => Some(crate::process::seccomp::install_with_listener(filter)?),
            None => None,
        };
        keep_only(&[setup.socket.as_raw_fd(), signals, listener.unwrap_or(-1)]);
        Ok((signals, listener))
    }
}

/// The stand-in: stays in moat's namespaces while the init lives, so that
/// the init's parent-death signal means "moat died".
unsafe fn stand_in(init: libc::pid_t) -> ! {
    // SAFETY: see the module's doc.
    unsafe {
        keep_only(&[]);
        loop {
            let mut status = 0;
            if libc::waitpid(init, &mut status, 0) == init
                || *libc::__errno_location() != libc::EINTR
            {
                libc::_exit(0);
            }
        }
    }
}

/// The programs the init follows: (pid, request id) pairs.
struct Programs {
    followed: [(libc::pid_t, u64); MAX_PROGRAMS],
    count: usize,
}

/// Serves requests until the host closes its end.
unsafe fn serve(socket: RawFd, signals: RawFd, setup: &InitSetup) -> ! {
    let mut programs = Programs {
        followed: [(0, 0); MAX_PROGRAMS],
        count: 0,
    };
    // SAFETY: see the module's doc.
    unsafe {
        loop {
            let mut ready = [
                libc::pollfd {
                    fd: socket,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: signals,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(ready.as_mut_ptr(), 2, -1) == -1 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(1);
            }
            if ready[1].revents != 0 {
                reap(socket, signals, &mut programs);
            }
            if ready[0].revents != 0 {
                let mut words = [0u64; 2];
                let mut fds = [-1; MAX_FDS];
                match wire::receive(socket, &mut words, &mut fds) {
                    // The host is done with the run: the init's end ends
                    // everything in the namespace.
                    Ok(got) if got.words == 0 => libc::_exit(0),
                    Err(_) => libc::_exit(0),
                    Ok(_) if words[1] & request::SOCKET != 0 => {
                        make_socket(socket, words);
                    }
                    Ok(got) => {
                        spawn(socket, words, &fds[..got.fds], setup, &mut programs);
                        for fd in &fds[..got.fds] {
                            libc::close(*fd);
                        }
                    }
                }
            }
        }
    }
}

/// Reaps every child that ended, reporting the programs'.
unsafe fn reap(socket: RawFd, signals: RawFd, programs: &mut Programs) {
    // SAFETY: see the module's doc.
    unsafe {
        let mut info: libc::signalfd_siginfo = std::mem::zeroed();
        while libc::read(
            signals,
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            std::mem::size_of::<libc::signalfd_siginfo>(),
        ) > 0
        {}
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if pid <= 0 {
                return;
            }
            let Some(at) = programs.followed[..programs.count]
                .iter()
                .position(|&(followed, _)| followed == pid)
            else {
                continue;
            };
            let (_, id) = programs.followed[at];
            programs.count -= 1;
            programs.followed[at] = programs.followed[programs.count];
            let _ = wire::send(socket, &[report::EXITED, id, status as u32 as u64], &[]);
        }
    }
}

/// Makes a non-blocking TCP socket of the run's network for the host: the
/// request's id, and the family in its flags.
unsafe fn make_socket(socket: RawFd, words: [u64; 2]) {
    let [id, flags] = words;
    let family = (flags >> request::FAMILY_SHIFT) as i32;
    // SAFETY: see the module's doc.
    unsafe {
        if family != libc::AF_INET && family != libc::AF_INET6 {
            let _ = wire::send(socket, &[report::STARTED, id, libc::EINVAL as u64], &[]);
            return;
        }
        let made = libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        if made == -1 {
            let errno = *libc::__errno_location();
            let _ = wire::send(socket, &[report::STARTED, id, errno as u64], &[]);
            return;
        }
        let _ = wire::send(socket, &[report::STARTED, id, 0], &[made]);
        libc::close(made);
    }
}

/// Starts one program: `words` are the request's id and flags, `fds` its
/// descriptors (the request's memory file, stdin, stdout, stderr, and the
/// Landlock ruleset when the flags say so).
unsafe fn spawn(
    socket: RawFd,
    words: [u64; 2],
    fds: &[RawFd],
    setup: &InitSetup,
    programs: &mut Programs,
) {
    let [id, flags] = words;
    let refuse = |errno: i32| {
        let _ = wire::send(socket, &[report::STARTED, id, errno as u64], &[]);
    };
    let with_ruleset = flags & request::HAS_RULESET != 0;
    if fds.len() != 4 + usize::from(with_ruleset) || programs.count == MAX_PROGRAMS {
        return refuse(libc::EINVAL);
    }
    // SAFETY: see the module's doc; the mappings are unmapped before
    // returning, and the strings are checked to end inside them.
    unsafe {
        let Some(call) = Call::map(fds[0]) else {
            return refuse(libc::EINVAL);
        };
        let mut exec_status = [-1; 2];
        if libc::pipe2(exec_status.as_mut_ptr(), libc::O_CLOEXEC) == -1 {
            call.unmap();
            return refuse(*libc::__errno_location());
        }
        let forked = isolate::raw_fork();
        if let Ok(0) = forked {
            // (Lazily: without a ruleset there is no fifth descriptor, and
            // nothing here may panic.)
            let ruleset = if with_ruleset {
                fds.get(4).copied()
            } else {
                None
            };
            let proc_access = setup.namespaces.is_some().then_some(setup.proc_access);
            let errno = program(
                &call,
                Hello { socket, id },
                [fds[1], fds[2], fds[3]],
                ruleset,
                proc_access,
            );
            libc::write(exec_status[1], (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
        libc::close(exec_status[1]);
        call.unmap();
        let pid = match forked {
            Ok(pid) => pid,
            Err(error) => {
                libc::close(exec_status[0]);
                return refuse(error.raw_os_error().unwrap_or(libc::EIO));
            }
        };
        let mut errno: i32 = 0;
        let got = loop {
            let got = libc::read(exec_status[0], (&mut errno as *mut i32).cast(), 4);
            if got >= 0 || *libc::__errno_location() != libc::EINTR {
                break got;
            }
        };
        libc::close(exec_status[0]);
        if got == 4 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            return refuse(errno);
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as RawFd;
        if pidfd < 0 {
            let errno = *libc::__errno_location();
            // Reaped with the others; never reported, never followed.
            libc::kill(pid, libc::SIGKILL);
            return refuse(errno);
        }
        programs.followed[programs.count] = (pid, id);
        programs.count += 1;
        let _ = wire::send(socket, &[report::STARTED, id, 0], &[pidfd]);
        libc::close(pidfd);
    }
}

/// How a program tells the host its process id: a message on the init's
/// socket, to which the kernel adds the sender's credentials.
struct Hello {
    socket: RawFd,
    id: u64,
}

/// In the program's process: tells the host its pid, takes its
/// descriptors, enters its domain and execs; returns only the errno of
/// what failed.
unsafe fn program(
    call: &Call,
    hello: Hello,
    stdio: [RawFd; 3],
    ruleset: Option<RawFd>,
    proc_access: Option<u64>,
) -> i32 {
    // SAFETY: see the module's doc.
    unsafe {
        let errno = || *libc::__errno_location();
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Its own process group, which moat signals; dead with the init.
        if libc::setpgid(0, 0) == -1 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
            return errno();
        }
        if let Err(error) = wire::send(hello.socket, &[report::HELLO, hello.id, 0], &[]) {
            return error.raw_os_error().unwrap_or(libc::EIO);
        }
        for (target, fd) in stdio.into_iter().enumerate() {
            if libc::dup2(fd, target as RawFd) == -1 {
                return errno();
            }
        }
        // Nothing else crosses the exec (the exec status pipe closes
        // there, which tells the init the exec happened).
        if libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as i32) == -1 {
            return errno();
        }
        if libc::chdir(call.cwd) == -1 {
            return errno();
        }
        if let Some(ruleset) = ruleset {
            if let Some(access) = proc_access
                && let Err(error) = isolate::allow_private_proc(ruleset, access)
            {
                return error.raw_os_error().unwrap_or(libc::EIO);
            }
            if let Err(error) = isolate::restrict_self(ruleset) {
                return error.raw_os_error().unwrap_or(libc::EIO);
            }
        }
        libc::execve(call.program, call.argv, call.envp);
        errno()
    }
}

/// A request's strings, mapped, and the arrays `execve` takes.
struct Call {
    request: (*mut libc::c_void, usize),
    arrays: (*mut libc::c_void, usize),
    program: *const libc::c_char,
    cwd: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
}

impl Call {
    /// Maps the request in memory file `fd`: `argc` and `envc` (32 bits
    /// each), then NUL-terminated: the program, the working directory,
    /// each argument (the program's name first), each `NAME=VALUE`.
    unsafe fn map(fd: RawFd) -> Option<Self> {
        // SAFETY: fstat and mmap of the host's memory file; every string
        // read is checked to end inside the mapping.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut stat) == -1 || stat.st_size < 8 {
                return None;
            }
            let size = stat.st_size as usize;
            let bytes = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd,
                0,
            );
            if bytes == libc::MAP_FAILED {
                return None;
            }
            let data = std::slice::from_raw_parts(bytes.cast::<u8>(), size);
            let argc = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
            let envc = u32::from_ne_bytes([data[4], data[5], data[6], data[7]]) as usize;
            let pointers = (argc + 1 + envc + 1) * std::mem::size_of::<usize>();
            if argc == 0 || argc + envc > size {
                libc::munmap(bytes, size);
                return None;
            }
            let arrays = libc::mmap(
                std::ptr::null_mut(),
                pointers,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if arrays == libc::MAP_FAILED {
                libc::munmap(bytes, size);
                return None;
            }
            let slots = std::slice::from_raw_parts_mut(
                arrays.cast::<*const libc::c_char>(),
                argc + 1 + envc + 1,
            );
            let mut at = 8;
            let mut next = || -> Option<*const libc::c_char> {
                let end = data[at..].iter().position(|&b| b == 0)?;
                let string = data[at..].as_ptr().cast();
                at += end + 1;
                Some(string)
            };
            let mut strings = || -> Option<(*const libc::c_char, *const libc::c_char)> {
                let program = next()?;
                let cwd = next()?;
                for slot in slots[..argc].iter_mut() {
                    *slot = next()?;
                }
                slots[argc] = std::ptr::null();
                for slot in slots[argc + 1..argc + 1 + envc].iter_mut() {
                    *slot = next()?;
                }
                slots[argc + 1 + envc] = std::ptr::null();
                Some((program, cwd))
            };
            let Some((program, cwd)) = strings() else {
                libc::munmap(bytes, size);
                libc::munmap(arrays, pointers);
                return None;
            };
            Some(Self {
                request: (bytes, size),
                arrays: (arrays, pointers),
                program,
                cwd,
                argv: arrays.cast(),
                envp: arrays.cast::<*const libc::c_char>().add(argc + 1),
            })
        }
    }

    /// Unmaps the request and the arrays.
    unsafe fn unmap(&self) {
        // SAFETY: the mappings made by `map`, no longer used.
        unsafe {
            libc::munmap(self.request.0, self.request.1);
            libc::munmap(self.arrays.0, self.arrays.1);
        }
    }
}

/// Closes every descriptor but `keep` (sorted or not).
unsafe fn keep_only(keep: &[RawFd]) {
    // SAFETY: closing descriptors of this process only.
    unsafe {
        let mut from: u32 = 0;
        loop {
            let next = keep
                .iter()
                .filter(|&&fd| fd >= 0 && fd as u32 >= from)
                .min()
                .copied();
            match next {
                Some(fd) => {
                    if fd as u32 > from {
                        libc::close_range(from, fd as u32 - 1, 0);
                    }
                    from = fd as u32 + 1;
                }
                None => {
                    libc::close_range(from, u32::MAX, 0);
                    return;
                }
            }
        }
    }
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
