//! `moat approve` and `moat deny`: answering a run's requests from any
//! process on the machine (or the cluster's, with `--nats`), and how
//! `moat show` lists them.

use std::process::ExitCode;

use moat_runs::{Answer, Approval, Runs};

use crate::args::{ApproveArgs, DenyArgs};
use crate::render::safe;
use crate::{Globals, wiring};

pub async fn approve(globals: &Globals, args: &ApproveArgs) -> anyhow::Result<ExitCode> {
    let answer = Answer::approve(answerer("moat approve"), args.always);
    answer_request(globals, "moat approve", &args.run, args.request, answer).await
}

pub async fn deny(globals: &Globals, args: &DenyArgs) -> anyhow::Result<ExitCode> {
    let answer = Answer::deny(answerer("moat deny"), args.reason.clone());
    answer_request(globals, "moat deny", &args.run, args.request, answer).await
}

async fn answer_request(
    globals: &Globals,
    command: &str,
    run: &str,
    request: Option<u32>,
    answer: Answer,
) -> anyhow::Result<ExitCode> {
    let runs = wiring::runs(globals, command).await?;
    let id = runs.find(run).await.map_err(wiring::runs_error)?;
    let answered = runs
        .answer(&id, request, answer)
        .await
        .map_err(wiring::runs_error)?;
    let decision = answered.answer.as_ref().map_or("", Answer::decision);
    println!(
        "{id}  request {}: {} {decision}",
        answered.number,
        safe::text(&answered.request.what.to_string())
    );
    Ok(ExitCode::SUCCESS)
}

/// Who answers, as the run's record keeps it: the command, this process
/// and its user.
fn answerer(command: &str) -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("{command} (pid {}, {user})", std::process::id()),
        _ => format!("{command} (pid {})", std::process::id()),
    }
}

/// The run's requests, one line each, as `moat show` prints them.
pub(super) fn print_requests(approvals: &[Approval]) {
    for (index, approval) in approvals.iter().enumerate() {
        let label = if index == 0 { "requests" } else { "" };
        let what = approval.request.what.to_string();
        let what = safe::text(&what);
        let answered = match &approval.answer {
            None => "open: `moat approve` or `moat deny` answers it".to_owned(),
            Some(answer) => {
                let reason = answer
                    .reason
                    .as_deref()
                    .map(|reason| format!(" ({})", safe::text(reason)))
                    .unwrap_or_default();
                format!(
                    "{} by {} at {}{reason}",
                    answer.decision(),
                    safe::text(&answer.by),
                    crate::render::time(answer.at_ms)
                )
            }
        };
        println!(
            "{label:<12} {}. {what}, asked {}: {answered}",
            approval.number,
            crate::render::time(approval.asked_ms)
        );
    }
}

/// The run's requests, for `moat show --json`.
pub(super) fn requests_json(approvals: &[Approval]) -> serde_json::Value {
    serde_json::Value::Array(approvals.iter().map(Approval::to_json).collect())
}

/// The run's requests as `runs` keep them; none where they cannot be
/// read (the record is shown all the same).
pub(super) async fn requests_of(runs: &dyn Runs, id: &moat_runs::RunId) -> Vec<Approval> {
    runs.approvals(id).await.unwrap_or_else(|error| {
        tracing::warn!("the run's requests could not be read: {error}");
        Vec::new()
    })
}
