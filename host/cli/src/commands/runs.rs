//! The recorded runs: `moat ps`, `show`, `logs`, `wait`, `cancel` and
//! `prune`, written once against [`Runs`]: this machine's store, or with
//! `--nats` the cluster's.

use std::process::ExitCode;
use std::time::UNIX_EPOCH;

use anyhow::Context;
use serde_json::Value;

use moat_engine::{DoneStatus, EngineResult, EventPayload};
use moat_runs::{RunFilter, RunId, RunRecord, RunStatus, StoredEvent};

use crate::args::{
    CancelArgs, ListFormat, LogsArgs, OutputFormat, PruneArgs, PsArgs, ShowArgs, WaitArgs,
};
use crate::render::{self, Renderer, safe, time};
use crate::{Globals, UsageError, wiring};

/// How many stored events `moat logs` reads at a time.
const LOGS_PAGE: usize = 4096;

/// Longest prompt excerpt in a `ps` row.
const PROMPT_EXCERPT: usize = 40;

pub async fn ps(globals: &Globals, args: &PsArgs) -> anyhow::Result<ExitCode> {
    let runs = wiring::runs(globals, "moat ps").await?;
    let filter = RunFilter {
        statuses: listed_statuses(args),
        adapter: args.adapter.clone(),
        parent: match &args.parent {
            Some(text) => Some(runs.find(text).await.map_err(wiring::runs_error)?),
            None => None,
        },
        limit: args.last,
    };
    if args.watch {
        return watch(runs.as_ref(), &filter, args.no_trunc).await;
    }
    let listed = runs.list(&filter).await.map_err(wiring::runs_error)?;
    if args.quiet {
        for run in &listed {
            println!("{}", run.id);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.output == ListFormat::Json {
        let records: Vec<Value> = listed.iter().map(RunRecord::to_json).collect();
        println!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", runs_table(&listed, args.no_trunc));
    if listed.is_empty() && only_live_asked(args) {
        // Only the live ones are listed by default: a user who ran
        // something a moment ago sees a bare header otherwise.
        let all = RunFilter {
            statuses: Vec::new(),
            limit: Some(1),
            ..filter
        };
        if let Some(newest) = runs.list(&all).await.map_err(wiring::runs_error)?.first() {
            eprintln!(
                "no live runs; the newest is {} ({}, {}, {} ago): `moat ps --all` lists ended ones",
                newest.id,
                safe::text(&newest.run.adapter),
                outcome(newest),
                ago(moat_engine::now_ms().saturating_sub(newest.created_ms))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `ps` lists only live runs because nothing else was asked for.
fn only_live_asked(args: &PsArgs) -> bool {
    args.status.is_empty() && !args.all && args.parent.is_none()
}

/// How often `ps --watch` looks again.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// `ps --watch`: the table, kept up to date until Ctrl-C.
async fn watch(
    runs: &dyn moat_runs::Runs,
    filter: &RunFilter,
    full_ids: bool,
) -> anyhow::Result<ExitCode> {
    use std::io::{IsTerminal, Write};
    let terminal = std::io::stdout().is_terminal();
    // What a change is: a run came, went, or changed its outcome (the
    // ages in the table tick every second).
    let mut shown: Option<Vec<(RunId, String)>> = None;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let listed = runs.list(filter).await.map_err(wiring::runs_error)?;
        let now: Vec<(RunId, String)> = listed.iter().map(|r| (r.id.clone(), outcome(r))).collect();
        if terminal || shown.as_ref() != Some(&now) {
            let mut out = std::io::stdout().lock();
            if terminal {
                // Home, then clear: the table replaces the last one.
                out.write_all(b"\x1b[H\x1b[2J")?;
            } else if shown.is_some() {
                out.write_all(b"\n")?;
            }
            out.write_all(runs_table(&listed, full_ids).as_bytes())?;
            out.flush()?;
            shown = Some(now);
        }
        tokio::select! {
            () = tokio::time::sleep(WATCH_EVERY) => {}
            _ = &mut ctrl_c => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The statuses `ps` lists when asked for `args`: the flag's, every one
/// with `--all` or `--parent` (empty), else the live ones.
fn listed_statuses(args: &PsArgs) -> Vec<RunStatus> {
    if !args.status.is_empty() {
        args.status.clone()
    } else if args.all || args.parent.is_some() {
        Vec::new()
    } else {
        RunStatus::LIVE.to_vec()
    }
}

/// `moat ps`'s table of `runs`: each id as short as it can be and stay
/// unique among them, or whole with `full_ids`.
pub fn runs_table(runs: &[RunRecord], full_ids: bool) -> String {
    use std::fmt::Write;
    let now = moat_engine::now_ms();
    // As wide as the longest status with its reason ("failed (cancelled)").
    let status_width = runs
        .iter()
        .map(|run| outcome(run).len())
        .chain(["STATUS".len(), 10])
        .max()
        .unwrap_or(10);
    let ids: Vec<&RunId> = runs.iter().map(|run| &run.id).collect();
    let ids = match full_ids {
        true => ids.iter().map(|id| id.as_str()).collect(),
        false => moat_runs::short_ids(&ids),
    };
    let id_width = ids.iter().map(|id| id.len()).max().unwrap_or(0).max(2);
    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:<id_width$}  {:<12}  {:<status_width$}  {:>8}  {:>8}  {:>9}  PROMPT",
        "ID", "ADAPTER", "STATUS", "AGE", "TOOK", "TOKENS"
    );
    for (run, id) in runs.iter().zip(ids) {
        let age = ago(now.saturating_sub(run.created_ms));
        let took = run
            .started_ms
            .map(|start| ago(run.ended_ms.unwrap_or(now).saturating_sub(start)))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            table,
            "{:<id_width$}  {:<12}  {:<status_width$}  {:>8}  {:>8}  {:>9}  {}",
            id,
            safe::text(&run.run.adapter),
            outcome(run),
            age,
            took,
            tokens(run).map_or_else(|| "-".into(), |t| t.to_string()),
            prompt_shown(run),
        );
    }
    table
}

pub async fn show(globals: &Globals, args: &ShowArgs) -> anyhow::Result<ExitCode> {
    let runs = wiring::runs(globals, "moat show").await?;
    let id = runs.find(&args.run).await.map_err(wiring::runs_error)?;
    let run = runs
        .get(&id)
        .await
        .map_err(wiring::runs_error)?
        .context("the run went while it was read")?;
    let result = match run.is_terminal() {
        true => Some(
            moat_runs::result(runs.as_ref(), &id)
                .await
                .map_err(wiring::runs_error)?,
        ),
        false => None,
    };
    // Its workspace, when it had one here.
    let workspace = wiring::workspace_root(globals)
        .ok()
        .and_then(|root| moat_workspace::Workspace::find(&root, id.as_str()).ok());
    let traffic = moat_runs::traffic(runs.as_ref(), &id)
        .await
        .map_err(wiring::runs_error)?;
    if args.net {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&traffic)?);
        } else {
            print!("{}", render::traffic::table(&traffic));
            if let Some(line) = render::traffic::spend_line(&traffic) {
                println!("{line}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let requests = super::approvals::requests_of(runs.as_ref(), &id).await;
    print_show(
        &run,
        result,
        workspace.as_ref(),
        &requests,
        &traffic,
        args.json,
    )
}

/// `moat show`'s view of `run` and, once it ended, its `result`.
fn print_show(
    run: &RunRecord,
    result: Option<EngineResult>,
    workspace: Option<&moat_workspace::Workspace>,
    requests: &[moat_runs::Approval],
    traffic: &moat_runs::RunTraffic,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut value = run.to_json();
    value["result"] = serde_json::to_value(&result)?;
    value["requests"] = super::approvals::requests_json(requests);
    value["usageCounted"] = serde_json::json!({
        "metered": traffic.metered,
        "reported": traffic.reported,
    });
    value["trafficRows"] = traffic.rows.len().into();
    if let Some(workspace) = workspace {
        value["workspace"] = serde_json::to_value(workspace)?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("id           {}", run.id);
    if let Some(workspace) = workspace {
        let on = match (&workspace.branch, workspace.on_cluster) {
            (_, true) => ", sent to the cluster".to_owned(),
            (Some(branch), _) => format!(", branch {branch}"),
            (None, _) => format!(", {} copy", workspace.copied.as_deref().unwrap_or("full")),
        };
        println!(
            "workspace    {} ({} of {} at {}{on})",
            super::workspace::where_it_is(workspace),
            workspace.mode.as_str(),
            workspace.project.display(),
            workspace.base_name
        );
    }
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
    match &run.worker {
        Some(worker) => println!("worker       {}", safe::text(worker)),
        None => println!("owner pid    {}", run.owner_pid),
    }
    if let Some(trust) = run.run.trust {
        println!("trust        {trust}");
    }
    println!("grants       {}", grants_shown(&run.run.grants));
    if let Some(limits) = &run.run.limits {
        println!("limits       {}", limits_shown(limits));
    }
    if let Some(line) = budget_shown(run) {
        println!("budget       {line}");
    }
    println!("created      {}", time(run.created_ms));
    if let Some(started) = run.started_ms {
        println!("started      {}", time(started));
    }
    if let Some(ended) = run.ended_ms {
        println!("ended        {}", time(ended));
    }
    match run.run.timeout_ms() {
        Some(ms) => println!("timeout      {}", ago(ms)),
        None => println!("timeout      none"),
    }
    println!("prompt       {}", safe::text(&run.run.prompt));
    super::approvals::print_requests(requests);
    if let Some(usage) = run.usage() {
        println!("usage        {}", render::usage_summary(&usage));
    }
    if let Some(line) = render::traffic::spend_line(traffic) {
        println!("metered      {line}");
    }
    if !traffic.rows.is_empty() {
        println!(
            "traffic      {} requests and connections (moat show {} --net)",
            traffic.rows.len(),
            run.id
        );
    }
    if let Some(done) = &run.done {
        println!("done         {}", safe::text(&done.to_string()));
    }
    if let Some(text) = result.as_ref().and_then(|r| r.text.as_deref()) {
        println!("answer       {}", safe::text(text));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn logs(globals: &Globals, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    // Times are shown in pretty output: asking for them asks for it.
    let format = match (args.timestamps, args.output) {
        (true, None) => OutputFormat::Pretty,
        (_, asked) => render::default_format(asked),
    };
    if args.timestamps && format != OutputFormat::Pretty {
        return Err(UsageError(
            "-t shows times in pretty output; NDJSON events carry their `timestamp`, \
             and json is one result"
                .into(),
        )
        .into());
    }
    let runs = wiring::runs(globals, "moat logs").await?;
    let id = runs.find(&args.run).await.map_err(wiring::runs_error)?;
    let from = match args.tail {
        Some(tail) => stored_count(runs.as_ref(), &id).await?.saturating_sub(tail),
        None => 0,
    };
    let mut renderer = match args.timestamps {
        true => render::pretty_with_times(),
        // From its first event: printed as `moat run` printed it, the run
        // named on the first line.
        false if from == 0 => render::for_run(format, Some(id.as_str())),
        false => render::for_format(format),
    };
    let since = args.since.map(|time| {
        let ms = time
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        u64::try_from(ms).unwrap_or(u64::MAX)
    });
    let mut shown = Shown {
        id: &id,
        since,
        success: None,
        net: args.net.then_some(format),
    };
    if args.follow {
        // Stored, then live, to its done.
        let mut events = runs.follow(&id, from).await.map_err(wiring::runs_error)?;
        while let Some(event) = render::next_shown(&mut events, renderer.as_mut())
            .await
            .context("cannot write the output")?
        {
            let event = event.map_err(wiring::runs_error)?;
            shown.show(&event, renderer.as_mut())?;
        }
    } else {
        let mut next = from;
        loop {
            // A page at a time, so a long run's replay holds one page.
            let page = runs
                .stored(&id, next, LOGS_PAGE)
                .await
                .map_err(wiring::runs_error)?;
            let Some(last) = page.last() else { break };
            next = last.seq + 1;
            for event in &page {
                shown.show(event, renderer.as_mut())?;
            }
        }
    }
    renderer.finish().context("cannot write the output")?;
    // As `moat run` would have exited; a run still going is not a failure.
    Ok(match shown.success {
        Some(false) => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// How many events run `id` has stored so far.
async fn stored_count(runs: &dyn moat_runs::Runs, id: &RunId) -> anyhow::Result<u64> {
    let mut next = 0;
    loop {
        let page = runs
            .stored(id, next, LOGS_PAGE)
            .await
            .map_err(wiring::runs_error)?;
        match page.last() {
            Some(last) => next = last.seq + 1,
            None => return Ok(next),
        }
    }
}

/// What `moat logs` shows of a run's stored events, and how the run ended.
struct Shown<'a> {
    id: &'a RunId,
    /// Only events stamped at or after this (ms since the epoch).
    since: Option<u64>,
    success: Option<bool>,
    /// Only its traffic, in this format.
    net: Option<OutputFormat>,
}

impl Shown<'_> {
    fn show(&mut self, stored: &StoredEvent, renderer: &mut dyn Renderer) -> anyhow::Result<()> {
        #[derive(serde::Deserialize)]
        struct Stamp {
            timestamp: u64,
        }
        if let Some(since) = self.since {
            let stamp = serde_json::from_str::<Stamp>(&stored.json).map_or(0, |s| s.timestamp);
            if stamp < since {
                if stored.done {
                    // How the run ended still decides the exit code.
                    self.success = stored
                        .event()
                        .and_then(|e| e.as_done().map(|done| done.status == DoneStatus::Success));
                }
                return Ok(());
            }
        }
        if let Some(format) = self.net {
            return self.show_traffic(stored, format);
        }
        show_stored(self.id, stored, renderer, &mut self.success)
    }

    /// A traffic event as `--net` shows it; the others only say how the
    /// run ended.
    fn show_traffic(&mut self, stored: &StoredEvent, format: OutputFormat) -> anyhow::Result<()> {
        let traffic = stored.json.contains(moat_engine::TRAFFIC_EVENT);
        if !traffic && !stored.done {
            return Ok(());
        }
        let Some(event) = stored.event() else {
            return Ok(());
        };
        match &event.payload {
            EventPayload::Done(done) => self.success = Some(done.status == DoneStatus::Success),
            EventPayload::Extension(extension) if extension.name == moat_engine::TRAFFIC_EVENT => {
                match format {
                    OutputFormat::Ndjson | OutputFormat::Json => println!("{}", stored.json),
                    _ if extension.payload.get("overflow").is_some() => println!(
                        "past the rows kept: {}",
                        render::safe::text(&extension.payload["overflow"].to_string())
                    ),
                    _ => println!("{}", render::traffic::line(&extension.payload)),
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Renders one stored event of run `id`; a `done` sets `success`. The
/// event is parsed only when needed: NDJSON prints the stored line as it
/// is.
fn show_stored(
    id: &RunId,
    stored: &StoredEvent,
    renderer: &mut dyn Renderer,
    success: &mut Option<bool>,
) -> anyhow::Result<()> {
    let passed = renderer
        .stored(stored.json.as_bytes())
        .context("cannot write the output")?;
    if passed && !stored.done {
        return Ok(());
    }
    let Some(event) = stored.event() else {
        tracing::warn!(run = %id, seq = stored.seq, "a stored event does not parse");
        return Ok(());
    };
    if let Some(done) = event.as_done() {
        *success = Some(done.status == DoneStatus::Success);
    }
    if !passed {
        renderer.event(&event).context("cannot write the output")?;
    }
    Ok(())
}

pub async fn wait(globals: &Globals, args: &WaitArgs) -> anyhow::Result<ExitCode> {
    let runs = wiring::runs(globals, "moat wait").await?;
    let mut ids = Vec::with_capacity(args.runs.len());
    for run in &args.runs {
        ids.push(runs.find(run).await.map_err(wiring::runs_error)?);
    }
    let mut all_completed = true;
    for id in ids {
        let run = runs.wait(&id).await.map_err(|error| match error {
            moat_runs::RunsError::NotFound(_) => {
                UsageError(format!("run {id} was pruned while waiting")).into()
            }
            other => wiring::runs_error(other),
        })?;
        // Each run's outcome as it ends, as `docker wait` prints its.
        say(&format!("{id}  {}", outcome(&run)));
        all_completed &= run.status == RunStatus::Completed;
    }
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub async fn cancel(globals: &Globals, args: &CancelArgs) -> anyhow::Result<ExitCode> {
    let runs = wiring::runs(globals, "moat cancel").await?;
    for run in &args.runs {
        // Idempotent: a run that is unknown or ended has nothing left to
        // stop, which is said, and is no failure.
        let id = match runs.find(run).await {
            Ok(id) => id,
            Err(moat_runs::RunsError::NotFound(_)) => {
                eprintln!(
                    "moat: no run {} in {}: nothing to cancel",
                    safe::text(run),
                    runs.place()
                );
                continue;
            }
            Err(error) => return Err(wiring::runs_error(error)),
        };
        let before = runs.get(&id).await.map_err(wiring::runs_error)?;
        match before {
            Some(ended) if ended.is_terminal() => {
                say(&format!("{id}  had ended: {}", outcome(&ended)));
            }
            _ => {
                runs.cancel(&id).await.map_err(wiring::runs_error)?;
                say(&format!("{id}  cancelled"));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A run's status with the reason it failed, as `ps` and `wait` show it:
/// `completed`, `failed (cancelled)`.
fn outcome(run: &RunRecord) -> String {
    match &run.reason {
        Some(reason) => format!("{} ({})", run.status, reason),
        None => run.status.to_string(),
    }
}

pub fn prune(globals: &Globals, args: &PruneArgs) -> anyhow::Result<ExitCode> {
    if globals.cluster.nats.is_some() {
        return Err(UsageError(
            "moat prune works on this machine's store (the cluster's events expire after 7 days): leave out --nats"
                .into(),
        )
        .into());
    }
    let store = wiring::store(globals.store.as_deref())?;
    let removed = store.prune(args.older_than)?;
    println!("removed {removed} runs");
    Ok(ExitCode::SUCCESS)
}

/// A run's grants in one line.
fn grants_shown(grants: &moat_grants::Grants) -> String {
    if grants.is_empty() {
        return "none".into();
    }
    let mut parts = Vec::new();
    let mut part = |name: &str, items: Vec<String>| {
        if !items.is_empty() {
            parts.push(format!("{name} {}", items.join(",")));
        }
    };
    part("net", grants.net.iter().map(ToString::to_string).collect());
    part(
        "read",
        grants
            .read
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
    );
    part(
        "write",
        grants
            .write
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
    );
    part("env", grants.env.clone());
    part("run", grants.run.clone());
    part(
        "secret",
        grants.secrets.iter().map(ToString::to_string).collect(),
    );
    part(
        "unix socket",
        grants
            .unix_sockets
            .iter()
            .map(|s| s.display().to_string())
            .collect(),
    );
    part(
        "protected, writable",
        grants
            .write_protected
            .iter()
            .map(|s| s.display().to_string())
            .collect(),
    );
    part(
        "meter",
        grants.meter.iter().map(ToString::to_string).collect(),
    );
    if grants.unmetered {
        part("unmetered model calls", vec!["allowed".into()]);
    }
    if parts.is_empty() {
        return "none".into();
    }
    safe::text(&parts.join("; ")).into_owned()
}

/// A run's limits in one line.
fn limits_shown(limits: &moat_runs::RecordedLimits) -> String {
    let memory = bytesize::ByteSize::b(limits.max_memory_bytes)
        .display()
        .iec();
    let programs = bytesize::ByteSize::b(limits.max_program_memory_bytes)
        .display()
        .iec();
    let events = bytesize::ByteSize::b(limits.max_event_bytes)
        .display()
        .iec();
    let cpus = limits.milli_cpus.map_or_else(
        || "unlimited".to_owned(),
        |milli| format!("{}", milli as f64 / 1000.0),
    );
    format!(
        "memory {memory} (its programs {programs}), fuel {}, events {events}, connections {}, files {}, processes {}, cpus {cpus}",
        limits
            .fuel
            .map_or_else(|| "unlimited".to_owned(), |f| f.to_string()),
        limits.max_connections,
        limits.max_open_files,
        limits.max_processes
    )
}

/// Input and output tokens of the run's `done`, when it reported them.
fn tokens(run: &RunRecord) -> Option<u64> {
    let tokens = run.usage()?.tokens?;
    Some(tokens.input.total.saturating_add(tokens.output.total))
}

/// What a row shows of a run's prompt: its first line, led by the part
/// the run plays when it has one (a workflow's task: its assembled
/// prompt starts alike for every task).
fn prompt_shown(run: &RunRecord) -> String {
    match &run.run.role {
        Some(role) => format!("{}: {}", safe::text(role), first_line(&run.run.prompt)),
        None => first_line(&run.run.prompt),
    }
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

/// A run's budget, what it spent and what is left: `$1.00; spent $0.42
/// (1200 tokens), left $0.58`; `None` without a budget or spending.
fn budget_shown(run: &RunRecord) -> Option<String> {
    let budget = moat_launch::Budget::of_record(run.run.limits.as_ref());
    let spent = run.spent;
    if budget.is_unbounded() && spent.is_none() {
        return None;
    }
    let spent = spent.unwrap_or_default();
    let spent_words = spent.words_with_calls(budget.calls.is_some());
    if budget.is_unbounded() {
        return Some(format!("none; spent {spent_words}"));
    }
    Some(format!(
        "{}; spent {spent_words}, left {}",
        budget.words(),
        budget.after(&spent).words()
    ))
}

/// A line of what `wait` or `cancel` did: the waiting and cancelling go
/// on when nobody reads it any more (`moat cancel … | head -1`), so a
/// closed stdout loses the line, not the work.
fn say(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}
