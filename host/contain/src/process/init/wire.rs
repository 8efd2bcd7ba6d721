//! The messages between the host and a run's init, on a `SOCK_SEQPACKET`
//! pair: one message per request or report, a few 64-bit words, with
//! descriptors riding along ([`crate::fd_message`]). A request carries
//! five: its strings' memory file, the program's stdin, stdout and stderr,
//! and its Landlock ruleset.

pub(crate) use crate::fd_message::{MAX_FDS, Received, receive, send};

/// The init → host reports, the first word of each.
pub(crate) mod report {
    /// `[READY, 0, errno]`: the init is up (errno 0), or could not start.
    pub(crate) const READY: u64 = 0;
    /// `[STARTED, id, errno]` (+ the program's pidfd when errno is 0).
    pub(crate) const STARTED: u64 = 1;
    /// `[EXITED, id, wait status]`.
    pub(crate) const EXITED: u64 = 2;
    /// `[HELLO, id, 0]`, from the program itself before it execs: the
    /// kernel adds its credentials (the host's end has `SO_PASSCRED`),
    /// whence its process id in moat's namespace.
    pub(crate) const HELLO: u64 = 3;
}

/// Bits of a request's second word.
pub(crate) mod request {
    /// The fifth descriptor is a Landlock ruleset the program enters.
    pub(crate) const HAS_RULESET: u64 = 1;
    /// Not a program: a TCP socket of the run's network, of the family in
    /// the bits from [`FAMILY_SHIFT`], answered as `STARTED` with the
    /// socket in the pidfd's place (the proxy's way to the servers the
    /// run's programs start on its loopback).
    pub(crate) const SOCKET: u64 = 2;
    /// Where a socket request's family is.
    pub(crate) const FAMILY_SHIFT: u32 = 8;
}
