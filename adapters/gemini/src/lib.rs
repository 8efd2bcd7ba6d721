//! The `gemini` adapter: runs Gemini CLI (`gemini --prompt=…
//! --output-format=stream-json`) through moat's process capability and
//! translates each line it prints into the Unified Event Stream.
//!
//! [`args`] maps the run's options to Gemini CLI's switches (refusing what
//! it cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;
