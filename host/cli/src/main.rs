//! The `moat` command: parses arguments, turns flags into the library's
//! types (`args`, `tasks`), wires the library crates together (`wiring`:
//! the sandbox, where runs are, the launcher) and renders events
//! (`render`). No launching, recording, engine or sandbox logic lives
//! here: runs start through `moat-launch`, are read through `moat-runs`,
//! and the protocol is `moat-serve`'s.

mod args;
mod commands;
mod complete;
mod config;
mod flags;
mod names;
mod render;
mod tasks;
mod wiring;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use tracing_subscriber::EnvFilter;

use args::{Cli, Command};

/// Exit code of a usage error: bad flags, an unknown adapter, a file that
/// is not an adapter.
pub const EXIT_USAGE: u8 = 2;

/// How long exiting waits for runs' sessions to close.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A problem with what the user asked for, reported in one line with
/// exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn main() -> ExitCode {
    // A shell asking for completions gets them, and nothing else runs.
    complete::answer_if_asked(<args::Cli as clap::CommandFactory>::command);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        // Bare `moat` shows the help, as cargo and docker do.
        Err(_) if std::env::args_os().len() == 1 => {
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // clap's first paragraph says what is wrong and with which
            // flag; the usage and hint after it are replaced by a shorter one.
            let message = error.to_string();
            let problem: Vec<&str> = message
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            // clap's suggestion ("a similar subcommand exists: 'run'")
            // comes in a later paragraph: kept, as the fix.
            let tip = message
                .lines()
                .map(str::trim)
                .find_map(|line| line.strip_prefix("tip: "))
                .map(|tip| format!("; {tip}"))
                .unwrap_or_default();
            eprintln!(
                "moat: {}{tip} (see --help)",
                problem.join(" ").trim_start_matches("error: ")
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if only_prints(&cli.command) {
        die_on_a_closed_pipe();
    }
    init_logging(cli.verbose);
    // What a moat killed with SIGKILL left running ends now, whatever this
    // one is asked to do.
    moat_contain::clean_up_after_gone_moats();
    let mut telemetry = wiring::telemetry(cli.otel.as_ref().map(Option::as_deref));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("moat: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // The runs' spans go out while the sessions close.
    if let Some(telemetry) = &mut telemetry {
        telemetry.flush_soon(|flush| {
            runtime.spawn_blocking(flush);
        });
    }
    // Every run has ended; what remains is closing sessions in the
    // background. Shutting down drops them, which kills what their
    // adapters started and removes their directories: wait for that, but
    // not for long on a lingering blocking task (an abandoned compile).
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // Whatever is still alive of any run dies with it now.
    moat_sandbox::stop_all_runs();
    // The runs' last spans, waited for briefly.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(error) => {
            // The message may quote an adapter (what it printed, what its
            // info() said): shown with its control characters escaped.
            eprintln!("moat: {}", render::safe::text(&format!("{error:#}")));
            if error.is::<UsageError>() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// What every command may use of the global flags.
pub struct Globals {
    /// The run store (`--store`).
    pub store: Option<std::path::PathBuf>,
    /// The cluster (`--nats`), when given.
    pub cluster: args::ClusterFlags,
    /// The compiled-component cache (`--cache-dir`).
    pub cache_dir: Option<std::path::PathBuf>,
    /// The secrets file (`--secrets`).
    pub secrets: Option<std::path::PathBuf>,
    /// Where workspaces are made (`--workspace-dir`).
    pub workspace_dir: Option<std::path::PathBuf>,
}

async fn dispatch(mut cli: Cli) -> anyhow::Result<ExitCode> {
    let config = config::load()?;
    if let Some(config) = &config {
        config.apply(&mut cli);
    }
    if cli.cluster.nats.is_none() && matches!(cli.command, Command::Worker(_)) {
        return Err(UsageError(
            "moat worker executes a cluster's runs: pass --nats nats://HOST:PORT (docs/cluster.md)"
                .into(),
        )
        .into());
    }
    let globals = Globals {
        store: cli.store.clone(),
        cluster: cli.cluster.clone(),
        cache_dir: cli.cache_dir.clone(),
        secrets: cli.secrets.clone(),
        workspace_dir: cli.workspace_dir.clone(),
    };
    // The commands that need no sandbox.
    match &cli.command {
        Command::Ps(args) => return commands::ps(&globals, args).await,
        Command::Show(args) => return commands::show(&globals, args).await,
        Command::Logs(args) => return commands::logs(&globals, args).await,
        Command::Wait(args) => return commands::wait(&globals, args).await,
        Command::Cancel(args) => return commands::cancel(&globals, args).await,
        Command::Approve(args) => return commands::approve(&globals, args).await,
        Command::Deny(args) => return commands::deny(&globals, args).await,
        Command::Prune(args) => return commands::prune(&globals, args),
        Command::New(args) => return commands::new(args),
        Command::Completions(args) => return commands::completions(args),
        Command::Diff(args) => return commands::diff(&globals, args).await,
        Command::Apply(args) => return commands::apply(&globals, args).await,
        Command::Workspace(command) => return commands::workspace(&globals, command).await,
        Command::Man(args) => return commands::man(args),
        Command::Doctor => return commands::doctor(&globals, config.as_ref()).await,
        Command::Secret(command) => return commands::secret(&globals, command),
        Command::Workflow(command) => {
            if let Some(answer) = commands::workflow_without_sandbox(command, &globals).await {
                return answer;
            }
        }
        Command::Adapter(command) => {
            if let Some(answer) = commands::adapter_without_sandbox(command) {
                return answer;
            }
        }
        _ => {}
    }
    let sandbox_config = wiring::sandbox_config(&cli);
    if let Command::Run(args) = cli.command {
        // A run starts its sandbox while its store opens or its cluster
        // connects: starting it first would keep them waiting.
        return commands::run(&globals, sandbox_config, args).await;
    }
    let sandbox = wiring::start_sandbox(sandbox_config)?;
    match cli.command {
        Command::Parallel(args) => commands::parallel(&globals, &sandbox, args).await,
        Command::Worker(args) => commands::worker(&globals, sandbox, args).await,
        Command::Inspect(args) => commands::inspect(&sandbox, args).await,
        Command::Compile(args) => commands::compile(&sandbox, args).await,
        Command::Adapters(args) => commands::adapters(&sandbox, &args).await,
        Command::Serve(args) => commands::serve(&globals, sandbox, args).await,
        Command::Ui(args) => commands::ui(&globals, &sandbox, &args).await,
        Command::Acp(args) => commands::acp(&globals, sandbox, args).await,
        Command::Workflow(command) => commands::workflow(&globals, &sandbox, command).await,
        Command::Adapter(command) => commands::adapter(&sandbox, command).await,
        Command::Run(_)
        | Command::Ps(_)
        | Command::Show(_)
        | Command::Logs(_)
        | Command::Wait(_)
        | Command::Cancel(_)
        | Command::Approve(_)
        | Command::Deny(_)
        | Command::Prune(_)
        | Command::Secret(_)
        | Command::New(_)
        | Command::Completions(_)
        | Command::Man(_)
        | Command::Diff(_)
        | Command::Apply(_)
        | Command::Workspace(_)
        | Command::Doctor => {
            unreachable!("answered above")
        }
    }
}

/// Whether `command` only reads and prints: no run, server or socket of
/// its own, so a reader that goes away (`moat ps | head -1`) may end it.
fn only_prints(command: &Command) -> bool {
    matches!(
        command,
        Command::Ps(_)
            | Command::Show(_)
            | Command::Logs(_)
            | Command::Inspect(_)
            | Command::Adapters(_)
            | Command::Secret(_)
            | Command::Prune(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Diff(_)
            | Command::Doctor
    )
}

/// Lets a closed stdout end the process as it ends `ls` or `git log`
/// (the default action of `SIGPIPE`), instead of the panic of a failed
/// print: Rust ignores the signal, so a print fails instead.
fn die_on_a_closed_pipe() {
    // SAFETY: restoring a signal's default action, before any thread runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Logs go to stderr so stdout carries only events. Default: warnings.
fn init_logging(verbose: u8) {
    let filter = match std::env::var("MOAT_LOG") {
        Ok(filter) => EnvFilter::new(filter),
        Err(_) => EnvFilter::new(match verbose {
            // moat's own warnings (and its adapters', named by their
            // `adapter` field); of the crates it uses, only errors: what
            // fails in them reaches the user once, as moat's own message
            // (a run's `error` event, a command's one line). The NATS
            // client logs each failed connection attempt as an error;
            // moat reports the failure itself, once.
            0 => "error,moat=warn,async_nats=off",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }),
    };
    // Colours only for a person: a log file or a pipe gets plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(render::LogWriter)
        .with_target(false)
        .try_init();
}
