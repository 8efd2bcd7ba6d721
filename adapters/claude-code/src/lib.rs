//! The `claude-code` adapter: runs Claude Code
//! (`claude -p … --output-format stream-json --verbose
//! --include-partial-messages`) through moat's process capability and
//! translates each line it prints into the Unified Event Stream.
//!
//! [`args`] maps the run's options to Claude Code's switches (refusing what
//! it cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;
