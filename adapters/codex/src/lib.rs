//! The `codex` adapter: runs Codex (`codex exec --json … -- PROMPT`, stdin
//! closed) through moat's process capability and translates each line it
//! prints into the Unified Event Stream (docs/cli-adapters.md).
//!
//! [`args`] maps the run's options to Codex's switches (refusing what it
//! cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;

use moat_cli_support::{ChildProcess, CliSession, spawn};
use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Needs, Options};

use translate::{CodexTranslator, RunContext};

/// How to install Codex.
pub const INSTALL: &str = "npm install -g @openai/codex";

/// The environment Codex is given: its credentials and endpoint, its
/// home (configuration, sessions), and what any program needs (`PATH` also
/// finds `node`, which runs it).
pub const ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_HOME",
    "HOME",
    "PATH",
    "TMPDIR",
];

/// One Codex run.
pub struct Codex {
    session: CliSession<ChildProcess, CodexTranslator>,
}

impl Adapter for Codex {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "codex",
            env!("CARGO_PKG_VERSION"),
            "Runs Codex headless (codex exec --json); needs the codex CLI",
        )
        .with_needs(
            Needs::default()
                .with_programs([args::PROGRAM])
                .with_env(ENV.iter().copied()),
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let invocation = args::invocation(&prompt, &options)?;
        let context = RunContext {
            model: options.model.clone(),
            cwd: options.cwd.clone(),
            resumed: options.resume.is_some(),
        };
        let child = spawn(&invocation, INSTALL)?;
        Ok(Codex {
            session: CliSession::new(args::PROGRAM, child, CodexTranslator::new(context)),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }
}

moat_guest::export_adapter!(Codex);
