//! Which program made a connection to the run's proxy. In the run's own
//! network moat makes every `connect` of its programs
//! ([`crate::process`]'s connector), so it knows who asked for each: the
//! connector notes the caller of a connection to the proxy by the
//! connection's own address, and the proxy finds it there by the address
//! a request came from (the kernel gives the same one to both ends).

use std::collections::VecDeque;
use std::net::SocketAddr;

/// A program of the run, as moat saw it make a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Its process id, as the host sees it (the run's programs have their
    /// own numbers in the run's PID namespace).
    pub pid: u32,
    /// Its name (the kernel's `comm`: up to 15 bytes).
    pub program: String,
}

/// Most callers kept: the connections to the proxy still open are among
/// the latest made, and an old one's port is taken again by a new one.
pub(crate) const MAX_CALLERS: usize = 1024;

/// The latest callers, newest last.
#[derive(Debug, Default)]
pub(crate) struct Callers(VecDeque<(SocketAddr, Caller)>);

impl Callers {
    /// `caller` made the connection whose address is `from`.
    pub(crate) fn note(&mut self, from: SocketAddr, caller: Caller) {
        // A port taken again is the new connection's.
        self.0.retain(|(address, _)| *address != from);
        if self.0.len() == MAX_CALLERS {
            self.0.pop_front();
        }
        self.0.push_back((from, caller));
    }

    /// Who made the connection whose address is `from`.
    pub(crate) fn of(&self, from: SocketAddr) -> Option<Caller> {
        self.0
            .iter()
            .rev()
            .find(|(address, _)| *address == from)
            .map(|(_, caller)| caller.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(pid: u32) -> Caller {
        Caller {
            pid,
            program: "curl".into(),
        }
    }

    #[test]
    fn the_latest_caller_of_an_address_is_found_and_the_oldest_forgotten() {
        let mut callers = Callers::default();
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        callers.note(at(1), caller(10));
        callers.note(at(1), caller(11));
        assert_eq!(callers.of(at(1)), Some(caller(11)));
        assert_eq!(callers.of(at(2)), None);
        for port in 2..=MAX_CALLERS as u16 + 1 {
            callers.note(at(port), caller(u32::from(port)));
        }
        assert_eq!(callers.0.len(), MAX_CALLERS);
        assert_eq!(callers.of(at(1)), None, "the oldest forgotten");
        assert_eq!(callers.of(at(2)), Some(caller(2)));
    }
}
