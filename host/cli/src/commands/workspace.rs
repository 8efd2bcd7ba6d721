//! A run's workspace from the command line: `moat diff RUN`, `moat apply
//! RUN`, `moat workspace ls|rm` (moat_workspace; the runs' statuses from
//! the store or, with `--nats`, the cluster, so a workspace of a live run
//! is never removed; the changes of a run that worked on a cluster from
//! the cluster).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use moat_launch::RunWorkspace;
use moat_runs::{RunId, RunStatus, Runs};
use moat_workspace::Workspace;

use crate::args::{ApplyArgs, DiffArgs, WorkspaceCommand, WorkspaceRmArgs};
use crate::{Globals, UsageError, wiring};

pub async fn diff(globals: &Globals, args: &DiffArgs) -> anyhow::Result<ExitCode> {
    let (workspace, _) = of_run(globals, &args.run).await?;
    let color = std::io::stdout().is_terminal();
    let diff = workspace
        .diff(args.stat, color)
        .await
        .map_err(wiring::launch_error)?;
    if diff.is_empty() {
        // Said on stderr: a diff piped to a file stays empty.
        eprintln!(
            "moat: run {} changed nothing in its workspace",
            workspace.workspace.run
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&diff)?;
    stdout.flush()?;
    // Listed apart, on stderr: a diff piped to a file stays a patch.
    let protected = workspace.protected().await.map_err(wiring::launch_error)?;
    for found in &protected {
        eprintln!("moat: not landed by moat apply without --include-protected: {found}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn apply(globals: &Globals, args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let (found, runs) = of_run(globals, &args.run).await?;
    let workspace = &found.workspace;
    if let Some(record) = runs
        .get(&run_id(workspace)?)
        .await
        .map_err(wiring::runs_error)?
        && !record.is_terminal()
    {
        return Err(UsageError(format!(
            "run {} is {}: apply its changes once it has ended (moat wait {})",
            workspace.run, record.status, workspace.run
        ))
        .into());
    }
    if args.commits {
        let landed = found
            .apply_commits(args.include_protected)
            .await
            .map_err(wiring::launch_error)?;
        let project = workspace.project.display();
        match landed {
            moat_workspace::Landed::Nothing => {
                println!(
                    "{}: made no commit (moat apply {} lands its changes)",
                    workspace.run, workspace.run
                )
            }
            moat_workspace::Landed::FastForward { commits } => println!(
                "{}: {} fast-forwarded to its {}",
                workspace.run,
                project,
                plural(commits, "commit")
            ),
            moat_workspace::Landed::CherryPicked { commits } => println!(
                "{}: {} replayed on {}",
                workspace.run,
                plural(commits, "commit"),
                project
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    match found.apply(args.include_protected).await {
        Ok(0) => println!("{}: nothing changed", workspace.run),
        Ok(_) => println!(
            "{}: applied to {}",
            workspace.run,
            workspace.project.display()
        ),
        // Applying twice is not a mistake worth failing a script for.
        Err(moat_launch::LaunchError::Workspace(
            already @ moat_workspace::WorkspaceError::AlreadyApplied { .. },
        )) => println!("{already}"),
        Err(error) => return Err(wiring::launch_error(error)),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn workspace(globals: &Globals, command: &WorkspaceCommand) -> anyhow::Result<ExitCode> {
    match command {
        WorkspaceCommand::Ls => list(globals).await,
        WorkspaceCommand::Rm(args) => remove(globals, args).await,
    }
}

async fn list(globals: &Globals) -> anyhow::Result<ExitCode> {
    let root = wiring::workspace_root(globals)?;
    let workspaces = Workspace::list(&root).map_err(workspace_error)?;
    let runs = wiring::runs(globals, "moat workspace").await?;
    let mut rows = vec![[
        "RUN".to_owned(),
        "STATUS".to_owned(),
        "MODE".to_owned(),
        "BASE".to_owned(),
        "DIR".to_owned(),
    ]];
    for workspace in workspaces {
        let status = status_of(runs.as_ref(), &workspace).await;
        let base = match &workspace.branch {
            Some(branch) => format!("{} ({branch})", short(&workspace.base)),
            None => short(&workspace.base).to_owned(),
        };
        rows.push([
            workspace.run.clone(),
            status.map_or("unknown".to_owned(), |s| s.to_string()),
            workspace.mode.as_str().to_owned(),
            base,
            where_it_is(&workspace),
        ]);
    }
    // Each column as wide as its widest cell: a branch or a path never
    // runs into the next one.
    let widths: Vec<usize> = (0..4)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn remove(globals: &Globals, args: &WorkspaceRmArgs) -> anyhow::Result<ExitCode> {
    let root = wiring::workspace_root(globals)?;
    let book = wiring::recorded(globals, "moat workspace").await?;
    let workers = book.workers();
    let runs: Arc<dyn Runs> = book;
    let chosen: Vec<Workspace> = if args.runs.is_empty() {
        let now = moat_engine::now_ms();
        let older = args
            .older_than
            .map(|age| now.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX)));
        Workspace::list(&root)
            .map_err(workspace_error)?
            .into_iter()
            .filter(|w| older.is_none_or(|before| w.created_ms <= before))
            .collect()
    } else {
        let mut chosen = Vec::new();
        for run in &args.runs {
            let id = runs.find(run).await.map_err(wiring::runs_error)?;
            chosen.push(Workspace::find(&root, id.as_str()).map_err(workspace_error)?);
        }
        chosen
    };
    for workspace in chosen {
        let status = status_of(runs.as_ref(), &workspace).await;
        if matches!(
            status,
            Some(RunStatus::Pending | RunStatus::Running | RunStatus::Waiting)
        ) {
            if !args.runs.is_empty() {
                eprintln!(
                    "moat: run {} is live: its workspace stays (moat cancel {} first)",
                    workspace.run, workspace.run
                );
            }
            continue;
        }
        workspace.remove(&root).map_err(workspace_error)?;
        if workspace.on_cluster
            && let Some(workers) = &workers
        {
            workers
                .remove_changes(&workspace.run)
                .await
                .map_err(wiring::runs_error)?;
        }
        println!("{}  removed", workspace.run);
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `text`'s workspace, and the runs it was found in.
async fn of_run(globals: &Globals, text: &str) -> anyhow::Result<(RunWorkspace, Arc<dyn Runs>)> {
    let book = wiring::recorded(globals, "moat").await?;
    let workers = book.workers();
    let runs: Arc<dyn Runs> = book;
    let id = runs.find(text).await.map_err(wiring::runs_error)?;
    let root = wiring::workspace_root(globals)?;
    let workspace = RunWorkspace::find(workers, &root, &id).map_err(wiring::launch_error)?;
    Ok((workspace, runs))
}

/// The status of a workspace's run; `None` when the store has no such run
/// (pruned, or made by a run recorded nowhere).
async fn status_of(runs: &dyn Runs, workspace: &Workspace) -> Option<RunStatus> {
    let id = RunId::parse(&workspace.run)?;
    runs.get(&id)
        .await
        .ok()
        .flatten()
        .map(|record| record.status)
}

fn run_id(workspace: &Workspace) -> anyhow::Result<RunId> {
    RunId::parse(&workspace.run).ok_or_else(|| anyhow::anyhow!("{} is not a run id", workspace.run))
}

/// Where a workspace's files are: its directory, or its worker's.
pub fn where_it_is(workspace: &Workspace) -> String {
    match workspace.on_cluster {
        true => "(on its worker)".to_owned(),
        false => workspace.dir.display().to_string(),
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// A workspace's failure: the user's to fix (exit 2) when it says what to
/// change, else moat's.
pub fn workspace_error(error: moat_workspace::WorkspaceError) -> anyhow::Error {
    match error {
        moat_workspace::WorkspaceError::NotFound(_)
        | moat_workspace::WorkspaceError::Conflict { .. }
        | moat_workspace::WorkspaceError::AlreadyApplied { .. }
        | moat_workspace::WorkspaceError::Dirty { .. }
        | moat_workspace::WorkspaceError::Project(_) => UsageError(error.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

/// `1 commit`, `2 commits`.
fn plural(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    }
}
