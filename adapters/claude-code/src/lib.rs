//! The `claude-code` adapter: runs Claude Code
//! (`claude -p --output-format=stream-json --verbose
//! --include-partial-messages … -- PROMPT`) through moat's process
//! capability and translates each line it prints into the Unified Event
//! Stream (docs/cli-adapters.md).
//!
//! [`args`] maps the run's options to Claude Code's switches (refusing what
//! it cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;

use moat_cli_support::{ChildProcess, CliSession, spawn};
use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Needs, Options};

use translate::ClaudeTranslator;

/// How to install Claude Code.
pub const INSTALL: &str = "npm install -g @anthropic-ai/claude-code";

/// The environment Claude Code is given: its credentials and endpoint, its
/// configuration directory, and what any program needs.
pub const ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CONFIG_DIR",
    "HOME",
    "PATH",
    "TMPDIR",
];

/// One Claude Code run.
pub struct ClaudeCode {
    session: CliSession<ChildProcess, ClaudeTranslator>,
}

impl Adapter for ClaudeCode {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "claude-code",
            env!("CARGO_PKG_VERSION"),
            "Runs Claude Code headless (claude -p, stream-json); needs the claude CLI",
        )
        .with_needs(
            Needs::default()
                .with_programs([args::PROGRAM])
                .with_env(ENV.iter().copied()),
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let invocation = args::invocation(&prompt, &options)?;
        let child = spawn(&invocation, INSTALL)?;
        Ok(ClaudeCode {
            session: CliSession::new(args::PROGRAM, child, ClaudeTranslator::new()),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }
}

moat_guest::export_adapter!(ClaudeCode);
