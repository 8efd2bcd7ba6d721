//! `moat ui`: the local web inspector (moat-ui) over this machine's runs
//! or, with `--nats`, the cluster's; its URL, with the token, printed and
//! opened in a browser when there is a display. The workflow files the
//! page starts run under its flags, as `moat workflow run`'s tasks do.

use std::io::Write;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;

use futures::future::BoxFuture;
use moat_launch::{LaunchError, RunWorkspace};
use moat_runs::RunId;
use moat_sandbox::Sandbox;
use moat_ui::{DiffSource, Settings, Ui, Workspaces};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::args::UiArgs;
use crate::{Globals, wiring};

/// How long workflows started from the page, and their tasks, get to end
/// once `moat ui` stops.
const STOP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn ui(globals: &Globals, sandbox: &Sandbox, args: &UiArgs) -> anyhow::Result<ExitCode> {
    let book = wiring::recorded(globals, "moat ui").await?;
    let workers = book.workers();
    // The workflows the page starts: their tasks within its flags.
    let request = args.request.request().map_err(wiring::request_error)?;
    let launcher = wiring::launcher(globals, sandbox, Some(book.clone()));
    let starter = Arc::new(
        moat_workflow::Starter::new(
            launcher.clone(),
            request.ceiling("moat ui"),
            Arc::new(crate::names::FlagNames),
            crate::args::COMMAND_SESSIONS,
        )
        .with_workspace_root(wiring::workspace_root(globals).ok())
        .with_ask(request.how_it_asks()),
    );
    let runs: Arc<dyn moat_runs::Runs> = book;
    let settings = Settings {
        port: args.port,
        diff: wiring::workspace_root(globals)
            .ok()
            .map(|root| -> DiffSource {
                Arc::new(RunsWorkspaces {
                    workers: workers.clone(),
                    root,
                })
            }),
        answerer: answerer(),
        workflows: Some(starter.clone()),
    };
    let ui = Ui::bind(runs, settings).await.map_err(|error| {
        crate::UsageError(format!(
            "cannot listen on 127.0.0.1:{}: {error}; --port 0 picks a free port",
            args.port
        ))
    })?;
    let url = ui.url();
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "moat ui: {url}")?;
        writeln!(
            stdout,
            "(the token in this URL is the only way in; Ctrl-C stops)"
        )?;
        stdout.flush()?;
    }
    if !args.no_open {
        open(&url);
    }
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signals(stop.clone()));
    let served = ui.serve(stop).await;
    // The workflows it started end cancelled, their tasks interrupted.
    let runs = async {
        launcher.stop();
        launcher.stop_runs(STOP_PATIENCE).await;
    };
    tokio::join!(starter.stop(STOP_PATIENCE), runs);
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Runs' workspaces under `root`, found as `moat diff` finds them.
struct RunsWorkspaces {
    /// Where the changes of runs on workers elsewhere are.
    workers: Option<Arc<dyn moat_runs::Workers>>,
    root: std::path::PathBuf,
}

impl Workspaces for RunsWorkspaces {
    fn has(&self, id: &RunId) -> bool {
        RunWorkspace::find(self.workers.clone(), &self.root, id).is_ok()
    }

    /// As `moat diff RUN` prints it (without colour).
    fn diff(&self, id: RunId) -> BoxFuture<'static, Result<Option<String>, String>> {
        let workers = self.workers.clone();
        let root = self.root.clone();
        Box::pin(async move {
            let workspace = match RunWorkspace::find(workers, &root, &id) {
                Ok(workspace) => workspace,
                Err(LaunchError::Workspace(moat_workspace::WorkspaceError::NotFound(_))) => {
                    return Ok(None);
                }
                Err(error) => return Err(error.to_string()),
            };
            let diff = workspace
                .diff(false, false)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(String::from_utf8_lossy(&diff).into_owned()))
        })
    }
}

/// Who answers from the page, as the run's record keeps it.
fn answerer() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("moat ui (pid {}, {user})", std::process::id()),
        _ => format!("moat ui (pid {})", std::process::id()),
    }
}

/// Opens `url` in the desktop's browser when there is a display; the URL
/// is printed either way.
fn open(url: &str) {
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    if !display {
        return;
    }
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Err(error) = opened {
        tracing::debug!("cannot run xdg-open: {error}");
    }
}

async fn stop_on_signals(stop: CancellationToken) {
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    stop.cancel();
}
