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

use moat_cli_support::{Cli, CliAdapter, Invocation};
use moat_guest::{ErrorInfo, Options};

use translate::{GeminiTranslator, RunContext};

/// How to install Gemini CLI.
pub const INSTALL: &str = "npm install -g @google/gemini-cli";

/// The environment Gemini CLI is given: its credentials and endpoint, and
/// what any program needs. (`PATH`, which also finds `node`, every child
/// gets from the host.)
pub const ENV: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "HOME",
    "TMPDIR",
];

/// What sets Gemini CLI apart from the other CLIs.
pub struct GeminiCli;

impl Cli for GeminiCli {
    const NAME: &'static str = "gemini";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Runs Gemini CLI headless (gemini --prompt, stream-json); needs the gemini CLI";
    const PROGRAM: &'static str = args::PROGRAM;
    const INSTALL: &'static str = INSTALL;
    const ENV: &'static [&'static str] = ENV;
    const HOSTS: &'static [&'static str] = &[
        "generativelanguage.googleapis.com:443",
        "cloudcode-pa.googleapis.com:443",
        "oauth2.googleapis.com:443",
    ];

    type Translator = GeminiTranslator;

    fn prepare(
        prompt: &str,
        options: &Options,
    ) -> Result<(Invocation, GeminiTranslator), ErrorInfo> {
        moat_cli_support::refuse_ask_tools(
            "gemini",
            "gemini -p asks nobody before a tool (its permission requests exist only in its ACP mode)",
        )?;
        let invocation = args::invocation(prompt, options)?;
        let context = RunContext {
            cwd: options.cwd.clone(),
        };
        Ok((invocation, GeminiTranslator::new(context)))
    }
}

/// One Gemini CLI run.
pub type Gemini = CliAdapter<GeminiCli>;

moat_guest::export_adapter!(Gemini);
