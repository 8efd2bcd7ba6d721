//! `moat run`: one adapter, one prompt, events rendered as they arrive.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use moat_engine::{Adapter, Registry, RunRequest, run_agent};
use moat_sandbox::Sandbox;

use super::drive::render_until_done;
use crate::args::RunArgs;
use crate::names::FlagNames;
use crate::render;
use crate::{UsageError, resolve};

pub async fn run(sandbox: &Sandbox, args: RunArgs) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(args.prompt.as_deref())?;
    let resolved = resolve::adapter(sandbox, &args.adapter).await?;
    let scope = resolve::scope(
        &resolved,
        args.run.trust,
        args.run.cwd.as_deref(),
        &args.run.grants,
    )?;
    let mut registry = Registry::scoped();
    let agent = resolved.adapter.info().name.clone();
    let default_timeout = resolved.default_timeout();
    registry
        .register(Arc::new(resolved.adapter))
        .context("cannot register the adapter")?;

    let abort = CancellationToken::new();
    let request = RunRequest {
        options: args.run.options(),
        limits: args.run.limits(default_timeout),
        abort: Some(abort.clone()),
        drain: args.run.drain,
        names: Arc::new(FlagNames),
        ..RunRequest::new(agent, prompt).with_scope(scope)
    };
    let run = run_agent(&registry, request)?;
    let mut renderer = render::for_format(render::default_format(args.output));
    render_until_done(run.into_stream(), renderer.as_mut(), abort).await
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
