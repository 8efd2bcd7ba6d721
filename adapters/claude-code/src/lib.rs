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

use moat_cli_support::{Cli, CliAdapter, Invocation};
use moat_guest::{ErrorInfo, Options};

use translate::ClaudeTranslator;

/// How to install Claude Code.
pub const INSTALL: &str = "npm install -g @anthropic-ai/claude-code";

/// The environment Claude Code is given: its credentials and endpoint, its
/// configuration directory, what any program needs (`PATH` every child
/// gets from the host), and the switches the adapter sets to keep it quiet
/// (`args::QUIET_ENV`: an adapter may set only variables it was granted).
pub const ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CONFIG_DIR",
    "HOME",
    "TMPDIR",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "MCP_TOOL_TIMEOUT",
];

/// What sets Claude Code apart from the other CLIs.
pub struct ClaudeCodeCli;

impl Cli for ClaudeCodeCli {
    const NAME: &'static str = "claude-code";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Runs Claude Code headless (claude -p, stream-json); needs the claude CLI";
    const PROGRAM: &'static str = args::PROGRAM;
    const INSTALL: &'static str = INSTALL;
    const ENV: &'static [&'static str] = ENV;
    const HOSTS: &'static [&'static str] = &["api.anthropic.com:443"];

    type Translator = ClaudeTranslator;

    fn prepare(
        prompt: &str,
        options: &Options,
    ) -> Result<(Invocation, ClaudeTranslator), ErrorInfo> {
        let approvals = moat_guest::approvals::asked();
        let invocation = args::invocation(prompt, options, approvals.as_ref())?;
        Ok((invocation, ClaudeTranslator::new()))
    }
}

/// One Claude Code run.
pub type ClaudeCode = CliAdapter<ClaudeCodeCli>;

moat_guest::export_adapter!(ClaudeCode);
