//! The sockets a contained program may create (seccomp-bpf), and the
//! connections it makes, which moat makes for it ([`connect_filter`]).
//!
//! Where a run's programs are in a network namespace of the run's own
//! ([`Network::Own`]), its loopback is theirs: they may open TCP and UDP
//! sockets of IPv4 and IPv6, bind, listen and connect there, and nothing
//! leaves but through the run's proxy. Where they share the host's
//! ([`Network::Hosts`]), Landlock holds their TCP connections to the
//! proxy's port and binds none, and only TCP sockets may be opened.
//! Either way, this filter removes every other way out:
//!
//! - Unix sockets: in the run's own network, stream and sequenced-packet
//!   ones, whose `connect` moat makes for the program after checking the
//!   socket's path ([`super::connector`]); abstract names are the
//!   namespace's own. Datagram ones are refused: every send may name
//!   another socket, which nothing checks. In the host's network, none
//!   (an abstract name there is the host's). Connected pairs
//!   (`socketpair`) stay allowed, but not datagram ones, for that reason.
//! - raw and packet sockets of IPv4 and IPv6: names are resolved by the
//!   run's proxy.
//! - in the host's network, stream sockets of IPv4 and IPv6 of any
//!   protocol but TCP (MPTCP, SCTP): Landlock's rules are TCP's.
//! - every other family (`AF_PACKET`, `AF_VSOCK`, `AF_BLUETOOTH`, …).
//! - `io_uring_setup`: an io_uring opens and connects sockets without the
//!   system calls this filter sees.
//!
//! Netlink stays: the C library reads the interfaces through it. What is
//! refused fails with `EACCES` ("Permission denied"), which the program
//! reports (libraries fall back from io_uring on any error). A system call
//! of another architecture (the 32-bit `socketcall`) kills the program.

use std::collections::BTreeMap;

use std::os::fd::RawFd;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, sock_filter,
};

/// The network a run's programs are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    /// A namespace of the run's own, whose loopback is theirs.
    Own,
    /// The host's: only TCP, which Landlock holds to the proxy's port.
    Hosts,
}

impl Network {
    /// The socket families programs may open, and the types of each.
    fn sockets(self) -> &'static [(i32, &'static [i32])] {
        const STREAM: &[i32] = &[libc::SOCK_STREAM];
        const STREAM_AND_DATAGRAM: &[i32] = &[libc::SOCK_STREAM, libc::SOCK_DGRAM];
        const STREAM_AND_PACKET: &[i32] = &[libc::SOCK_STREAM, libc::SOCK_SEQPACKET];
        const NETLINK: &[i32] = &[libc::SOCK_RAW, libc::SOCK_DGRAM];
        match self {
            Self::Own => &[
                (libc::AF_INET, STREAM_AND_DATAGRAM),
                (libc::AF_INET6, STREAM_AND_DATAGRAM),
                (libc::AF_UNIX, STREAM_AND_PACKET),
                (libc::AF_NETLINK, NETLINK),
            ],
            Self::Hosts => &[
                (libc::AF_INET, STREAM),
                (libc::AF_INET6, STREAM),
                (libc::AF_NETLINK, NETLINK),
            ],
        }
    }
}

/// The bits of `socket`'s type argument that name the type (the others are
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC`).
const TYPE_MASK: u64 = 0xf;

/// On x86_64, system calls of the x32 ABI are numbered from this bit; the
/// architecture check does not tell them apart.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// The architecture this filter is for, as the kernel names it in
/// `seccomp_data`.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// The compiled filter of programs in `network`. Built by the host before
/// the fork (building allocates); the child only installs it
/// ([`install`]).
pub(crate) fn socket_filter(network: Network) -> Result<BpfProgram, BackendError> {
    let refused = socket_rules(network)?;
    let pairs = pair_rules()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, refused.clone());
    rules.insert(libc::SYS_socketpair, pairs.clone());
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(X32_SYSCALL_BIT + libc::SYS_socket, refused);
        rules.insert(X32_SYSCALL_BIT + libc::SYS_socketpair, pairs);
    }
    // An empty chain: refused whatever the arguments.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )?;
    filter.try_into()
}

/// `socket`'s family argument compared with `family`.
fn family_is(op: SeccompCmpOp, family: i32) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, family as u64)
}

/// `socket`'s type argument (without its flags) equal to `kind`.
fn type_is(kind: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(TYPE_MASK),
        kind,
    )
}

/// The `socket` calls refused in `network`: any one of these rules
/// matching refuses.
fn socket_rules(network: Network) -> Result<Vec<SeccompRule>, BackendError> {
    let allowed = network.sockets();
    let mut rules = Vec::new();
    // A family not in the list: every condition "not this one" holds.
    rules.push(SeccompRule::new(
        allowed
            .iter()
            .map(|&(family, _)| family_is(SeccompCmpOp::Ne, family))
            .collect::<Result<_, _>>()?,
    )?);
    // A listed family, a type not listed for it. The filter compares with
    // a mask but cannot negate one, so every other type is named.
    for &(family, types) in allowed {
        for kind in (0..=TYPE_MASK).filter(|&kind| !types.contains(&(kind as i32))) {
            rules.push(SeccompRule::new(vec![
                family_is(SeccompCmpOp::Eq, family)?,
                type_is(kind)?,
            ])?);
        }
    }
    // In the host's network Landlock holds TCP only: a stream socket of
    // another protocol (MPTCP, SCTP) is refused; 0 is TCP's default.
    if network == Network::Hosts {
        for family in [libc::AF_INET, libc::AF_INET6] {
            rules.push(SeccompRule::new(vec![
                family_is(SeccompCmpOp::Eq, family)?,
                type_is(libc::SOCK_STREAM as u64)?,
                protocol_is(SeccompCmpOp::Ne, 0)?,
                protocol_is(SeccompCmpOp::Ne, libc::IPPROTO_TCP)?,
            ])?);
        }
    }
    Ok(rules)
}

/// `socket`'s protocol argument compared with `protocol`.
fn protocol_is(op: SeccompCmpOp, protocol: i32) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(2, SeccompCmpArgLen::Dword, op, protocol as u64)
}

/// The `socketpair` calls refused: Unix datagram pairs (each send may name
/// another socket, by a path nothing checks).
fn pair_rules() -> Result<Vec<SeccompRule>, BackendError> {
    Ok(vec![SeccompRule::new(vec![
        family_is(SeccompCmpOp::Eq, libc::AF_UNIX)?,
        type_is(libc::SOCK_DGRAM as u64)?,
    ])?])
}

/// The filter that hands a program's every `connect` to moat (a user
/// notification, answered by [`super::connector`]), for programs in the
/// run's own network. Written by hand: seccompiler has no such action.
/// Other architectures pass here: the socket filter kills them.
pub(crate) fn connect_filter() -> BpfProgram {
    const LOAD_WORD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    // The offsets of `arch` and `nr` in `seccomp_data`.
    const ARCH_AT: u32 = 4;
    const NR_AT: u32 = 0;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    #[cfg(target_arch = "x86_64")]
    let x32_connect = (X32_SYSCALL_BIT + libc::SYS_connect) as u32;
    #[cfg(not(target_arch = "x86_64"))]
    let x32_connect = libc::SYS_connect as u32;
    vec![
        op(LOAD_WORD, 0, 0, ARCH_AT),
        // Another architecture: to the allow at the end.
        op(JUMP_IF_EQUAL, 0, 3, AUDIT_ARCH),
        op(LOAD_WORD, 0, 0, NR_AT),
        op(JUMP_IF_EQUAL, 2, 0, libc::SYS_connect as u32),
        op(JUMP_IF_EQUAL, 1, 0, x32_connect),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(RETURN, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
    ]
}

/// Installs `filter` (a [`connect_filter`]) on the calling process, for
/// good (and on what it starts), and returns the descriptor its
/// notifications are read from. A program waiting for its answer cannot
/// be interrupted by a signal once moat has read its call (where the
/// kernel allows: 5.19 and later), so the connection moat makes is the
/// one its call returns. Async-signal-safe.
pub(crate) fn install_with_listener(filter: &BpfProgram) -> std::io::Result<RawFd> {
    let listener = |flags| seccomp(flags, filter);
    let unkillable =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    match listener(unkillable) {
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            listener(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)
        }
        done => done,
    }
    .map(|fd| fd as RawFd)
}

/// Installs `filter` on the calling process, for good (and on what it
/// starts). `no_new_privs` must be set already (it is, by Landlock's
/// restriction or [`super::isolate`]). Async-signal-safe: for a child
/// between fork and exec.
pub(crate) fn install(filter: &BpfProgram) -> std::io::Result<()> {
    seccomp(0, filter).map(drop)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, filter)`.
fn seccomp(flags: libc::c_ulong, filter: &BpfProgram) -> std::io::Result<libc::c_long> {
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut().cast(),
    };
    // SAFETY: the kernel copies the program; the pointer is valid for the
    // call.
    let installed = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &program as *const libc::sock_fprog,
        )
    };
    if installed == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(installed)
}
