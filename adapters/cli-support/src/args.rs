//! Building a CLI's command line, and refusing what it cannot do.

use moat_guest::json::Value;
use moat_guest::{ErrorInfo, Options};

/// Error code of a refused option.
pub const UNSUPPORTED_OPTION: &str = "UNSUPPORTED_OPTION";

/// How to start a CLI for one run: program, arguments, extra environment
/// and working directory. Pure data: the adapter hands it to the process
/// capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program name (`claude`, `codex`, `gemini`), resolved on PATH by
    /// the host's `--allow-run` grant.
    pub program: String,
    /// The arguments, prompt included.
    pub args: Vec<String>,
    /// Variables set for the CLI on top of the run's granted environment.
    pub env: Vec<(String, String)>,
    /// The working directory (the run's `cwd` option).
    pub cwd: Option<String>,
}

impl Invocation {
    /// `program` with `args`, in the run's working directory, with no
    /// variables of its own.
    pub fn new(program: String, args: Vec<String>, options: &Options) -> Self {
        Invocation {
            program,
            args,
            env: Vec::new(),
            cwd: options.cwd.clone(),
        }
    }

    /// Adds the variables `vars` to what the CLI is given.
    pub fn with_env(mut self, vars: &[(&str, &str)]) -> Self {
        self.env.extend(
            vars.iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
        );
        self
    }

    /// Whether `flag` is among the arguments.
    pub fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|arg| arg == flag)
    }

    /// The argument after the first `flag`.
    pub fn value_of(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|arg| arg == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }

    /// The value of environment variable `name`, when set.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A refusal of `option`, which `cli` cannot honour; `hint` says what to do
/// instead.
pub fn unsupported(cli: &str, option: &str, hint: &str) -> ErrorInfo {
    ErrorInfo::new(
        UNSUPPORTED_OPTION,
        format!("{cli} cannot honour {option}: {hint}"),
        false,
    )
}

/// Refuses a run that asks about tools before each call (`--ask-tools`)
/// when the CLI cannot ask anyone in its non-interactive mode (`why`):
/// they would run unasked. Nothing to refuse when the run names none.
pub fn refuse_ask_tools(cli: &str, why: &str) -> Result<(), ErrorInfo> {
    let tools = moat_guest::approvals::ask_tools();
    if tools.is_empty() {
        return Ok(());
    }
    Err(unsupported(
        cli,
        &format!("--ask-tools {}", tools.join(",")),
        why,
    ))
}

/// Refuses tool names a CLI would read as something else than one exact
/// name: empty ones, and ones holding list separators (`,`, whitespace) or
/// pattern syntax (`(`, `)`, `*`).
pub fn check_exact_names(cli: &str, option: &str, names: &[String]) -> Result<(), ErrorInfo> {
    for name in names {
        let bad = name.is_empty()
            || name
                .chars()
                .any(|c| c == ',' || c.is_whitespace() || matches!(c, '(' | ')' | '*'));
        if bad {
            return Err(unsupported(
                cli,
                option,
                &format!(
                    "{:?} is not an exact tool name (no patterns, separators or spaces)",
                    crate::clip(name, 200)
                ),
            ));
        }
    }
    Ok(())
}

/// The program to start: `default` (a bare name, found on PATH by the
/// host's `--allow-run` grant), or the absolute path given as
/// `options.extra.program` (a CLI installed off PATH; it must be granted by
/// that path). Any other key of `extra` is refused: the CLI adapters take
/// no other adapter-specific option.
pub fn program(adapter: &str, default: &str, options: &Options) -> Result<String, ErrorInfo> {
    let extra = options.extra_object()?;
    if let Some(key) = extra.keys().find(|key| key.as_str() != "program") {
        return Err(unsupported(
            adapter,
            &format!("options.extra.{}", crate::clip(key, 100)),
            "the only adapter-specific option is `program`, the CLI's absolute path",
        ));
    }
    match extra.get("program") {
        None => Ok(default.to_owned()),
        Some(Value::String(path)) if path.starts_with('/') => Ok(path.clone()),
        Some(_) => Err(unsupported(
            adapter,
            "options.extra.program",
            "it must be the CLI's absolute path",
        )),
    }
}
