//! A run's clock, read once per read of its adapter.
//!
//! A read of a session can bring a batch of events; reading the system
//! clock for each of them (a wall-clock timestamp and a deadline check) was
//! a sixth of an event's cost. The events of one read arrived together, so
//! they share its time: stamped with it, and judged against the run's
//! deadline by it. Only a new read, or an event the host makes itself,
//! looks at the clock again.

// tokio's, as the run's deadline: a test's paused time moves it too.
use tokio::time::Instant;

/// The time of a run's last read, as a monotonic instant and as a
/// wall-clock timestamp.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadClock {
    /// When the run was set up, in both clocks: the timestamps follow the
    /// monotonic clock from there, so they never go back within a run.
    origin: Instant,
    origin_ms: u64,
    /// The last reading.
    at: Instant,
}

impl ReadClock {
    /// A clock reading now.
    pub(crate) fn new() -> Self {
        let origin = Instant::now();
        let origin_ms = crate::event::now_ms();
        Self {
            origin,
            origin_ms,
            at: origin,
        }
    }

    /// Reads the clock: the time of a read starting or ending.
    pub(crate) fn tick(&mut self) -> Instant {
        self.at = Instant::now();
        self.at
    }

    /// The last reading.
    pub(crate) fn at(&self) -> Instant {
        self.at
    }

    /// The last reading as milliseconds since the Unix epoch.
    pub(crate) fn stamp(&self) -> u64 {
        let since =
            u64::try_from(self.at.duration_since(self.origin).as_millis()).unwrap_or(u64::MAX);
        self.origin_ms.saturating_add(since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stamps_move_only_when_the_clock_is_read() {
        let mut clock = ReadClock::new();
        let first = clock.stamp();
        let wall = crate::event::now_ms();
        assert!(wall.abs_diff(first) < 1000, "{wall} vs {first}");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.stamp(), first, "no reading, no change");
        let read = clock.tick();
        assert_eq!(clock.at(), read);
        assert!(clock.stamp() >= first + 20, "{} vs {first}", clock.stamp());
    }
}
