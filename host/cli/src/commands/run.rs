//! `moat run`: one adapter, one prompt, events rendered as they arrive.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use moat_engine::{Adapter, Registry, RunRequest, run_agent};
use moat_sandbox::Sandbox;

use super::drive::render_until_done;
use super::recording;
use crate::args::RunArgs;
use crate::names::FlagNames;
use crate::render;
use crate::{UsageError, resolve};

pub async fn run(
    sandbox: &Sandbox,
    cli_store: Option<&std::path::Path>,
    args: RunArgs,
) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(args.prompt.as_deref())?;
    if args.detach {
        return detach(&prompt);
    }
    // The store opens (files, schema, lease) while the component loads:
    // neither waits for the other.
    let opening = (!args.no_store).then(|| {
        let cli_store = cli_store.map(std::path::Path::to_path_buf);
        tokio::task::spawn_blocking(move || resolve::store(cli_store.as_deref()))
    });
    let resolved = resolve::adapter(sandbox, &args.adapter).await?;
    let store = match opening {
        Some(opening) => Some(opening.await.context("cannot open the run store")??),
        None => None,
    };
    let scope = resolve::run_scope(&resolved, &args.run)?;
    let mut registry = Registry::scoped();
    let agent = resolved.adapter.info().name.clone();
    let default_timeout = resolved.default_timeout();
    let sha256 = resolved.adapter.details().sha256.clone();
    registry
        .register(Arc::new(resolved.adapter))
        .context("cannot register the adapter")?;

    let mut options = args.run.options();
    if let Some(run) = &args.continue_run {
        options.resume = Some(continued_session(cli_store, run, &agent)?);
    }
    let abort = CancellationToken::new();
    let request = RunRequest {
        options,
        limits: args.run.limits(default_timeout),
        abort: Some(abort.clone()),
        drain: args.run.drain,
        names: Arc::new(FlagNames),
        price_table: args.run.price_table.clone(),
        resume_fallback: !args.run.no_resume_fallback,
        ..RunRequest::new(agent, prompt).with_scope(scope)
    };
    let recorder = match store {
        Some(store) => {
            let parent = match &args.parent {
                Some(text) => Some(store.resolve(text)?),
                None => None,
            };
            Some(recording::record(store, &request, sha256, parent)?)
        }
        None => None,
    };
    let run = run_agent(&registry, request)?;
    let mut renderer = if args.detached_child {
        // The run is recorded: tell the `--detach` that started us, then
        // say nothing more (its events are in the store).
        let id = recorder
            .as_ref()
            .map(|r| r.id().to_string())
            .unwrap_or_default();
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{id}").and_then(|()| stdout.flush())?;
        render::silent()
    } else {
        render::for_format(render::default_format(args.output))
    };
    match recorder {
        None => render_until_done(Box::pin(run.into_stream()), renderer.as_mut(), abort).await,
        Some(recorder) => {
            let events = recording::single(run.into_stream());
            let recorded = recording::recorded(events, vec![recorder], vec![abort.clone()]);
            render_until_done(recorded, renderer.as_mut(), abort).await
        }
    }
}

/// `moat run --nats`: the run submitted to the cluster (see
/// [`super::cluster::run`]).
pub async fn run_on_cluster(
    sandbox: &Sandbox,
    flags: &crate::args::ClusterFlags,
    args: RunArgs,
) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(args.prompt.as_deref())?;
    super::cluster::run(sandbox, flags, args, prompt).await
}

/// The resume token `--continue RUN` names: the one the recorded run ended
/// with, when it ran the same adapter.
fn continued_session(
    cli_store: Option<&std::path::Path>,
    run: &str,
    agent: &str,
) -> anyhow::Result<String> {
    let store = resolve::store(cli_store)?;
    let id = store.resolve(run).map_err(|e| UsageError(e.to_string()))?;
    let record = store
        .get(&id)?
        .ok_or_else(|| UsageError(format!("no run {id}")))?;
    if record.run.adapter != agent {
        return Err(UsageError(format!(
            "--continue {id}: that run used the adapter {}, not {agent}",
            record.run.adapter
        ))
        .into());
    }
    record
        .done
        .as_ref()
        .and_then(|done| done.get("resumeToken"))
        .and_then(|token| token.as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            UsageError(format!(
                "--continue {id}: that run left no session to continue ({}); start afresh without --continue",
                record.status
            ))
            .into()
        })
}

/// How long `--detach` waits for its run's process to report the run's id.
const DETACH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// `moat run --detach`: this same command again, without `--detach`, as a
/// process of its own that owns the run; prints the run's id once that process has
/// recorded it, and returns.
fn detach(prompt: &str) -> anyhow::Result<ExitCode> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("cannot find moat's own program")?;
    let args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .filter(|arg| arg != "--detach")
        .chain([std::ffi::OsString::from("--detached-child")])
        .collect();
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    // A process group of its own: the terminal's Ctrl-C is not for it.
    command.process_group(0);
    let mut child = command.spawn().context("cannot start the run's process")?;
    // The prompt as this process read it (from stdin, maybe).
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(prompt.as_bytes())?;
    }
    let stdout = child
        .stdout
        .take()
        .context("the run's process has no stdout")?;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    match receiver.recv_timeout(DETACH_PATIENCE) {
        Ok(line) if moat_store::RunId::parse(line.trim()).is_some() => {
            println!("{}", line.trim());
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            let _ = child.kill();
            let status = child.wait()?;
            anyhow::bail!("the run did not start ({status}); run it without --detach to see why")
        }
    }
}

fn read_prompt(prompt: Option<&str>) -> anyhow::Result<String> {
    match prompt {
        Some("-") => read_stdin(),
        Some(prompt) => Ok(prompt.to_string()),
        None if std::io::stdin().is_terminal() => Err(UsageError(
            "no prompt: pass it after the adapter, or `-` to read it from stdin".into(),
        )
        .into()),
        None => read_stdin(),
    }
}

fn read_stdin() -> anyhow::Result<String> {
    let mut prompt = String::new();
    std::io::stdin()
        .read_to_string(&mut prompt)
        .map_err(|e| UsageError(format!("cannot read the prompt from stdin: {e}")))?;
    Ok(prompt)
}
