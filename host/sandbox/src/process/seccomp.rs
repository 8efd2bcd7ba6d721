//! The sockets a contained program may create (seccomp-bpf).
//!
//! The run's network namespace, or Landlock where there is none, decides
//! where a program's TCP connections go ([`super::isolate`]); this filter
//! removes every other way out, whatever namespace the program is in:
//!
//! - `socket(AF_UNIX, …)`: a named Unix socket is reached by path, which
//!   Landlock before ABI 9 does not check, and an abstract one by name:
//!   the user's ssh-agent, a container runtime, another `moat serve`.
//!   Connected pairs (`socketpair`) stay allowed: they reach only the
//!   program's own kin.
//! - UDP and ICMP (`SOCK_DGRAM`), raw and packet sockets of IPv4 and IPv6:
//!   names are resolved by the run's proxy, nothing else leaves.
//! - every other family (`AF_PACKET`, `AF_VSOCK`, `AF_BLUETOOTH`, …).
//! - `io_uring_setup`: an io_uring opens and connects sockets without the
//!   system calls this filter sees.
//!
//! Netlink stays: the C library reads the interfaces through it. What is
//! refused fails with `EACCES` ("Permission denied"), which the program
//! reports (libraries fall back from io_uring on any error). A system call
//! of another architecture (the 32-bit `socketcall`) kills the program.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule,
};

/// The families a contained program may open sockets of (besides
/// `socketpair`, which this filter leaves alone).
const ALLOWED_FAMILIES: [i32; 3] = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// The bits of `socket`'s type argument that name the type (the others are
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC`).
const TYPE_MASK: u64 = 0xf;

/// On x86_64, system calls of the x32 ABI are numbered from this bit; the
/// architecture check does not tell them apart.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// The compiled filter. Built by the host before the fork (building
/// allocates); the child only installs it ([`install`]).
pub(crate) fn socket_filter() -> Result<BpfProgram, BackendError> {
    let refused = socket_rules()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, refused.clone());
    #[cfg(target_arch = "x86_64")]
    rules.insert(X32_SYSCALL_BIT + libc::SYS_socket, refused);
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

/// The `socket` calls refused: any one of these rules matching refuses.
fn socket_rules() -> Result<Vec<SeccompRule>, BackendError> {
    let domain =
        |op, family: i32| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, family as u64);
    let mut rules = Vec::new();
    // A family not in the list: every condition "not this one" holds.
    rules.push(SeccompRule::new(
        ALLOWED_FAMILIES
            .iter()
            .map(|&family| domain(SeccompCmpOp::Ne, family))
            .collect::<Result<_, _>>()?,
    )?);
    // IPv4 and IPv6: stream sockets only (TCP). The filter compares with a
    // mask but cannot negate one, so every other type is named.
    for family in [libc::AF_INET, libc::AF_INET6] {
        for kind in (0..=TYPE_MASK).filter(|&kind| kind != libc::SOCK_STREAM as u64) {
            rules.push(SeccompRule::new(vec![
                domain(SeccompCmpOp::Eq, family)?,
                SeccompCondition::new(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(TYPE_MASK),
                    kind,
                )?,
            ])?);
        }
    }
    Ok(rules)
}

/// Installs `filter` on the calling process, for good (and on what it
/// starts). `no_new_privs` must be set already (it is, by Landlock's
/// restriction or [`super::isolate`]). Async-signal-safe: for a child
/// between fork and exec.
pub(crate) fn install(filter: &BpfProgram) -> std::io::Result<()> {
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
            0,
            &program as *const libc::sock_fprog,
        )
    };
    if installed == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
