//! Messages that carry descriptors over a Unix socket (`SCM_RIGHTS`): a
//! few 64-bit words, and up to [`MAX_FDS`] descriptors. Allocation-free,
//! for processes between fork and exec: the namespace helper
//! ([`crate::egress`]) and a run's init ([`crate::process`]).

use std::io;
use std::os::fd::RawFd;

/// The most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 5;

/// Room for [`MAX_FDS`] descriptors in a control message, aligned as the
/// kernel's headers are.
#[repr(C, align(8))]
struct Control([u8; 128]);

/// Sends `words` and `fds` as one message, never raising `SIGPIPE`.
pub(crate) fn send(socket: RawFd, words: &[u64], fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut control = Control([0; 128]);
    // SAFETY: the message points at `words` and `control`, which outlive
    // the call; the CMSG macros stay inside `control` (sized for MAX_FDS).
    unsafe {
        let mut iov = libc::iovec {
            iov_base: words.as_ptr() as *mut libc::c_void,
            iov_len: std::mem::size_of_val(words),
        };
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds) as u32;
            message.msg_control = control.0.as_mut_ptr().cast();
            message.msg_controllen = libc::CMSG_SPACE(bytes) as _;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                bytes as usize,
            );
        }
        loop {
            if libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) >= 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

/// What one message brought.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Received {
    /// Whole words (0: the other side closed).
    pub(crate) words: usize,
    /// Descriptors.
    pub(crate) fds: usize,
    /// The sender's process id, when the socket passes credentials.
    pub(crate) sender: Option<libc::pid_t>,
}

/// Receives one message: its words into `words`, its descriptors
/// (close-on-exec) into `fds`.
pub(crate) fn receive(
    socket: RawFd,
    words: &mut [u64],
    fds: &mut [RawFd; MAX_FDS],
) -> io::Result<Received> {
    let mut control = Control([0; 128]);
    // SAFETY: as in `send`; the descriptors are read from the kernel's
    // header only when it says they are there.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: words.as_mut_ptr().cast(),
            iov_len: std::mem::size_of_val(words),
        };
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = control.0.len() as _;
        let got = loop {
            let got = libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC);
            if got >= 0 {
                break got as usize;
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        };
        let mut count = 0;
        let mut sender = None;
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET
                && (*header).cmsg_type == libc::SCM_CREDENTIALS
            {
                let credentials: libc::ucred =
                    std::ptr::read_unaligned(libc::CMSG_DATA(header).cast());
                sender = Some(credentials.pid);
            }
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header);
                let bytes = (*header).cmsg_len as usize - (data as usize - header as usize);
                for at in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(at));
                    if count < MAX_FDS {
                        fds[count] = fd;
                        count += 1;
                    } else {
                        libc::close(fd);
                    }
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
        if message.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
            for fd in &fds[..count] {
                libc::close(*fd);
            }
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        Ok(Received {
            words: got / 8,
            fds: count,
            sender,
        })
    }
}
