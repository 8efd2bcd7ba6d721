//! How a running workflow is shown: NDJSON events when piped (one
//! [`WorkflowEvent`] per line), a live view on a terminal — one line per
//! running task with a spinner and its elapsed time, a line per task that
//! ends, and the workflow's summary.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use moat_workflow::{WorkflowEvent, WorkflowStatus};

use crate::render::safe;

/// Shows a workflow's events.
pub trait View: Send {
    /// One event.
    fn event(&mut self, event: &WorkflowEvent);
}

/// One JSON object per line, flushed per line: a reader sees each event
/// when it happens.
pub struct Ndjson;

impl View for Ndjson {
    fn event(&mut self, event: &WorkflowEvent) {
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (`| head`) must not stop the workflow.
        let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
    }
}

/// The live view.
pub struct Live {
    /// Off a terminal (`--output pretty` piped) there are no spinners: the
    /// lines are printed as they come.
    tty: bool,
    bars: MultiProgress,
    running: HashMap<String, ProgressBar>,
    style: ProgressStyle,
}

impl Live {
    /// A live view on stdout.
    pub fn new() -> Self {
        Self {
            tty: std::io::stdout().is_terminal(),
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::stdout()),
            running: HashMap::new(),
            style: ProgressStyle::with_template("{spinner} {prefix} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        }
    }

    fn line(&self, text: String) {
        if self.tty {
            // Printed with its newline while the spinners are away (a
            // MultiProgress's println pads the line to the terminal's
            // width instead: a copied or recorded view was one long line).
            self.bars.suspend(|| {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", safe::text(&text)).and_then(|()| stdout.flush());
            });
        } else {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", safe::text(&text)).and_then(|()| stdout.flush());
        }
    }

    fn end(&mut self, task: &str) {
        if let Some(bar) = self.running.remove(task) {
            bar.finish_and_clear();
            self.bars.remove(&bar);
        }
    }
}

impl View for Live {
    fn event(&mut self, event: &WorkflowEvent) {
        match event {
            WorkflowEvent::WorkflowStarted {
                workflow,
                tasks,
                skipped,
                run,
            } => {
                let mut text = format!("workflow {workflow}: {tasks} tasks");
                if !skipped.is_empty() {
                    text.push_str(&format!(
                        ", {} already done ({})",
                        skipped.len(),
                        skipped.join(", ")
                    ));
                }
                if let Some(run) = run {
                    text.push_str(&format!(" — run {run}"));
                }
                self.line(text);
            }
            WorkflowEvent::TaskStarted {
                task,
                attempt,
                iteration,
            } => {
                self.end(task);
                if !self.tty {
                    self.line(format!("▸ {task} started"));
                    return;
                }
                let bar = self.bars.add(ProgressBar::new_spinner());
                bar.set_style(self.style.clone());
                bar.set_prefix(safe::text(task).into_owned());
                let mut what = Vec::new();
                if *iteration > 1 {
                    what.push(format!("iteration {iteration}"));
                }
                if *attempt > 1 {
                    what.push(format!("attempt {attempt}"));
                }
                bar.set_message(what.join(", "));
                bar.enable_steady_tick(Duration::from_millis(100));
                self.running.insert(task.clone(), bar);
            }
            WorkflowEvent::TaskReattached { task, run, .. } => {
                // Its spinner (from `task_started`) goes on: the run does.
                if let Some(bar) = self.running.get(task) {
                    bar.set_message("re-attached");
                }
                self.line(format!(
                    "↺ {task}: re-attached to its run {run}, started before the resume"
                ));
            }
            WorkflowEvent::TaskWaiting {
                task,
                run,
                request,
                reason,
            } => {
                self.line(format!(
                    "? {task} waits: {reason} (moat approve {run} {request}, or moat deny)"
                ));
            }
            WorkflowEvent::TaskRetrying {
                task,
                attempt,
                reason,
                backoff_ms,
            } => {
                self.end(task);
                self.line(format!(
                    "↻ {task}: attempt {attempt} failed ({reason}); again in {}",
                    humantime::format_duration(Duration::from_millis(*backoff_ms))
                ));
            }
            WorkflowEvent::LoopIteration { task, iteration } => {
                self.end(task);
                self.line(format!("↻ {task}: iteration {iteration} done"));
            }
            WorkflowEvent::LoopExit {
                task,
                iterations,
                reason,
            } => self.line(format!(
                "  {task}: loop ended after {iterations} ({reason})"
            )),
            WorkflowEvent::ContextTruncated {
                task,
                piece,
                shown,
                total,
            } => self.line(format!(
                "  {task}: context cut: {piece}, {shown} of {total} bytes"
            )),
            WorkflowEvent::HookFailed {
                task,
                hook,
                command,
                reason,
            } => self.line(format!("  {task}: {hook} hook {command} failed: {reason}")),
            WorkflowEvent::TaskCompleted {
                task,
                duration_ms,
                usage,
                ..
            } => {
                self.end(task);
                let mut text = format!("✓ {task} ({})", seconds(*duration_ms));
                if let Some(tokens) = usage.tokens {
                    let (input, output) = (tokens.input.total, tokens.output.total);
                    text.push_str(&format!(", {input}→{output} tokens"));
                }
                if let Some(cost) = usage.cost {
                    text.push_str(&format!(", ${:.4}", cost.usd));
                }
                self.line(text);
            }
            WorkflowEvent::TaskFailed { task, reason } => {
                self.end(task);
                self.line(format!("✗ {task}: {reason}"));
            }
            WorkflowEvent::TaskBlocked { task, by } => {
                self.line(format!("– {task}: not run, {by} failed"))
            }
            WorkflowEvent::TaskInterrupted { task } => {
                self.end(task);
                self.line(format!("■ {task}: interrupted"));
            }
            WorkflowEvent::WorkflowDone {
                status,
                completed,
                failed,
                pending,
                duration_ms,
                reason,
            } => {
                let tasks: Vec<String> = self.running.keys().cloned().collect();
                for task in tasks {
                    self.end(&task);
                }
                let word = match status {
                    WorkflowStatus::Completed => "completed",
                    WorkflowStatus::Failed => "failed",
                    WorkflowStatus::Cancelled => "cancelled",
                    WorkflowStatus::Running => "stopped",
                };
                let mut text = format!(
                    "workflow {word} in {}: {completed} completed, {failed} failed, {pending} not run",
                    seconds(*duration_ms)
                );
                if let Some(reason) = reason
                    .as_ref()
                    .filter(|_| *status != WorkflowStatus::Completed)
                {
                    text.push_str(&format!(" ({reason})"));
                }
                self.line(text);
            }
        }
    }
}

/// Milliseconds as people read them: `1.2s`, `3m 4s`.
pub fn seconds(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
    }
}
