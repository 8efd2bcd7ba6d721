//! `moat run`: one adapter, one prompt, events rendered as they arrive.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use moat::engine::{
    Adapter, DoneStatus, EventPayload, Registry, RunLimits, RunOptions, RunRequest, run_agent,
};
use moat::sandbox::Sandbox;

use crate::cli::args::{OutputFormat, RunArgs};
use crate::cli::render;
use crate::cli::{EXIT_INTERRUPTED, UsageError, resolve};

/// How long the stream may be silent before the spinner shows.
const SPINNER_DELAY: Duration = Duration::from_millis(150);

pub async fn run(sandbox: &Sandbox, args: RunArgs) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(args.prompt.as_deref())?;
    let adapter = resolve::adapter(sandbox, &args.adapter).await?;
    let mut registry = Registry::new();
    let agent = adapter.info().name.clone();
    registry
        .register(Arc::new(adapter))
        .context("cannot register the adapter")?;

    let abort = CancellationToken::new();
    let request = RunRequest {
        options: RunOptions {
            cwd: args.cwd,
            model: args.model,
            max_turns: args.max_turns,
            resume: args.resume,
            system_prompt: args.system,
            trust: args.trust.into(),
            ..RunOptions::default()
        },
        limits: RunLimits {
            timeout: args.timeout,
            fuel: args.fuel,
            max_memory_bytes: args.max_memory,
            ..RunLimits::default()
        },
        abort: Some(abort.clone()),
        drain: args.drain,
        ..RunRequest::new(agent, prompt)
    };
    let mut run = run_agent(&registry, request)?;
    let ctrl_c = tokio::spawn(interrupt_on_ctrl_c(abort));

    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Pretty
    } else {
        OutputFormat::Ndjson
    });
    let mut renderer = render::for_format(format);
    let mut status = None;
    loop {
        let next = run.next();
        tokio::pin!(next);
        let event = tokio::select! {
            biased;
            event = &mut next => event,
            () = tokio::time::sleep(SPINNER_DELAY) => {
                renderer.waiting();
                next.await
            }
        };
        let Some(event) = event else { break };
        if let EventPayload::Done(done) = &event.payload {
            status = Some(done.status);
        }
        renderer.event(&event).context("cannot write the output")?;
    }
    renderer.finish().context("cannot write the output")?;
    ctrl_c.abort();
    Ok(match status {
        Some(DoneStatus::Success) => ExitCode::SUCCESS,
        Some(DoneStatus::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        _ => ExitCode::FAILURE,
    })
}

/// The first Ctrl-C interrupts the run (it ends with `done` interrupted);
/// a second one leaves at once.
async fn interrupt_on_ctrl_c(abort: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    tracing::info!("interrupting the run (Ctrl-C again to quit at once)");
    abort.cancel();
    if tokio::signal::ctrl_c().await.is_ok() {
        std::process::exit(i32::from(EXIT_INTERRUPTED));
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
