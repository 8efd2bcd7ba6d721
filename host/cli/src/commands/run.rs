//! `moat run`: one adapter, one prompt, events rendered as they arrive.
//! The run starts through the launch layer like every other; with
//! `--nats` it is submitted to the cluster and followed here.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use moat_grants::Confinement;
use moat_launch::{AdapterRef, LaunchError, LaunchSpec, Prepared, Resolver};
use moat_runs::{RunId, Runs};
use moat_sandbox::SandboxConfig;

use super::drive::render_until_done;
use super::prompt::TerminalPrompt;
use crate::args::{OutputFormat, RunArgs};
use crate::names::FlagNames;
use crate::{Globals, UsageError, render, wiring};

pub async fn run(
    globals: &Globals,
    sandbox: SandboxConfig,
    args: RunArgs,
) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(args.prompt.as_deref())?;
    let on_cluster = globals.cluster.nats.is_some();
    if args.detach && !on_cluster {
        return detach(&prompt);
    }
    if on_cluster && args.continue_run.is_some() {
        return Err(UsageError(
            "--continue works on this machine's runs; with --nats, pass the session with --resume"
                .into(),
        )
        .into());
    }
    // Where the run goes (the store opens, or the cluster connects) while
    // the sandbox starts and the component loads: neither waits for the
    // other. The book is polled first, so its files or its connection are
    // under way before the sandbox's start holds this task.
    let loaded = async {
        let resolver = Resolver::new(wiring::start_sandbox(sandbox)?);
        let resolved = resolver
            .resolve(&args.adapter)
            .await
            .map_err(wiring::resolve_error)?;
        anyhow::Ok((resolver, resolved))
    };
    let (book, loaded) = tokio::join!(wiring::book(globals, "moat run", args.no_store), loaded);
    let (resolver, resolved) = loaded?;
    let launcher = wiring::launcher_with(globals, resolver, book?);
    let runs = launcher.runs();
    let mut request = args.run.request().map_err(wiring::request_error)?;
    request.prompt = Some(prompt);
    if let Some(run) = &args.continue_run {
        let runs = runs.as_deref().context("--continue reads the run store")?;
        request.options.resume = Some(continued_session(runs, run, resolved.name()).await?);
    }
    let parent = wiring::parent(&request, runs.as_deref()).await?;
    let ceiling = Arc::new(request.own_ceiling("moat run"));
    let asked = request
        .asked_by_hand(&ceiling, &resolved, parent.is_some())
        .map_err(|refusal| wiring::launch_error(LaunchError::Refused(refusal)))?;
    let abort = CancellationToken::new();
    let spec = LaunchSpec {
        parent,
        abort: abort.clone(),
        workspace: wiring::workspace(globals, &request)?,
        ..request.launch_spec(
            AdapterRef::Resolved(Box::new(resolved)),
            ceiling,
            asked,
            Arc::new(FlagNames),
        )
    };
    let prepared = launcher.prepare(spec).await.map_err(wiring::launch_error)?;
    warn_uncontained(&prepared);
    let id = prepared.id().map(ToString::to_string).unwrap_or_default();
    if args.detach {
        // Submitted to the cluster: it runs there whatever happens here.
        println!("{id}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut renderer = if args.detached_child {
        // The run is recorded: tell the `--detach` that started us, then
        // say nothing more (its events are in the store).
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{id}").and_then(|()| stdout.flush())?;
        render::silent()
    } else {
        render::for_run(
            render::default_format(args.output),
            prepared.id().map(RunId::as_str),
        )
    };
    // Pretty output on a terminal asks the terminal about the run's
    // requests too (`moat approve` elsewhere still answers them).
    let format = render::default_format(args.output);
    let prompt = match (&runs, prepared.id(), request.asks()) {
        (Some(runs), Some(id), true)
            if !args.detached_child
                && format == OutputFormat::Pretty
                && std::io::stdin().is_terminal() =>
        {
            Some(TerminalPrompt::new(runs.clone(), id.clone()))
        }
        _ => None,
    };
    let events = launcher.start(prepared);
    render_until_done(events, renderer.as_mut(), abort, prompt).await
}

/// Says so when the programs the run may start would have all of the
/// user's rights because this kernel has no Landlock.
pub fn warn_uncontained(prepared: &Prepared) {
    let admission = prepared.admission();
    if !admission.grants.run.is_empty()
        && admission.confinement != Confinement::Off
        && !moat_contain::landlock_available()
    {
        tracing::warn!(
            "this kernel has no Landlock: the programs the run starts have all of your rights (docs/security.md)"
        );
    }
}

/// The resume token `--continue RUN` names: the one the recorded run ended
/// with, when it ran the same adapter.
async fn continued_session(runs: &dyn Runs, run: &str, agent: &str) -> anyhow::Result<String> {
    let id = runs.find(run).await.map_err(wiring::runs_error)?;
    let record = runs
        .get(&id)
        .await
        .map_err(wiring::runs_error)?
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
        Ok(line) if moat_runs::RunId::parse(line.trim()).is_some() => {
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
    // Nothing piped in is a mistake (a file that is empty, a command that
    // printed nothing), refused as a terminal with no prompt is.
    if prompt.trim().is_empty() {
        return Err(UsageError(
            "no prompt: stdin was empty; pipe the prompt in, or pass it after the adapter".into(),
        )
        .into());
    }
    Ok(prompt)
}
