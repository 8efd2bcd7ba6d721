//! The `codex` adapter: runs Codex (`codex exec --json … -- PROMPT`, stdin
//! closed) through moat's process capability and translates each line it
//! prints into the Unified Event Stream (docs/cli-adapters.md).
//!
//! [`args`] maps the run's options to Codex's switches (refusing what it
//! cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;

use moat_cli_support::{Cli, CliAdapter, Invocation};
use moat_guest::{ErrorInfo, Options};

use translate::{CodexTranslator, RunContext};

/// How to install Codex.
pub const INSTALL: &str = "npm install -g @openai/codex";

/// The environment Codex is given: its credentials and endpoint, its
/// home (configuration, sessions), and what any program needs. (`PATH`,
/// which also finds `node`, every child gets from the host.)
pub const ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_HOME",
    "HOME",
    "TMPDIR",
];

/// What sets Codex apart from the other CLIs.
pub struct CodexCli;

impl Cli for CodexCli {
    const NAME: &'static str = "codex";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Runs Codex headless (codex exec --json); needs the codex CLI";
    const PROGRAM: &'static str = args::PROGRAM;
    const INSTALL: &'static str = INSTALL;
    const ENV: &'static [&'static str] = ENV;
    const HOSTS: &'static [&'static str] = &[
        "api.openai.com:443",
        "chatgpt.com:443",
        "auth.openai.com:443",
    ];

    type Translator = CodexTranslator;

    fn prepare(
        prompt: &str,
        options: &Options,
    ) -> Result<(Invocation, CodexTranslator), ErrorInfo> {
        let endpoint = std::env::var("OPENAI_BASE_URL").ok();
        moat_cli_support::refuse_ask_tools(
            "codex",
            "codex exec asks nobody before a command (its approval requests exist only in its interactive and app-server modes)",
        )?;
        let invocation = args::invocation(prompt, options, endpoint.as_deref())?;
        let context = RunContext {
            model: options.model.clone(),
            cwd: options.cwd.clone(),
            resumed: options.resume.is_some(),
        };
        Ok((invocation, CodexTranslator::new(context)))
    }
}

/// One Codex run.
pub type Codex = CliAdapter<CodexCli>;

moat_guest::export_adapter!(Codex);
