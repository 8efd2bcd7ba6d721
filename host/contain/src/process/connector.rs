//! The connections of a contained run's programs, made by moat for them.
//!
//! In the run's own network namespace a program may reach what its run
//! serves: TCP and UDP on the namespace's loopback, abstract Unix sockets
//! (the namespace's own), and named Unix sockets inside the run's write
//! grants and private directory. Landlock (before ABI 9) does not check
//! which named socket a `connect` reaches, and the kernel's check of a
//! path in the program's memory would be raced by its other threads. So
//! every `connect` of the run's programs stops at a seccomp user
//! notification ([`super::seccomp::connect_filter`]), and this thread,
//! in the host, makes it:
//!
//! - it copies the address from the program's memory once, and takes a
//!   duplicate of the program's socket (`pidfd_getfd`): the same open
//!   socket, so what moat connects is connected for the program, with
//!   its options and its non-blocking mode;
//! - a named Unix socket's path is opened (`O_PATH`, as the program would
//!   resolve it from its working directory), the socket found checked to
//!   lie inside the places the run may reach, and connected through that
//!   very descriptor (`/proc/self/fd/N`): a path swapped for a symbolic
//!   link in between reaches nothing else;
//! - every other address is connected as given: the socket is of the
//!   run's namespace, where only its loopback and the proxy are.
//!
//! A refusal is `EACCES`, as the socket filter's, and is recorded in the
//! run's [`DenialLog`] (a `CAPABILITY_DENIED` event naming
//! `--allow-unix-socket`). The program's call
//! returns what moat's returned; a socket's peer sees moat's process id
//! (the user's, as the program's).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use moat_engine::{Denial, DeniedRequest, Grant};

use crate::denials::DenialLog;
use crate::traffic::{Caller, Traffic};

/// Where a run's programs may reach named Unix sockets.
#[derive(Debug, Clone, Default)]
pub(crate) struct SocketPlaces {
    /// Directories (canonical): sockets anywhere inside.
    dirs: Vec<PathBuf>,
    /// Sockets granted one by one (`--allow-unix-socket`, canonical).
    sockets: Vec<PathBuf>,
}

impl SocketPlaces {
    /// Sockets inside `dirs`, and `sockets`.
    pub(crate) fn new(dirs: Vec<PathBuf>, sockets: Vec<PathBuf>) -> Self {
        let dirs = dirs
            .into_iter()
            .map(|dir| std::fs::canonicalize(&dir).unwrap_or(dir))
            .collect();
        Self { dirs, sockets }
    }

    /// Whether the socket at `path` (canonical) may be reached.
    fn allows(&self, path: &Path) -> bool {
        self.sockets.iter().any(|socket| path == socket)
            || self.dirs.iter().any(|dir| path.starts_with(dir))
    }
}

/// Where the callers of connections to the run's proxy are noted: who
/// made each of the run's requests ([`crate::traffic::Caller`]).
#[derive(Debug, Clone)]
pub(crate) struct ProxyCallers {
    /// The run's traffic record.
    pub(crate) traffic: Traffic,
    /// The proxy's port on the run's loopback.
    pub(crate) port: u16,
}

/// The thread answering a run's programs' connections; it ends when this
/// is dropped (or every program under the filter is gone).
pub(crate) struct Connector {
    /// Closed at the drop: the thread sees its end hang up.
    _stop: OwnedFd,
}

impl Connector {
    /// Answers the notifications of `listener` with `places`, recording
    /// refusals in `denials` and who connects to the proxy in `proxy`.
    pub(crate) fn start(
        listener: OwnedFd,
        places: SocketPlaces,
        denials: DenialLog,
        proxy: Option<ProxyCallers>,
    ) -> io::Result<Self> {
        let (stop_read, stop_write) = pipe()?;
        let answers = Answers {
            places,
            denials,
            proxy,
        };
        std::thread::Builder::new()
            .name("moat-connector".into())
            .spawn(move || serve(&listener, &stop_read, &answers))?;
        Ok(Self { _stop: stop_write })
    }
}

/// What the connector answers with.
struct Answers {
    places: SocketPlaces,
    denials: DenialLog,
    proxy: Option<ProxyCallers>,
}

/// Reads and answers notifications until told to stop.
fn serve(listener: &OwnedFd, stop: &OwnedFd, answers: &Answers) {
    loop {
        let mut ready = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds on descriptors this thread holds.
        if unsafe { libc::poll(ready.as_mut_ptr(), 2, -1) } == -1 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if ready[1].revents != 0 {
            return;
        }
        if ready[0].revents & libc::POLLIN == 0 {
            // Hung up: no process holds the filter any more.
            return;
        }
        // SAFETY: the kernel wants a zeroed buffer of its own size.
        let mut call: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl writes a `seccomp_notif` into `call`.
        let received = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut call,
            )
        };
        if received == -1 {
            match io::Error::last_os_error().raw_os_error() {
                // The caller died, or a signal came before moat read it.
                Some(libc::ENOENT | libc::EINTR) => continue,
                _ => return,
            }
        }
        let result = connect_for(listener, &call, answers);
        let mut answer = libc::seccomp_notif_resp {
            id: call.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        if let Err(errno) = result {
            answer.error = -errno;
        }
        // SAFETY: the ioctl reads the answer. An answer to a caller gone
        // meanwhile fails with ENOENT, and nothing is left to do.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                &mut answer,
            );
        }
    }
}

/// Makes the connection `call` asks for; `Err(errno)` is what the
/// program's `connect` returns.
fn connect_for(
    listener: &OwnedFd,
    call: &libc::seccomp_notif,
    answers: &Answers,
) -> Result<(), i32> {
    let [fd, address_at, length, ..] = call.data.args;
    // `connect(int, const struct sockaddr *, socklen_t)`.
    let length = length as u32 as usize;
    if length > std::mem::size_of::<libc::sockaddr_storage>() {
        return Err(libc::EINVAL);
    }
    // The calling thread's id: often not its process's (a runtime's
    // network thread).
    let pid = call.pid as libc::pid_t;
    let pidfd = open_thread(pid)?;
    let mut address = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
    read_memory(pid, address_at, &mut address[..length])?;
    // Still waiting in its call: the pid (and the memory read) were the
    // caller's, not a process that took its id.
    still_waiting(listener, call.id)?;
    // SAFETY: pidfd_getfd duplicates the caller's descriptor into moat.
    let socket = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd as i32, 0) };
    if socket < 0 {
        return Err(errno());
    }
    // SAFETY: a descriptor just made.
    let socket = unsafe { OwnedFd::from_raw_fd(socket as RawFd) };
    let family = socket_family(&socket)?;
    let named_unix = family == libc::AF_UNIX && length > 2 && address[2] != 0;
    if !named_unix {
        let connected = connect(&socket, &address[..length]);
        // Made (or under way, for a non-blocking socket): its caller is
        // noted before the program can send anything on it.
        if let Some(proxy) = &answers.proxy
            && matches!(connected, Ok(()) | Err(libc::EINPROGRESS))
            && loopback_port(&address[..length]) == Some(proxy.port)
        {
            note_caller(proxy, &socket, pid);
        }
        return connected;
    }
    let path = &address[2..length];
    let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
    let target = as_the_program_sees(pid, Path::new(OsStr::from_bytes(path)))?;
    let found = open_socket(&target)?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", found.as_raw_fd()))
        .map_err(|_| libc::EACCES)?;
    if !answers.places.allows(&real) {
        let path = real.to_string_lossy().into_owned();
        answers.denials.record(Denial {
            request: DeniedRequest::UnixSocket { path: path.clone() },
            reason: "it lies outside the run's write grants and its private directory".into(),
            remedy: Some(Grant::UnixSocket { path }),
        });
        return Err(libc::EACCES);
    }
    let through = format!("/proc/self/fd/{}", found.as_raw_fd());
    connect(&socket, &unix_address(through.as_bytes()))
}

/// The port of `address` (a `sockaddr_in` or `sockaddr_in6`) when it is
/// on a loopback address.
fn loopback_port(address: &[u8]) -> Option<u16> {
    let ip = socket_address(address)?;
    ip.ip().is_loopback().then_some(ip.port())
}

/// `address` (a `sockaddr_in` or `sockaddr_in6`, as the kernel lays them
/// out) as a Rust address.
fn socket_address(address: &[u8]) -> Option<std::net::SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([*address.first()?, *address.get(1)?]));
    let port = u16::from_be_bytes([*address.get(2)?, *address.get(3)?]);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = address.get(4..8)?.try_into().ok()?;
            Some((std::net::Ipv4Addr::from(ip), port).into())
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = address.get(8..24)?.try_into().ok()?;
            let ip = std::net::Ipv6Addr::from(ip);
            // A v4 address mapped into v6 is the v4 one to the kernel.
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => (v4, port).into(),
                None => (ip, port).into(),
            })
        }
        _ => None,
    }
}

/// Notes thread `tid`'s process as the caller of `socket`, a connection
/// to the proxy, by the socket's own address (what the proxy sees it
/// come from). A caller moat cannot read is left unknown.
fn note_caller(proxy: &ProxyCallers, socket: &OwnedFd, tid: libc::pid_t) {
    let mut address = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
    let mut length = address.len() as libc::socklen_t;
    // SAFETY: getsockname writes at most `length` bytes into `address`.
    let named =
        unsafe { libc::getsockname(socket.as_raw_fd(), address.as_mut_ptr().cast(), &mut length) };
    if named == -1 {
        return;
    }
    let Some(from) = socket_address(&address[..length as usize]) else {
        return;
    };
    let Ok(process) = process_of(tid) else {
        return;
    };
    let program = std::fs::read_to_string(format!("/proc/{process}/comm"))
        .map(|comm| comm.trim_end().to_owned())
        .unwrap_or_default();
    proxy.traffic.note_caller(
        from,
        Caller {
            pid: process as u32,
            program,
        },
    );
}

/// A pidfd of thread `tid`, whose descriptor table `pidfd_getfd` reads:
/// the thread's own (`PIDFD_THREAD`, Linux 6.9), or on older kernels
/// its process's, which its threads share unless one unshared it.
/// Checked by the caller to still be the caller's.
fn open_thread(tid: libc::pid_t) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_open of a thread id.
    let mut pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if pidfd < 0 && errno() == libc::EINVAL {
        let process = process_of(tid)?;
        // SAFETY: pidfd_open of a process id.
        pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, process, 0) };
    }
    if pidfd < 0 {
        return Err(libc::ESRCH);
    }
    // SAFETY: a descriptor just made.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) })
}

/// `pidfd_open`'s flag for a thread (`O_EXCL`), not in the libc crate.
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// The process (thread group) of thread `tid`.
fn process_of(tid: libc::pid_t) -> Result<libc::pid_t, i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| libc::ESRCH)?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|tgid| tgid.trim().parse().ok())
        .ok_or(libc::ESRCH)
}

/// `path` as the program would resolve it: relative to its working
/// directory.
fn as_the_program_sees(pid: libc::pid_t, path: &Path) -> Result<PathBuf, i32> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|_| libc::ESRCH)?;
    Ok(cwd.join(path))
}

/// The socket at `path` (symbolic links followed, as `connect` does),
/// held by an `O_PATH` descriptor; `ECONNREFUSED` when it is not a
/// socket, as `connect` says.
fn open_socket(path: &Path) -> Result<OwnedFd, i32> {
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: open of a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a descriptor just made.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fstat into a zeroed stat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } == -1 {
        return Err(errno());
    }
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED);
    }
    Ok(fd)
}

/// A `sockaddr_un` naming `path`.
fn unix_address(path: &[u8]) -> Vec<u8> {
    let mut address = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes().to_vec();
    address.extend_from_slice(path);
    address.push(0);
    address
}

/// `connect(socket, address)`, retried when interrupted.
fn connect(socket: &OwnedFd, address: &[u8]) -> Result<(), i32> {
    loop {
        // SAFETY: the address is `address.len()` bytes long.
        let connected = unsafe {
            libc::connect(
                socket.as_raw_fd(),
                address.as_ptr().cast(),
                address.len() as libc::socklen_t,
            )
        };
        if connected == 0 {
            return Ok(());
        }
        match errno() {
            libc::EINTR => continue,
            other => return Err(other),
        }
    }
}

/// The family of `socket` (`ENOTSOCK` when it is none).
fn socket_family(socket: &OwnedFd) -> Result<i32, i32> {
    let mut family: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut family as *mut libc::c_int).cast(),
            &mut size,
        )
    };
    if got == -1 {
        return Err(errno());
    }
    Ok(family)
}

/// Copies `into.len()` bytes at `at` of process `pid`.
fn read_memory(pid: libc::pid_t, at: u64, into: &mut [u8]) -> Result<(), i32> {
    if into.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: into.as_mut_ptr().cast(),
        iov_len: into.len(),
    };
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: into.len(),
    };
    // SAFETY: writes at most `into.len()` bytes into `into`.
    let read = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if read != into.len() as isize {
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// `Ok` while the call `id` still waits for its answer.
fn still_waiting(listener: &OwnedFd, id: u64) -> Result<(), i32> {
    let mut id = id;
    // SAFETY: the ioctl reads a u64.
    let valid = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &mut id,
        )
    };
    if valid == -1 {
        return Err(libc::ESRCH);
    }
    Ok(())
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [-1; 2];
    // SAFETY: pipe2 fills `ends`.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: descriptors just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of `address` as the kernel lays them out.
    fn raw(address: std::net::SocketAddr) -> Vec<u8> {
        let mut bytes = Vec::new();
        match address {
            std::net::SocketAddr::V4(v4) => {
                bytes.extend((libc::AF_INET as u16).to_ne_bytes());
                bytes.extend(v4.port().to_be_bytes());
                bytes.extend(v4.ip().octets());
                bytes.extend([0; 8]);
            }
            std::net::SocketAddr::V6(v6) => {
                bytes.extend((libc::AF_INET6 as u16).to_ne_bytes());
                bytes.extend(v6.port().to_be_bytes());
                bytes.extend([0; 4]);
                bytes.extend(v6.ip().octets());
                bytes.extend([0; 4]);
            }
        }
        bytes
    }

    #[test]
    fn a_connection_to_the_proxy_is_known_by_its_loopback_address_and_port() {
        let v4: std::net::SocketAddr = "127.0.0.1:3128".parse().unwrap();
        assert_eq!(socket_address(&raw(v4)), Some(v4));
        assert_eq!(loopback_port(&raw(v4)), Some(3128));
        let mapped: std::net::SocketAddr = "[::ffff:127.0.0.1]:3128".parse().unwrap();
        assert_eq!(socket_address(&raw(mapped)), Some(v4));
        let v6: std::net::SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(loopback_port(&raw(v6)), Some(80));
        let away: std::net::SocketAddr = "10.0.0.1:3128".parse().unwrap();
        assert_eq!(loopback_port(&raw(away)), None);
        // Too short, or of another family: nothing.
        assert_eq!(socket_address(&raw(v4)[..6]), None);
        let mut unix = raw(v4);
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(socket_address(&unix), None);
    }
}
