//! `moat acp ADAPTER [flags]`: moat as an ACP agent on stdio (moat-acp).
//! The flags are `moat run`'s; each prompt of each session becomes a run
//! of ADAPTER with them, in the session's directory, through the launch
//! layer. Stdout carries the protocol alone; logs go to stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;
use tokio::signal::unix::{SignalKind, signal};

use moat_acp::{AcpAgent, Turn, TurnSpecs};
use moat_grants::TrustLevel;
use moat_launch::request::{Dialect, Field, RunRequest};
use moat_launch::{AdapterRef, LaunchSpec, Resolved, Resolver};
use moat_sandbox::Sandbox;

use crate::args::AcpArgs;
use crate::names::FlagNames;
use crate::{Globals, UsageError, wiring};

/// How long running turns get to end with their `done` when moat acp is
/// stopped by a signal.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

pub async fn acp(globals: &Globals, sandbox: Sandbox, args: AcpArgs) -> anyhow::Result<ExitCode> {
    let request = args.run.request().map_err(wiring::request_error)?;
    // The editor names each session's directory.
    for field in [Field::Cwd, Field::Workspace] {
        if args.run.has(field) {
            return Err(UsageError(format!(
                "moat acp works in each session's directory, as the editor gives it: leave out {}",
                Dialect::Flags.name_of(field)
            ))
            .into());
        }
    }
    let resolver = Resolver::new(sandbox.clone());
    let (book, resolved) = tokio::join!(
        wiring::book(globals, "moat acp", false),
        resolver.resolve(&args.adapter)
    );
    let resolved = resolved.map_err(wiring::resolve_error)?;
    let launcher = wiring::launcher(globals, &sandbox, book?);
    let name = resolved.name().to_owned();
    let turns = FlagTurns {
        granted_dirs: granted_dirs(&request),
        request,
        resolved,
    };
    let agent = Arc::new(AcpAgent::new(launcher, Arc::new(turns), name));
    let stdin = moat_serve::stdin_stream()?;
    tokio::select! {
        () = moat_acp::serve(agent.clone(), BufReader::new(stdin), tokio::io::stdout()) => {}
        () = stop_signal() => {
            tracing::info!("stopping: running prompts end with their done");
            agent.cancel_all().await;
            let _ = tokio::time::timeout(STOP_PATIENCE, agent.idle()).await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The first SIGINT, SIGTERM or SIGHUP (the editor stopping its agent).
async fn stop_signal() {
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::warn!("cannot listen for signals; close stdin to stop moat acp");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {},
        _ = terminate.recv() => {},
        _ = hangup.recv() => {},
    }
}

/// The directories the flags grant by name, as they are on disk.
fn granted_dirs(request: &RunRequest) -> Vec<PathBuf> {
    let grants = request.grants.all();
    grants
        .read
        .iter()
        .chain(&grants.write)
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .collect()
}

/// Each turn a run of the resolved adapter with the command's flags.
struct FlagTurns {
    request: RunRequest,
    resolved: Resolved,
    granted_dirs: Vec<PathBuf>,
}

impl TurnSpecs for FlagTurns {
    /// A session works in a granted directory, or in one the trust level's
    /// presets grant (they grant the session's directory itself); with no
    /// directory granted at all, the runs touch no files and any directory
    /// will do.
    fn check_cwd(&self, cwd: &Path) -> Result<(), String> {
        if self
            .request
            .trust
            .is_some_and(|trust| trust != TrustLevel::Sandbox)
            || self.granted_dirs.is_empty()
        {
            return Ok(());
        }
        let cwd = std::fs::canonicalize(cwd).map_err(|e| format!("{}: {e}", cwd.display()))?;
        if self.granted_dirs.iter().any(|dir| cwd.starts_with(dir)) {
            return Ok(());
        }
        let granted: Vec<String> = self
            .granted_dirs
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        Err(format!(
            "{} is outside the directories moat acp was granted ({}): open a project inside them, or start moat acp with --allow-write={}",
            cwd.display(),
            granted.join(", "),
            cwd.display()
        ))
    }

    fn spec(&self, turn: Turn) -> Result<LaunchSpec, String> {
        let mut request = self.request.clone();
        request.options.cwd = Some(turn.cwd.to_string_lossy().into_owned());
        request.prompt = Some(turn.prompt);
        let options = &mut request.options;
        options.resume = turn.resume.or(options.resume.take());
        if let Some(servers) = turn.mcp_servers {
            // The editor's servers beside the flags' (`--mcp-config`).
            let mut all = options
                .mcp_servers
                .take()
                .unwrap_or_else(|| serde_json::json!({}));
            if let (Some(all), serde_json::Value::Object(more)) =
                (all.as_object_mut(), servers.to_value())
            {
                all.extend(more);
            }
            options.mcp_servers = Some(all);
        }
        let ceiling = Arc::new(request.own_ceiling("moat acp"));
        let asked = request
            .asked_by_hand(&ceiling, &self.resolved, false)
            .map_err(|refusal| format!("BOUNDARY_VIOLATION: {}", refusal.message(&FlagNames)))?;
        Ok(LaunchSpec {
            abort: turn.abort,
            ..request.launch_spec(
                AdapterRef::Resolved(Box::new(self.resolved.clone())),
                ceiling,
                asked,
                Arc::new(FlagNames),
            )
        })
    }
}
