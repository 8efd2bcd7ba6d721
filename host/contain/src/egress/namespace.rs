//! The network namespace of a run's programs: only a loopback interface,
//! and on it the listening socket of the run's proxy.
//!
//! A helper process, forked for the purpose, makes the namespace (in a
//! user namespace of its own first when the host may not make one
//! directly: an unprivileged user), brings its loopback up, opens the
//! proxy's listening socket on `127.0.0.1` inside it, and hands the host
//! the socket and the namespaces' handles over a socket pair. The host
//! accepts on the socket from its own namespace and connects out from
//! there: the proxy is the only way between the two. The namespace lives
//! as long as a handle or the socket does.
//!
//! The helper only makes system calls between fork and exit (it never
//! returns into Rust code that could allocate or take a lock another
//! thread held at the fork).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The handles of a run's network namespace.
#[derive(Debug)]
pub(crate) struct RunNamespace {
    /// The network namespace (`/proc/self/ns/net` of the helper).
    pub(crate) net: OwnedFd,
    /// The user namespace that owns it, when the host could not make a
    /// network namespace without one.
    pub(crate) user: Option<OwnedFd>,
    /// The proxy's listening socket, `127.0.0.1:port` inside the namespace.
    pub(crate) listener: std::net::TcpListener,
}

/// The namespaces a run's init joins: the run's network namespace (and the
/// user namespace that owns it, if any).
#[derive(Debug, Clone)]
pub(crate) struct Namespaces {
    pub(crate) net: std::sync::Arc<OwnedFd>,
    pub(crate) user: Option<std::sync::Arc<OwnedFd>>,
}

/// The steps of the helper, named in an error.
const STEPS: [&str; 7] = [
    "make a network namespace",
    "map the user into a user namespace",
    "bring the loopback interface up",
    "open the proxy's socket",
    "open the namespace's handle",
    "hand the namespace to moat",
    "fork",
];

/// Makes a network namespace for a run's programs.
pub(crate) fn create() -> io::Result<RunNamespace> {
    let (ours, theirs) = UnixStream::pair()?;
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let maps = IdMaps {
        uid: CString::new(format!("{uid} {uid} 1")).expect("no NUL"),
        gid: CString::new(format!("{gid} {gid} 1")).expect("no NUL"),
    };
    // SAFETY: the child makes only system calls on memory prepared here and
    // leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let answer = match helper(&maps) {
            Ok((fds, count)) => send(theirs.as_raw_fd(), 0, 0, &fds[..count]),
            Err((step, errno)) => send(theirs.as_raw_fd(), step + 1, errno, &[]),
        };
        // SAFETY: leaving the forked child without running destructors.
        unsafe { libc::_exit(if answer.is_ok() { 0 } else { 1 }) };
    }
    drop(theirs);
    let received = receive(&ours);
    let mut status = 0;
    // SAFETY: reaping the helper forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let (step, errno, mut fds) = received?;
    if step != 0 {
        let step = STEPS
            .get(step as usize - 1)
            .copied()
            .unwrap_or("an unknown step");
        let error = io::Error::from_raw_os_error(errno);
        return Err(io::Error::new(
            error.kind(),
            format!("cannot {step}: {error}"),
        ));
    }
    if fds.len() < 2 {
        return Err(io::Error::other(
            "the namespace helper sent too few handles",
        ));
    }
    let user = (fds.len() == 3).then(|| fds.pop().expect("three"));
    let net = fds.pop().expect("two");
    let listener = std::net::TcpListener::from(fds.pop().expect("one"));
    listener.set_nonblocking(true)?;
    Ok(RunNamespace {
        net,
        user,
        listener,
    })
}

/// The user namespace's ID maps: the user as itself, nothing else.
struct IdMaps {
    uid: CString,
    gid: CString,
}

/// The helper's work: the descriptors to send and how many there are;
/// else the step that failed and its `errno`.
fn helper(maps: &IdMaps) -> Result<([RawFd; 3], usize), (u8, i32)> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    let mut fds = [-1; 3];
    // SAFETY: system calls on valid pointers; see `create`.
    unsafe {
        let mut owned_user = false;
        if libc::unshare(libc::CLONE_NEWNET) == -1 {
            if errno() != libc::EPERM {
                return Err((0, errno()));
            }
            // Not privileged here: a user namespace of our own first.
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == -1 {
                return Err((0, errno()));
            }
            owned_user = true;
            for (file, text) in [
                (c"/proc/self/setgroups", c"deny"),
                (c"/proc/self/uid_map", maps.uid.as_c_str()),
                (c"/proc/self/gid_map", maps.gid.as_c_str()),
            ] {
                write_file(file, text).map_err(|e| (1, e))?;
            }
        }
        loopback_up().map_err(|e| (2, e))?;
        fds[0] = listen_on_loopback().map_err(|e| (3, e))?;
        fds[1] = libc::open(
            c"/proc/self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fds[1] == -1 {
            return Err((4, errno()));
        }
        if owned_user {
            fds[2] = libc::open(
                c"/proc/self/ns/user".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fds[2] == -1 {
                return Err((4, errno()));
            }
        }
    }
    Ok((fds, if fds[2] == -1 { 2 } else { 3 }))
}

/// Writes `text` to `file` (a `/proc` file of the helper).
unsafe fn write_file(file: &std::ffi::CStr, text: &std::ffi::CStr) -> Result<(), i32> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: valid C strings.
    unsafe {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd == -1 {
            return Err(errno());
        }
        let bytes = text.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = errno();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}

/// Brings `lo` up in the current network namespace.
unsafe fn loopback_up() -> Result<(), i32> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: an ioctl on a socket with a zeroed, named request.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket == -1 {
            return Err(errno());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (at, byte) in b"lo".iter().enumerate() {
            request.ifr_name[at] = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let set = libc::ioctl(socket, libc::SIOCSIFFLAGS, &mut request);
        let error = errno();
        libc::close(socket);
        if set == -1 {
            return Err(error);
        }
    }
    Ok(())
}

/// A listening TCP socket on `127.0.0.1`, on a port the kernel picks.
unsafe fn listen_on_loopback() -> Result<RawFd, i32> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: socket calls on a zeroed address of the right size.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if socket == -1 {
            return Err(errno());
        }
        let mut address: libc::sockaddr_in = std::mem::zeroed();
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let bound = libc::bind(
            socket,
            (&address as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if bound == -1 || libc::listen(socket, 128) == -1 {
            let error = errno();
            libc::close(socket);
            return Err(error);
        }
        Ok(socket)
    }
}

/// Sends the step (0: done), an `errno` and `fds` over `socket`.
fn send(socket: RawFd, step: u8, errno: i32, fds: &[RawFd]) -> Result<(), i32> {
    crate::fd_message::send(socket, &[u64::from(step), errno as u32 as u64], fds)
        .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO))
}

/// What the helper sent: its step, `errno` and descriptors.
fn receive(socket: &UnixStream) -> io::Result<(u8, i32, Vec<OwnedFd>)> {
    let mut words = [0u64; 2];
    let mut fds = [-1; crate::fd_message::MAX_FDS];
    let got = crate::fd_message::receive(socket.as_raw_fd(), &mut words, &mut fds)?;
    // SAFETY: descriptors the kernel just gave this process.
    let fds = fds[..got.fds]
        .iter()
        .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if got.words != 2 {
        return Err(io::Error::other(
            "the namespace helper exited without an answer",
        ));
    }
    Ok((words[0] as u8, words[1] as u32 as i32, fds))
}
