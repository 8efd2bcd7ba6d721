//! `moat parallel`: several tasks at once, their events merged as they
//! arrive; Ctrl-C interrupts them all.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use moat_engine::{Adapter, ParallelTask, Registry, RunRequest, run_parallel};
use moat_sandbox::{RunScope, Sandbox};

use super::drive::render_until_done;
use super::recording;
use crate::args::{OutputFormat, ParallelArgs};
use crate::names::FlagNames;
use crate::resolve::Resolved;
use crate::tasks::{self, Task};
use crate::{UsageError, render, resolve};

pub async fn parallel(
    sandbox: &Sandbox,
    cli_store: Option<&std::path::Path>,
    args: ParallelArgs,
) -> anyhow::Result<ExitCode> {
    let tasks = match &args.tasks_file {
        Some(file) => tasks::from_file(file, &args.run)?,
        None => args
            .tasks
            .iter()
            .map(|spec| tasks::from_flag(spec, &args.run))
            .collect::<Result<_, _>>()?,
    };
    if tasks.is_empty() {
        return Err(UsageError(
            "no tasks: give --task [ROLE:]ADAPTER=PROMPT or --tasks FILE".into(),
        )
        .into());
    }
    let (registry, loaded) = load_adapters(sandbox, &tasks).await?;
    let agents: HashMap<String, String> = loaded
        .iter()
        .map(|(arg, resolved)| (arg.clone(), resolved.adapter.info().name.clone()))
        .collect();
    let format = render::default_format(args.output);
    if format == OutputFormat::Json {
        return Err(UsageError(
            "--output json gives one run's result and moat parallel has several tasks; \
             use --output ndjson (each task's result is also in `moat show RUN --json`)"
                .into(),
        )
        .into());
    }
    let labels = labels(&tasks, &agents);

    let store = if args.no_store {
        None
    } else {
        Some(resolve::store(cli_store)?)
    };
    let abort = CancellationToken::new();
    let mut parallel_tasks = Vec::with_capacity(tasks.len());
    let mut recorders = Vec::new();
    let mut task_aborts = Vec::new();
    for (task, label) in tasks.into_iter().zip(&labels) {
        // Each task gets its own grants: its adapter, trust, cwd and flags.
        let scope = resolve::scope(
            &loaded[&task.adapter],
            task.flags.trust,
            task.flags.cwd.as_deref(),
            &task.flags.add_dirs,
            &task.flags.grants,
        )?;
        resolve::check_mcp_programs(task.flags.mcp_config.as_ref(), &scope.grants)?;
        // Pretty output tells tasks apart by role, so every task gets one
        // there; ndjson carries only the roles the user gave.
        let role = match format {
            OutputFormat::Pretty => Some(label.clone()),
            _ => task.role.clone(),
        };
        // Its own abort, for a cancel of this task alone (`moat cancel`).
        let task_abort = CancellationToken::new();
        let request = RunRequest {
            options: task.flags.options(),
            limits: task.flags.limits(loaded[&task.adapter].default_timeout()),
            drain: task.flags.drain,
            names: Arc::new(FlagNames),
            price_table: task.flags.price_table.clone(),
            resume_fallback: !task.flags.no_resume_fallback,
            abort: Some(task_abort.clone()),
            ..RunRequest::new(agents[&task.adapter].clone(), task.prompt).with_scope(scope)
        };
        if let Some(store) = &store {
            let sha256 = loaded[&task.adapter].adapter.details().sha256.clone();
            recorders.push(recording::record(store.clone(), &request, sha256, None)?);
            task_aborts.push(task_abort);
        }
        parallel_tasks.push(ParallelTask { request, role });
    }
    let mut run = run_parallel(&registry, parallel_tasks, Some(abort.clone()))?;
    if let Some(budget) = args
        .max_total_memory
        .or_else(moat_sandbox::default_memory_budget)
    {
        run = run.with_memory_budget(budget);
    }
    let mut renderer = render::for_parallel(format, &labels);
    if store.is_none() {
        return render_until_done(Box::pin(run.into_stream()), renderer.as_mut(), abort).await;
    }
    let recorded = recording::recorded(run.into_tagged_stream(), recorders, task_aborts);
    render_until_done(recorded, renderer.as_mut(), abort).await
}

/// Loads each distinct adapter once; returns the registry and, per adapter
/// argument, the adapter loaded for it.
async fn load_adapters(
    sandbox: &Sandbox,
    tasks: &[Task],
) -> anyhow::Result<(Registry<RunScope>, HashMap<String, Resolved>)> {
    let mut registry = Registry::scoped();
    let mut loaded: HashMap<String, Resolved> = HashMap::new();
    for task in tasks {
        if loaded.contains_key(&task.adapter) {
            continue;
        }
        let resolved = resolve::adapter(sandbox, &task.adapter).await?;
        let name = resolved.adapter.info().name.clone();
        if let Some((other, _)) = loaded
            .iter()
            .find(|(_, other)| other.adapter.info().name == name)
        {
            return Err(UsageError(format!(
                "{} and {other} are both adapters named `{name}`; run them separately",
                task.adapter
            ))
            .into());
        }
        registry.register(Arc::new(resolved.adapter.clone()))?;
        loaded.insert(task.adapter.clone(), resolved);
    }
    Ok((registry, loaded))
}

/// A label per task: its role, else its adapter's name, numbered when
/// several tasks would share it.
fn labels(tasks: &[Task], agents: &HashMap<String, String>) -> Vec<String> {
    let base: Vec<String> = tasks
        .iter()
        .map(|task| {
            task.role
                .clone()
                .unwrap_or_else(|| agents[&task.adapter].clone())
        })
        .collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    base.iter()
        .map(|label| {
            let count = base.iter().filter(|other| *other == label).count();
            if count == 1 {
                return label.clone();
            }
            let n = seen.entry(label).or_default();
            *n += 1;
            format!("{label}#{n}")
        })
        .collect()
}
