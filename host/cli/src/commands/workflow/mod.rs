//! `moat workflow`: run, resume, status, graph and validate workflows
//! (docs/workflows.md). The engine is `moat-workflow`'s, and so is its
//! runner, which launches each attempt as a moat run, and its launch
//! (its record, budget, span and end); this module turns flags into their
//! settings and shows its events ([`view`]).

mod view;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use moat_runs::RunBook;
use moat_sandbox::Sandbox;
use moat_workflow::{
    Finished, Start, Workflow, WorkflowError, WorkflowEvent, WorkflowLaunch, WorkflowStatus,
};
use tokio_util::sync::CancellationToken;

use super::drive::on_signals;
use crate::args::{
    GraphFormat, ListFormat, OutputFormat, WorkflowCommand, WorkflowFlags, WorkflowStatusArgs,
};
use crate::names::FlagNames;
use crate::{Globals, UsageError, render, wiring};
use view::{Live, Ndjson, View};

/// The subcommands that need no sandbox: `Some` when it was one of them.
pub async fn without_sandbox(
    command: &WorkflowCommand,
    globals: &Globals,
) -> Option<anyhow::Result<ExitCode>> {
    match command {
        WorkflowCommand::Validate(args) => Some(validate(&args.file)),
        WorkflowCommand::Apply(args) => {
            Some(apply(&args.file, args.include_protected, globals).await)
        }
        WorkflowCommand::Graph(args) => Some(graph(&args.file, args.format)),
        WorkflowCommand::Status(args) => Some(status(args)),
        WorkflowCommand::Run(_) | WorkflowCommand::Resume(_) => None,
    }
}

/// `moat workflow run` and `resume`.
pub async fn workflow(
    globals: &Globals,
    sandbox: &Sandbox,
    command: WorkflowCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        WorkflowCommand::Run(args) => {
            run(
                globals,
                sandbox,
                args.workflow,
                Start::Fresh {
                    discard: args.fresh,
                },
            )
            .await
        }
        WorkflowCommand::Resume(args) => {
            run(
                globals,
                sandbox,
                args.workflow,
                Start::Resume { force: args.force },
            )
            .await
        }
        other => without_sandbox(&other, globals)
            .await
            .unwrap_or_else(|| unreachable!("run and resume are above")),
    }
}

fn load(file: &Path) -> anyhow::Result<Workflow> {
    moat_workflow::load(file).map_err(|error| UsageError(error.to_string()).into())
}

fn validate(file: &Path) -> anyhow::Result<ExitCode> {
    let workflow = load(file)?;
    // What `run` would refuse, refused here: an adapter nothing has.
    let unknown: Vec<String> = workflow
        .tasks
        .iter()
        .filter_map(|task| {
            let adapter = task.adapter_in(&workflow.project);
            moat_launch::check_exists(&adapter)
                .err()
                .map(|error| format!("{}: task {}: {error}", file.display(), task.id))
        })
        .collect();
    if !unknown.is_empty() {
        return Err(UsageError(unknown.join("\nmoat: ")).into());
    }
    println!(
        "{}: ok — workflow {}, {} tasks, {} hooks",
        file.display(),
        workflow.name,
        workflow.tasks.len(),
        workflow.hooks.len()
    );
    for command in workflow.unsandboxed() {
        println!("  {command} runs unsandboxed: with your full rights");
    }
    Ok(ExitCode::SUCCESS)
}

/// One line for each command of `workflow` that runs with the user's full
/// rights where a task may write the project (`write`: the directories the
/// workflow may give its tasks to write), which the command may read or
/// run: an agent could plant what it runs.
fn unsandboxed_warnings(workflow: &moat_workflow::Workflow, write: &[PathBuf]) -> Vec<String> {
    let project = std::fs::canonicalize(&workflow.project).unwrap_or(workflow.project.clone());
    let writable = write
        .iter()
        .map(|dir| std::fs::canonicalize(dir).unwrap_or(dir.clone()))
        .any(|dir| dir.starts_with(&project) || project.starts_with(&dir));
    if !writable {
        return Vec::new();
    }
    workflow
        .unsandboxed()
        .into_iter()
        .map(|command| {
            format!(
                "warning: {command} runs unsandboxed, with your full rights, and a task may write the project it runs in (leave out unsandboxed = true to contain it)"
            )
        })
        .collect()
}

/// `moat workflow apply`: the changes of each completed task that worked
/// in a workspace, its last run's, in dependency order (each task's
/// workspace started from its upstream tasks' changes, so its own diff
/// builds on theirs), landed together or not at all.
async fn apply(
    file: &Path,
    include_protected: bool,
    globals: &Globals,
) -> anyhow::Result<ExitCode> {
    let workflow = load(file)?;
    let path = moat_workflow::state::directory(&workflow).join("state.json");
    let state = moat_workflow::state::read(&path)?.ok_or_else(|| {
        UsageError(format!(
            "{} has not run here: no {}",
            workflow.name,
            path.display()
        ))
    })?;
    let root = wiring::workspace_root(globals)?;
    let workers = wiring::recorded(globals, "moat workflow apply")
        .await?
        .workers();
    let mut changes = Vec::new();
    for task in dependency_order(&workflow.tasks) {
        let Some(task_state) = state.tasks.get(&task.id) else {
            continue;
        };
        let (Some(_), moat_workflow::TaskStatus::Completed, Some(run)) =
            (task.workspace(), task_state.status, task_state.runs.last())
        else {
            continue;
        };
        let Some(id) = moat_runs::RunId::parse(run) else {
            continue;
        };
        match moat_launch::RunWorkspace::find(workers.clone(), &root, &id) {
            Ok(found) => {
                let patch = found.changes().await.map_err(wiring::launch_error)?;
                changes.push((found.workspace, patch));
            }
            Err(moat_launch::LaunchError::Workspace(moat_workspace::WorkspaceError::NotFound(
                _,
            ))) => {}
            Err(error) => return Err(wiring::launch_error(error)),
        }
    }
    if changes.is_empty() {
        println!("{}: no task changed anything in a workspace", workflow.name);
        return Ok(ExitCode::SUCCESS);
    }
    let applied =
        moat_workspace::apply_all(&changes, include_protected).map_err(super::workspace_error)?;
    println!(
        "{}: the changes of {applied} tasks applied to {}",
        workflow.name,
        changes[0].0.project.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The tasks, each after the tasks it depends on.
fn dependency_order(tasks: &[moat_workflow::Task]) -> Vec<&moat_workflow::Task> {
    let mut placed: Vec<&moat_workflow::Task> = Vec::new();
    let mut left: Vec<&moat_workflow::Task> = tasks.iter().collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|task| {
            let ready = task
                .depends_on
                .iter()
                .all(|d| placed.iter().any(|p| &p.id == d));
            if ready {
                placed.push(task);
            }
            !ready
        });
        if left.len() == before {
            // A cycle: validation refuses those; keep the file's order.
            placed.append(&mut left);
        }
    }
    placed
}

fn graph(file: &Path, format: GraphFormat) -> anyhow::Result<ExitCode> {
    let workflow = load(file)?;
    let text = match format {
        GraphFormat::Text => moat_workflow::graph::text(&workflow.tasks),
        GraphFormat::Dot => moat_workflow::graph::dot(&workflow.name, &workflow.tasks),
        GraphFormat::Mermaid => moat_workflow::graph::mermaid(&workflow.tasks),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn status(args: &WorkflowStatusArgs) -> anyhow::Result<ExitCode> {
    let workflow = load(&args.file)?;
    let path = moat_workflow::state::directory(&workflow).join("state.json");
    let state = moat_workflow::state::read(&path)?;
    if args.output == ListFormat::Json {
        let state = state.ok_or_else(|| {
            UsageError(format!(
                "{} has not run here: no {}",
                workflow.name,
                path.display()
            ))
        })?;
        println!("{}", serde_json::to_string_pretty(&state)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![[
        "TASK".to_string(),
        "STATUS".into(),
        "ITER".into(),
        "DURATION".into(),
        "TOKENS".into(),
        "COST".into(),
        "NOTE".into(),
    ]];
    for task in &workflow.tasks {
        let Some(task_state) = state.as_ref().and_then(|s| s.tasks.get(&task.id)) else {
            rows.push([
                task.id.clone(),
                "PENDING".into(),
                "0".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                String::new(),
            ]);
            continue;
        };
        let usage = &task_state.usage;
        let tokens = usage.tokens.map_or("-".into(), |tokens| {
            format!("{}→{}", tokens.input.total, tokens.output.total)
        });
        // A running task's run may be going on (in a cluster): its id
        // finds it.
        let in_flight = task_state
            .run
            .as_ref()
            .filter(|_| task_state.status == moat_workflow::TaskStatus::Running);
        let note = match (&task_state.blocked_by, in_flight, &task_state.error) {
            (Some(by), _, _) => format!("blocked by {by}"),
            (None, Some(run), _) => format!("run {run}"),
            (None, None, Some(error)) => error
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect(),
            (None, None, None) => String::new(),
        };
        rows.push([
            task.id.clone(),
            task_state.status.as_str().to_owned(),
            task_state.iterations.to_string(),
            if task_state.duration_ms == 0 {
                "-".into()
            } else {
                view::seconds(task_state.duration_ms)
            },
            tokens,
            usage
                .cost
                .map_or("-".into(), |cost| format!("${:.4}", cost.usd)),
            note,
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    match &state {
        Some(state) => println!(
            "workflow {}: {} (started {}{})",
            workflow.name,
            state.status.as_str(),
            state.started_at,
            state
                .ended_at
                .as_ref()
                .map(|at| format!(", ended {at}"))
                .unwrap_or_default()
        ),
        None => println!("workflow {}: not run here yet", workflow.name),
    }
    for command in workflow.unsandboxed() {
        println!("{command} runs unsandboxed: with your full rights");
    }
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", render::safe::text(line.join("  ").trim_end()));
    }
    Ok(ExitCode::SUCCESS)
}

async fn run(
    globals: &Globals,
    sandbox: &Sandbox,
    flags: WorkflowFlags,
    start: Start,
) -> anyhow::Result<ExitCode> {
    let workflow = load(&flags.file)?;
    let view: Box<dyn View> = match render::default_format(flags.output) {
        OutputFormat::Pretty => Box::new(Live::new()),
        OutputFormat::Ndjson => Box::new(Ndjson),
        other => {
            return Err(UsageError(format!(
                "--output {} is for one run; a workflow's output is pretty or ndjson",
                format!("{other:?}").to_lowercase()
            ))
            .into());
        }
    };
    let max_parallel =
        moat_workflow::parallelism(flags.max_parallel, &workflow, crate::args::COMMAND_SESSIONS);
    // The workflow's own record stays where the workflow runs, with its
    // state file: this machine's store. Its tasks' runs go where its
    // launcher puts them (with --nats, the cluster).
    let local: Option<Arc<dyn RunBook>> = match flags.no_store {
        true => None,
        false => Some(Arc::new(wiring::local_runs(globals.store.as_deref())?)),
    };
    let tasks_book = match (&globals.cluster.nats, &local) {
        (None, Some(local)) => Some(local.clone()),
        _ => wiring::book(globals, "moat workflow", flags.no_store).await?,
    };
    // The flags are the most any task gets, with the trust presets of the
    // project, where every task works; their budget is the workflow's.
    let request = flags.request.request().map_err(wiring::request_error)?;
    for warning in unsandboxed_warnings(&workflow, &request.grants.all().write) {
        eprintln!("moat: {warning}");
    }
    let workspace_root = match workflow.tasks.iter().any(|task| task.workspace().is_some()) {
        true => Some(wiring::workspace_root(globals)?),
        false => None,
    };
    let launch = WorkflowLaunch {
        launcher: wiring::launcher(globals, sandbox, tasks_book),
        book: local,
        ceiling: request.ceiling("the workflow"),
        ask: request.how_it_asks(),
        names: Arc::new(FlagNames),
        workspace_root,
        max_parallel,
        start,
        workflow,
    };
    let cancel = CancellationToken::new();
    let (signals, stopped) = on_signals(cancel.clone());
    let view = Arc::new(Mutex::new(view));
    let shown = view.clone();
    let emit: moat_workflow::Emit = Arc::new(move |event: &WorkflowEvent| {
        shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(event);
    });
    let finished = launch.run(cancel, emit, |_| {}).await;
    signals.abort();
    let (result, budget_spent) = match finished {
        Finished::NotStarted(error) => return Err(refusal(error)),
        Finished::Ran {
            result,
            budget_spent,
        } => (result, budget_spent),
    };
    if let Some(budget) = budget_spent {
        eprintln!(
            "moat: the workflow's budget of {} is spent; nothing more was dispatched",
            budget.words()
        );
    }
    match result {
        Ok(summary) => Ok(match summary.status {
            WorkflowStatus::Completed => ExitCode::SUCCESS,
            // Stopped by a signal: its code, as `moat run` gives; by
            // `moat cancel` from elsewhere: a failure, as `moat run` too.
            WorkflowStatus::Cancelled => stopped
                .get()
                .map_or(ExitCode::FAILURE, |s| ExitCode::from(s.exit_code())),
            WorkflowStatus::Failed | WorkflowStatus::Running => ExitCode::FAILURE,
        }),
        Err(error) => Err(anyhow::anyhow!(
            "critical: {error}; nothing more was dispatched"
        )),
    }
}

/// A workflow that cannot start: the user's to fix (exit 2), except a
/// state moat cannot read or write.
fn refusal(error: WorkflowError) -> anyhow::Error {
    match error {
        WorkflowError::State(error) => anyhow::Error::new(error).context("the workflow's state"),
        error @ WorkflowError::Record(_) => anyhow::Error::new(error),
        other => UsageError(other.to_string()).into(),
    }
}
