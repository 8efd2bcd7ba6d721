//! `moat parallel`: several tasks at once, their events merged as they
//! arrive; Ctrl-C interrupts them all. Each task is a run of its own,
//! launched like any other (with `--nats`, on the cluster).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use moat_launch::{AdapterRef, LaunchError, LaunchSpec, Resolved, Resolver};
use moat_sandbox::Sandbox;

use super::drive::render_until_done;
use super::run::warn_uncontained;
use crate::args::{OutputFormat, ParallelArgs};
use crate::names::FlagNames;
use crate::tasks::{self, Task};
use crate::{Globals, UsageError, render, wiring};

pub async fn parallel(
    globals: &Globals,
    sandbox: &Sandbox,
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
    let format = render::default_format(args.output);
    if format == OutputFormat::Json {
        return Err(UsageError(
            "--output json gives one run's result and moat parallel has several tasks; \
             use --output ndjson (each task's result is also in `moat show RUN --json`)"
                .into(),
        )
        .into());
    }
    let resolver = Resolver::new(sandbox.clone());
    let (book, loaded) = tokio::join!(
        wiring::book(globals, "moat parallel", args.no_store),
        load_adapters(&resolver, &tasks)
    );
    let loaded = loaded?;
    let launcher = wiring::launcher_with(globals, resolver, book?);
    // Every task under the parent the shared flags name (a task's own
    // `parent` names its own).
    let runs = launcher.runs();
    let agents: HashMap<String, String> = loaded
        .iter()
        .map(|(arg, resolved)| (arg.clone(), resolved.name().to_owned()))
        .collect();
    let labels = labels(&tasks, &agents);
    let abort = CancellationToken::new();
    let mut prepared = Vec::with_capacity(tasks.len());
    for (task, label) in tasks.into_iter().zip(&labels) {
        // Pretty output tells tasks apart by role, so every task gets one
        // there; ndjson carries only the roles the user gave.
        let role = match format {
            OutputFormat::Pretty => Some(label.clone()),
            _ => task.role().map(str::to_owned),
        };
        // Each task its own grants (its adapter, trust, cwd and flags) and
        // its own abort, for a cancel of it alone (`moat cancel`); the
        // whole run's stops them all.
        let resolved = &loaded[&task.adapter];
        let request = &task.request;
        let parent = wiring::parent(request, runs.as_deref()).await?;
        let ceiling = Arc::new(request.own_ceiling("moat parallel"));
        let asked = request
            .asked_by_hand(&ceiling, resolved, parent.is_some())
            .map_err(|refusal| wiring::launch_error(LaunchError::Refused(refusal)))?;
        let spec = LaunchSpec {
            parent,
            abort: abort.child_token(),
            role,
            // Each task a workspace of its own.
            workspace: wiring::workspace(globals, request)?,
            ..request.launch_spec(
                AdapterRef::Resolved(Box::new(resolved.clone())),
                ceiling,
                asked,
                Arc::new(FlagNames),
            )
        };
        let task = launcher.prepare(spec).await.map_err(wiring::launch_error)?;
        warn_uncontained(&task);
        prepared.push(task);
    }
    let budget = args
        .max_total_memory
        .or_else(moat_sandbox::default_memory_budget);
    let mut renderer = render::for_parallel(format, &labels);
    let events = launcher.start_all(prepared, budget);
    render_until_done(events, renderer.as_mut(), abort, None).await
}

/// Loads each distinct adapter once: per adapter argument, the adapter
/// loaded for it. Two different components of the same name are refused:
/// their events could not be told apart.
async fn load_adapters(
    resolver: &Resolver,
    tasks: &[Task],
) -> anyhow::Result<HashMap<String, Resolved>> {
    let mut loaded: HashMap<String, Resolved> = HashMap::new();
    for task in tasks {
        if loaded.contains_key(&task.adapter) {
            continue;
        }
        let resolved = resolver
            .resolve(&task.adapter)
            .await
            .map_err(wiring::resolve_error)?;
        if let Some((other, _)) = loaded.iter().find(|(_, other)| {
            other.name() == resolved.name() && other.sha256() != resolved.sha256()
        }) {
            return Err(UsageError(format!(
                "{} and {other} are both adapters named `{}`; run them separately",
                task.adapter,
                resolved.name()
            ))
            .into());
        }
        loaded.insert(task.adapter.clone(), resolved);
    }
    Ok(loaded)
}

/// A label per task: its role, else its adapter's name, numbered when
/// several tasks would share it.
fn labels(tasks: &[Task], agents: &HashMap<String, String>) -> Vec<String> {
    let base: Vec<String> = tasks
        .iter()
        .map(|task| {
            task.role()
                .map_or_else(|| agents[&task.adapter].clone(), str::to_owned)
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
