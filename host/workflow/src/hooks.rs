//! Hooks: code that runs at fixed points of a task's life — before it,
//! after each successful attempt, when it has failed for good, when its
//! loop ends. The engine knows only this registry: commands from the file
//! ([`CommandHook`]) and callbacks from the Rust API (any [`Hook`]) are
//! registered the same way and run in registration order. Overlays such as
//! review gates are hooks; the engine knows none of them.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::model::{Command, CommandSandbox, HookCommand};

// Part of a workflow's definition, defined with the rest of it in `model`
// (which imports nothing of this module); named here too, where it always
// was, beside the hooks that run at it.
pub use crate::model::HookPoint;

/// What a hook is told (as JSON on a command's stdin).
#[derive(Debug, Clone, Serialize)]
pub struct HookEvent {
    /// The point.
    pub hook: HookPoint,
    /// The workflow's name.
    pub workflow: String,
    /// The task's id.
    pub task: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The loop's iteration, from 1.
    pub iteration: u32,
    /// The run of the attempt, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The attempt's final answer (post-task, on-loop-exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The attempt's handover (post-task, on-loop-exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover: Option<serde_json::Value>,
    /// Why the task failed (on-failure) or its loop ended (on-loop-exit:
    /// `condition` or `max_iterations`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A hook: succeeds, or says why not.
#[async_trait::async_trait]
pub trait Hook: Send + Sync {
    /// Runs it for `event`; `Err` carries the reason shown to the user.
    async fn call(&self, event: &HookEvent) -> Result<(), String>;

    /// How it is named in events and messages.
    fn describe(&self) -> String;
}

/// One registered hook.
struct Registered {
    point: HookPoint,
    /// A task id, or `*`.
    task: String,
    hook: Arc<dyn Hook>,
}

/// The hooks of a workflow, in registration order.
#[derive(Default)]
pub struct Hooks {
    registered: Vec<Registered>,
}

/// A hook that failed.
#[derive(Debug, Clone)]
pub struct HookFailure {
    /// Which hook ([`Hook::describe`]).
    pub hook: String,
    /// Why.
    pub reason: String,
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file's hook commands, run in `project`.
    pub fn from_commands(commands: &[HookCommand], project: PathBuf) -> Self {
        let mut hooks = Self::new();
        for command in commands {
            hooks.register(
                command.point,
                &command.task,
                Arc::new(CommandHook {
                    command: command.command.clone(),
                    timeout: command.timeout,
                    project: project.clone(),
                    sandbox: command.sandbox.clone(),
                }),
            );
        }
        hooks
    }

    /// Adds `hook` at `point` for the task `task` (`*`: every task), after
    /// the hooks registered before it.
    pub fn register(&mut self, point: HookPoint, task: &str, hook: Arc<dyn Hook>) {
        self.registered.push(Registered {
            point,
            task: task.to_owned(),
            hook,
        });
    }

    /// Runs the hooks for `event` in order, stopping at the first that
    /// fails.
    pub async fn run(&self, event: &HookEvent) -> Result<(), HookFailure> {
        for registered in self.matching(event) {
            registered
                .hook
                .call(event)
                .await
                .map_err(|reason| HookFailure {
                    hook: registered.hook.describe(),
                    reason,
                })?;
        }
        Ok(())
    }

    /// Runs every hook for `event`, whatever the others do: what happens
    /// after a failure or a loop's end cannot be undone by a hook. Returns
    /// the failures.
    pub async fn run_all(&self, event: &HookEvent) -> Vec<HookFailure> {
        let mut failures = Vec::new();
        for registered in self.matching(event) {
            if let Err(reason) = registered.hook.call(event).await {
                failures.push(HookFailure {
                    hook: registered.hook.describe(),
                    reason,
                });
            }
        }
        failures
    }

    fn matching<'a>(&'a self, event: &'a HookEvent) -> impl Iterator<Item = &'a Registered> {
        self.registered
            .iter()
            .filter(move |r| r.point == event.hook && (r.task == "*" || r.task == event.task))
    }
}

/// How much of a command's stderr a failure reason keeps.
const MAX_REASON: usize = 4096;

/// How long the rest of a command's stderr is awaited once it has ended.
const STDERR_GRACE: Duration = Duration::from_secs(1);

/// A command's process group, killed when dropped.
struct ProcessGroup(u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Ok(group) = libc::pid_t::try_from(self.0) {
            // SAFETY: killpg only sends a signal; a group that is gone
            // already makes it fail with ESRCH, which is ignored.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

/// A command from the workflow file, run in the project directory with
/// the event as JSON on its stdin and `MOAT_HOOK`, `MOAT_WORKFLOW`,
/// `MOAT_TASK`, `MOAT_ATTEMPT`, `MOAT_ITERATION` in its environment;
/// contained unless the file says `unsandboxed = true`: its script may be
/// one an agent wrote.
pub struct CommandHook {
    /// What runs.
    pub command: Command,
    /// The most it may take; it is killed after.
    pub timeout: Duration,
    /// Where it runs.
    pub project: PathBuf,
    /// What it may reach.
    pub sandbox: CommandSandbox,
}

#[async_trait::async_trait]
impl Hook for CommandHook {
    async fn call(&self, event: &HookEvent) -> Result<(), String> {
        let stdin = serde_json::to_vec(event).map_err(|e| e.to_string())?;
        run_command(
            &self.command,
            &self.sandbox,
            &self.project,
            event.hook.as_str(),
            event,
            &stdin,
            self.timeout,
        )
        .await
    }

    fn describe(&self) -> String {
        format!("`{}`", self.command)
    }
}

/// Runs `command` as a hook or a loop's check (`MOAT_HOOK` is `label`),
/// as `sandbox` says: `Ok` when it exits 0, else its stderr (or its
/// status) as the reason.
pub async fn run_command(
    command: &Command,
    sandbox: &CommandSandbox,
    project: &std::path::Path,
    label: &str,
    event: &HookEvent,
    stdin: &[u8],
    timeout: Duration,
) -> Result<(), String> {
    let call = Call {
        command,
        project,
        label,
        event,
        stdin,
        timeout,
    };
    match sandbox {
        CommandSandbox::Contained(grants) => run_contained(&call, grants).await,
        CommandSandbox::Unsandboxed => run_unsandboxed(&call).await,
    }
}

/// One run of a hook or check command.
struct Call<'a> {
    command: &'a Command,
    project: &'a std::path::Path,
    /// `MOAT_HOOK`.
    label: &'a str,
    event: &'a HookEvent,
    stdin: &'a [u8],
    timeout: Duration,
}

impl Call<'_> {
    /// The variables the command is told about its event.
    fn vars(&self) -> Vec<(String, String)> {
        let event = self.event;
        vec![
            ("MOAT_HOOK".into(), self.label.into()),
            ("MOAT_WORKFLOW".into(), event.workflow.clone()),
            ("MOAT_TASK".into(), event.task.clone()),
            ("MOAT_ATTEMPT".into(), event.attempt.to_string()),
            ("MOAT_ITERATION".into(), event.iteration.to_string()),
        ]
    }
}

/// Runs `call`'s command contained: the project readable, what `grants`
/// add, its own program, the event's variables.
async fn run_contained(call: &Call<'_>, grants: &moat_grants::Grants) -> Result<(), String> {
    let (command, timeout) = (call.command, call.timeout);
    let mut argv = command.argv();
    let project = std::fs::canonicalize(call.project)
        .map_err(|e| format!("cannot read {}: {e}", call.project.display()))?;
    // A program named by a relative path is the project's (`./check.sh`).
    if argv[0].contains('/') && !argv[0].starts_with('/') {
        argv[0] = project.join(&argv[0]).to_string_lossy().into_owned();
    }
    let mut grants = grants.clone();
    grants.read.push(project.clone());
    grants.run.push(argv[0].clone());
    // The granted variables' values: the host's, then the event's.
    let mut env: Vec<(String, String)> = grants
        .env
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
        .collect();
    let vars = call.vars();
    env.retain(|(name, _)| !vars.iter().any(|(var, _)| var == name));
    grants.env.extend(vars.iter().map(|(name, _)| name.clone()));
    env.extend(vars);
    let program = moat_contain::Program {
        argv,
        cwd: project.to_string_lossy().into_owned(),
        env,
        stdin: call.stdin.to_vec(),
        timeout,
    };
    // What it may write of the files that run code later is put back
    // after it, and a hook that changed any fails saying so.
    let guard =
        moat_launch::protected::Guard::keep_for_program(&grants, Arc::new(moat_engine::FieldNames));
    let ended = moat_contain::run_contained(call.label, &grants, program).await;
    if let Some(said) = guard
        .as_ref()
        .and_then(moat_launch::protected::Guard::put_back)
    {
        return Err(shortened(format!("`{command}`: {said}")));
    }
    let ended = ended.map_err(|error| match error {
        moat_contain::process::ProcessError::TimedOut => format!(
            "`{command}` took longer than {}; it was stopped",
            humantime::format_duration(timeout)
        ),
        other => format!("`{command}`: {other}"),
    })?;
    if ended.status.success() {
        return Ok(());
    }
    let mut reason = ended.stderr.trim().to_owned();
    if reason.is_empty() {
        reason = format!("`{command}` failed ({})", describe(&ended.status));
    }
    if !ended.refused.is_empty() {
        reason.push_str(&format!(" (refused: {})", ended.refused.join("; ")));
    }
    Err(shortened(reason))
}

/// An exit status as a user reads it.
fn describe(status: &moat_contain::process::ExitStatus) -> String {
    match (status.code, status.signal) {
        (Some(code), _) => format!("exit status: {code}"),
        (None, Some(signal)) => format!("signal: {signal}"),
        (None, None) => "no status".into(),
    }
}

/// `reason` cut to [`MAX_REASON`] bytes.
fn shortened(mut reason: String) -> String {
    if reason.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        reason.push('…');
    }
    reason
}

/// Runs `call`'s command with the user's full rights (`unsandboxed =
/// true`).
async fn run_unsandboxed(call: &Call<'_>) -> Result<(), String> {
    let Call {
        command,
        project,
        stdin,
        timeout,
        ..
    } = *call;
    let argv = command.argv();
    let mut child = tokio::process::Command::new(&argv[0]);
    child
        .args(&argv[1..])
        .current_dir(project)
        .envs(call.vars())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // A group of its own: whatever the command starts dies with it.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = child
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    // Kills the whole group when the command ends, times out, or the
    // attempt is dropped (a cancel): no process a hook started outlives it.
    let group = child.id().map(ProcessGroup);
    let input = child.stdin.take();
    let stdin = stdin.to_vec();
    let feed = async move {
        if let Some(mut input) = input {
            // A command that does not read its stdin closes it early: that
            // is not its failure.
            let _ = input.write_all(&stdin).await;
        }
    };
    // Read beside the wait, so a chatty command never blocks on a full
    // pipe; the start is kept, the rest drained.
    let mut stderr = child.stderr.take();
    let collect = tokio::spawn(async move {
        let mut text = Vec::new();
        let mut chunk = [0u8; 4096];
        if let Some(stderr) = stderr.as_mut() {
            while let Ok(read @ 1..) = stderr.read(&mut chunk).await {
                let room = (MAX_REASON * 2).saturating_sub(text.len());
                text.extend_from_slice(&chunk[..read.min(room)]);
            }
        }
        text
    });
    let waited = tokio::time::timeout(timeout, async {
        let ((), status) = tokio::join!(feed, child.wait());
        status
    })
    .await;
    let Ok(status) = waited else {
        collect.abort();
        return Err(format!(
            "`{command}` took longer than {}; it was stopped",
            humantime::format_duration(timeout)
        ));
    };
    // The command has ended; what it left running holds the pipe open
    // until its group is killed.
    drop(group);
    let text = tokio::time::timeout(STDERR_GRACE, collect)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let status = status.map_err(|e| format!("`{command}`: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    let reason = if text.is_empty() {
        format!("`{command}` failed ({status})")
    } else {
        text.to_owned()
    };
    Err(shortened(reason))
}
