//! The `moat:adapter/host` import of contract 0.4.0, and of 0.3.0 and
//! 0.2.0 (the same interface): logging and the cooperative abort flag.

use super::moat::adapter::host::{Host, LogLevel};
use crate::state::{GuestLogLevel, RunState};

impl Host for RunState {
    fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Trace => GuestLogLevel::Trace,
            LogLevel::Debug => GuestLogLevel::Debug,
            LogLevel::Info => GuestLogLevel::Info,
            LogLevel::Warn => GuestLogLevel::Warn,
            LogLevel::Error => GuestLogLevel::Error,
        };
        RunState::log(self, level, &message);
    }

    fn interrupted(&mut self) -> bool {
        self.control.is_interrupted()
    }
}

impl super::moat::adapter::types::Host for RunState {}
