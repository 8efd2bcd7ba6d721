//! The recorded runs: `moat ps`, `show`, `logs`, `cancel`, `prune`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use moat_engine::ResultFold;
use moat_store::{RunFilter, RunId, RunRecord, RunStatus, Store};

use crate::args::{CancelArgs, ListFormat, LogsArgs, PruneArgs, PsArgs, ShowArgs, WaitArgs};
use crate::render::{self, safe};
use crate::{UsageError, resolve};

/// How often `wait` and `logs --follow` look at the store again.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// How many stored events `moat logs` reads at a time.
const LOGS_PAGE: usize = 4096;

/// Longest prompt excerpt in a `ps` row.
const PROMPT_EXCERPT: usize = 40;

pub fn ps(store: Option<&Path>, args: PsArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    let statuses = listed_statuses(&args);
    let runs = store.list(&RunFilter {
        statuses,
        limit: args.last,
    })?;
    print_runs(&runs, args.output)
}

/// The statuses `ps` lists when asked for `args`: the flag's, every one
/// with `--all` (empty), else the live ones.
pub fn listed_statuses(args: &PsArgs) -> Vec<RunStatus> {
    if !args.status.is_empty() {
        args.status.clone()
    } else if args.all {
        Vec::new()
    } else {
        vec![RunStatus::Pending, RunStatus::Running]
    }
}

/// `moat ps`'s table (or JSON) of `runs`.
pub fn print_runs(runs: &[RunRecord], output: ListFormat) -> anyhow::Result<ExitCode> {
    if output == ListFormat::Json {
        let records: Vec<Value> = runs.iter().map(record_json).collect();
        println!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(ExitCode::SUCCESS);
    }
    let now = moat_engine::now_ms();
    println!(
        "{:<28}  {:<12}  {:<10}  {:>8}  {:>8}  {:>9}  PROMPT",
        "ID", "ADAPTER", "STATUS", "AGE", "TOOK", "TOKENS"
    );
    for run in runs {
        let age = ago(now.saturating_sub(run.created_ms));
        let took = run
            .started_ms
            .map(|start| ago(run.ended_ms.unwrap_or(now).saturating_sub(start)))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<28}  {:<12}  {:<10}  {:>8}  {:>8}  {:>9}  {}",
            run.id,
            safe::text(&run.run.adapter),
            run.status,
            age,
            took,
            tokens(run).map_or_else(|| "-".into(), |t| t.to_string()),
            first_line(&run.run.prompt),
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(store: Option<&Path>, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    let id = store
        .resolve(&args.run)
        .map_err(|e| UsageError(e.to_string()))?;
    let run = store.get(&id)?.context("the run went while it was read")?;
    let events = match run.status {
        RunStatus::Completed | RunStatus::Failed => Some(store.events(&id, 0)?),
        RunStatus::Pending | RunStatus::Running => None,
    };
    print_show(&run, events, args.json, None)
}

/// `moat show`'s view of `run`; `events` are an ended run's (its result is
/// folded from them as `moat run --output json` folds them live);
/// `worker` is the cluster worker that ran it.
pub fn print_show(
    run: &RunRecord,
    events: Option<Vec<(u64, moat_engine::AgentEvent)>>,
    json: bool,
    worker: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let mut value = record_json(run);
    let result = events.map(|events| {
        let mut fold = ResultFold::new();
        for (_, event) in &events {
            fold.observe(event, &mut ());
        }
        fold.finish()
    });
    value["result"] = serde_json::to_value(&result)?;
    if let Some(worker) = worker {
        value["worker"] = json!(worker);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("id           {}", run.id);
    if let Some(parent) = &run.run.parent {
        println!("parent       {parent}");
    }
    println!(
        "adapter      {} (sha256 {})",
        safe::text(&run.run.adapter),
        run.run.component_sha256
    );
    match &run.reason {
        Some(reason) => println!("status       {} ({reason})", run.status),
        None => println!("status       {}", run.status),
    }
    match worker {
        Some(worker) => println!("worker       {}", safe::text(worker)),
        None => println!("owner pid    {}", run.owner_pid),
    }
    println!("created      {}", time(run.created_ms));
    if let Some(started) = run.started_ms {
        println!("started      {}", time(started));
    }
    if let Some(ended) = run.ended_ms {
        println!("ended        {}", time(ended));
    }
    match run.run.timeout_ms {
        Some(ms) => println!("timeout      {}", ago(ms)),
        None => println!("timeout      none"),
    }
    println!("prompt       {}", safe::text(&run.run.prompt));
    if let Some(done) = &run.done {
        println!("done         {}", safe::text(&done.to_string()));
    }
    if let Some(text) = result.as_ref().and_then(|r| r.text.as_deref()) {
        println!("answer       {}", safe::text(text));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn logs(store: Option<&Path>, args: LogsArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    let id = store
        .resolve(&args.run)
        .map_err(|e| UsageError(e.to_string()))?;
    let mut renderer = render::for_format(render::default_format(args.output));
    let mut success = None;
    let mut next = 0;
    loop {
        // A page at a time, so a long run's replay holds one page.
        let page = store.event_lines(&id, next, LOGS_PAGE)?;
        let more = !page.is_empty();
        for line in page {
            next = line.seq + 1;
            // Parsed only when needed: NDJSON prints the stored line as it
            // is; the `done` is read for the exit status.
            let passed = renderer
                .stored(line.json.as_bytes())
                .context("cannot write the output")?;
            if passed && !line.done {
                continue;
            }
            let event = match serde_json::from_str::<moat_engine::AgentEvent>(&line.json) {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(run = %id, seq = line.seq, "a stored event does not parse: {error}");
                    continue;
                }
            };
            if let Some(done) = event.as_done() {
                success = Some(done.status == moat_engine::DoneStatus::Success);
            }
            if !passed {
                renderer.event(&event).context("cannot write the output")?;
            }
        }
        if more {
            continue;
        }
        if !args.follow || success.is_some() || ended_without_more(&store, &id, next)? {
            break;
        }
        renderer.flush().context("cannot write the output")?;
        std::thread::sleep(POLL);
    }
    renderer.finish().context("cannot write the output")?;
    // As `moat run` would have exited; a run still going is not a failure.
    Ok(match success {
        Some(false) => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// Whether the run ended and every event it will ever have is read (from
/// `next` on there are none).
fn ended_without_more(store: &Store, id: &RunId, next: u64) -> anyhow::Result<bool> {
    let ended = store.get(id)?.is_none_or(|run| run.status.is_terminal());
    Ok(ended && store.event_lines(id, next, 1)?.is_empty())
}

pub fn wait(store: Option<&Path>, args: WaitArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    let ids = args
        .runs
        .iter()
        .map(|run| store.resolve(run).map_err(|e| UsageError(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut all_completed = true;
    for id in ids {
        let run = loop {
            match store.get(&id)? {
                Some(run) if run.status.is_terminal() => break run,
                Some(_) => std::thread::sleep(POLL),
                None => return Err(UsageError(format!("run {id} was pruned while waiting")).into()),
            }
        };
        all_completed &= run.status == RunStatus::Completed;
    }
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub fn cancel(store: Option<&Path>, args: CancelArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    for run in &args.runs {
        // Idempotent: a run that is unknown has nothing left to stop.
        match store.resolve(run) {
            Ok(id) => store.request_cancel(&id)?,
            Err(moat_store::StoreError::NotFound(_)) => {}
            Err(error) => return Err(UsageError(error.to_string()).into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn prune(store: Option<&Path>, args: PruneArgs) -> anyhow::Result<ExitCode> {
    let store = resolve::store(store)?;
    let removed = store.prune(args.older_than)?;
    println!("removed {removed} runs");
    Ok(ExitCode::SUCCESS)
}

/// A record as JSON, for `ps --output json`, `show --json` and `moat serve`.
pub fn record_json(run: &RunRecord) -> Value {
    json!({
        "id": run.id.as_str(),
        "parent": run.run.parent.as_ref().map(|p| p.as_str().to_owned()),
        "adapter": run.run.adapter,
        "componentSha256": run.run.component_sha256,
        "status": run.status.as_str(),
        "reason": run.reason.as_ref().map(|r| r.as_str().to_owned()),
        "prompt": run.run.prompt,
        "options": run.run.options,
        "grants": run.run.grants,
        "limits": run.run.limits,
        "timeoutMs": run.run.timeout_ms,
        "ownerPid": run.owner_pid,
        "createdMs": run.created_ms,
        "startedMs": run.started_ms,
        "endedMs": run.ended_ms,
        "done": run.done,
    })
}

/// Input and output tokens of the run's `done`, when it reported them.
fn tokens(run: &RunRecord) -> Option<u64> {
    let tokens = run.done.as_ref()?.get("usage")?.get("tokens")?;
    let count = |side: &str| tokens.get(side)?.get("total")?.as_u64();
    Some(count("input").unwrap_or(0) + count("output").unwrap_or(0))
}

fn first_line(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or_default();
    let cut = line.floor_char_boundary(PROMPT_EXCERPT);
    let excerpt = if cut < line.len() {
        format!("{}…", &line[..cut])
    } else {
        line.to_owned()
    };
    safe::text(&excerpt).into_owned()
}

/// A duration in milliseconds, rounded for a column: `850ms`, `12s`, `3m`.
fn ago(ms: u64) -> String {
    let rounded = if ms < 1000 {
        std::time::Duration::from_millis(ms)
    } else {
        std::time::Duration::from_secs(ms / 1000)
    };
    humantime::format_duration(rounded).to_string()
}

fn time(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}
