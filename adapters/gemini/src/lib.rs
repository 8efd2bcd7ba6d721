//! The `gemini` adapter: runs Gemini CLI (`gemini --prompt=…
//! --output-format=stream-json`) through moat's process capability and
//! translates each line it prints into the Unified Event Stream
//! (docs/cli-adapters.md).
//!
//! [`args`] maps the run's options to Gemini CLI's switches (refusing what
//! it cannot enforce); [`translate`] turns its output into events. Both are
//! plain code, tested natively on recordings of the real CLI.

pub mod args;
pub mod translate;

use moat_cli_support::{ChildProcess, CliSession, spawn};
use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Needs, Options};

use translate::{GeminiTranslator, RunContext};

/// How to install Gemini CLI.
pub const INSTALL: &str = "npm install -g @google/gemini-cli";

/// The environment Gemini CLI is given: its credentials and endpoint, and
/// what any program needs (`PATH` also finds `node`, which runs it).
pub const ENV: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "HOME",
    "PATH",
    "TMPDIR",
];

/// One Gemini CLI run.
pub struct Gemini {
    session: CliSession<ChildProcess, GeminiTranslator>,
}

impl Adapter for Gemini {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "gemini",
            env!("CARGO_PKG_VERSION"),
            "Runs Gemini CLI headless (gemini --prompt, stream-json); needs the gemini CLI",
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
            cwd: options.cwd.clone(),
        };
        let child = spawn(&invocation, INSTALL)?;
        Ok(Gemini {
            session: CliSession::new(args::PROGRAM, child, GeminiTranslator::new(context)),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }
}

moat_guest::export_adapter!(Gemini);
