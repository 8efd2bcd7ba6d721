//! The JSON and server-sent-event API the page reads, over [`Runs`]:
//! every value from the browser checked before use.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hyper::{Response, StatusCode};
use moat_runs::{Answer, RunFilter, RunId, RunRecord, RunStatus, Runs, RunsError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::State;
use crate::response::{Body, json, sse, text};

/// Runs listed when the page names no limit, and the most it may ask.
const DEFAULT_LIMIT: usize = 500;
const MAX_LIMIT: usize = 5000;
/// How often the list of runs is read for its live stream.
const LIST_EVERY: Duration = Duration::from_millis(300);
/// A comment on idle streams, so proxies and the browser keep them.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Events sent in one message, at most.
const EVENTS_PER_MESSAGE: usize = 512;
/// A run's descendants shown, at most, and how deep.
const MAX_TREE: usize = 500;
const MAX_DEPTH: usize = 8;
/// The longest diff sent to the page.
const MAX_DIFF: usize = 2 * 1024 * 1024;
/// The longest prompt shown in the list.
const LIST_PROMPT: usize = 200;

/// `GET /api/runs?status=a,b&adapter=x&parent=ID&limit=N`.
pub(crate) async fn list(state: &State, query: &str) -> Response<Body> {
    let filter = match filter(query) {
        Ok(filter) => filter,
        Err(why) => return text(StatusCode::BAD_REQUEST, why),
    };
    match state.runs.list(&filter).await {
        Ok(records) => json(StatusCode::OK, &summaries(&records)),
        Err(error) => failure(&error),
    }
}

/// `GET /api/runs/stream?…`: the list (as [`list`]) each time it changes.
pub(crate) fn list_stream(state: &State, query: &str) -> Response<Body> {
    let filter = match filter(query) {
        Ok(filter) => filter,
        Err(why) => return text(StatusCode::BAD_REQUEST, why),
    };
    let runs = state.runs.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let mut last = String::new();
        let mut last_sent = tokio::time::Instant::now();
        loop {
            let message = match runs.list(&filter).await {
                Ok(records) => {
                    let data = summaries(&records).to_string();
                    (data != last).then(|| {
                        let message = format!("event: runs\ndata: {data}\n\n");
                        last = data;
                        message
                    })
                }
                Err(error) => Some(format!(
                    "event: failure\ndata: {}\n\n",
                    json!(error.to_string())
                )),
            };
            let message =
                message.or_else(|| (last_sent.elapsed() >= KEEPALIVE).then(|| ":\n\n".to_owned()));
            if let Some(message) = message {
                if tx.send(Bytes::from(message)).await.is_err() {
                    return;
                }
                last_sent = tokio::time::Instant::now();
            }
            tokio::select! {
                () = tokio::time::sleep(LIST_EVERY) => {}
                () = tx.closed() => return,
            }
        }
    });
    sse(receiver(rx))
}

/// `GET /api/runs/ID`: the record, its descendants, its approvals.
pub(crate) async fn run(state: &State, id: &str) -> Response<Body> {
    let (id, record) = match record_of(state, id).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let children = tree(state.runs.as_ref(), &id).await;
    let (approvals, approvals_error) = match state.runs.approvals(&id).await {
        Ok(approvals) => (approvals.iter().map(|a| a.to_json()).collect(), None),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    json(
        StatusCode::OK,
        &json!({
            "record": record.to_json(),
            "children": children,
            "approvals": approvals,
            "approvalsError": approvals_error,
            "workflow": is_workflow(&record),
            // Only a run that has a workspace has a diff to show.
            "diffAvailable": state.diff.as_ref().is_some_and(|workspaces| workspaces.has(&id)),
            "place": state.runs.place(),
        }),
    )
}

/// `GET /api/runs/ID/events?from=N` (or a `Last-Event-ID` on a
/// reconnection): the run's events from number N on, stored then live,
/// as `events` messages (a JSON array each), then `end`.
pub(crate) async fn events(
    state: &State,
    id: &str,
    query: &str,
    last_event_id: Option<&str>,
) -> Response<Body> {
    let Some(id) = run_id(id) else {
        return bad_id(id);
    };
    let from = match last_event_id {
        Some(last) => last.trim().parse::<u64>().ok(),
        None => match param(query, "from") {
            None => Some(0),
            Some(from) => from.parse::<u64>().ok(),
        },
    };
    let Some(from) = from else {
        return text(StatusCode::BAD_REQUEST, "from: not an event number");
    };
    let followed = match state.runs.follow(&id, from).await {
        Ok(followed) => followed,
        Err(error) => return failure(&error),
    };
    let runs = state.runs.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        let mut next = from;
        let mut followed = followed.ready_chunks(EVENTS_PER_MESSAGE);
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        keepalive.tick().await;
        loop {
            let chunk = tokio::select! {
                chunk = followed.next() => chunk,
                _ = keepalive.tick() => {
                    if tx.send(Bytes::from_static(b":\n\n")).await.is_err() {
                        return;
                    }
                    continue;
                }
                () = tx.closed() => return,
            };
            let Some(items) = chunk else {
                let _ = tx
                    .send(Bytes::from_static(b"event: end\ndata: {}\n\n"))
                    .await;
                return;
            };
            let mut batch = String::from("[");
            let mut lagged = None;
            let mut failed = None;
            for item in items {
                match item {
                    Ok(event) => {
                        if batch.len() > 1 {
                            batch.push(',');
                        }
                        batch.push_str(&event.json);
                        next = event.seq + 1;
                    }
                    Err(RunsError::Lagged { next: at }) => lagged = Some(at),
                    Err(error) => failed = Some(error),
                }
            }
            batch.push(']');
            if batch.len() > 2 {
                let message = format!("id: {next}\nevent: events\ndata: {batch}\n\n");
                if tx.send(Bytes::from(message)).await.is_err() {
                    return;
                }
            }
            if let Some(error) = failed {
                let message = format!("event: failure\ndata: {}\n\n", json!(error.to_string()));
                let _ = tx.send(Bytes::from(message)).await;
                return;
            }
            // Behind the live events: follow again from the first missed
            // (they are stored), as `moat logs -f` does.
            if let Some(at) = lagged {
                match runs.follow(&id, at.max(next)).await {
                    Ok(again) => followed = again.ready_chunks(EVENTS_PER_MESSAGE),
                    Err(error) => {
                        let message =
                            format!("event: failure\ndata: {}\n\n", json!(error.to_string()));
                        let _ = tx.send(Bytes::from(message)).await;
                        return;
                    }
                }
            }
        }
    });
    sse(receiver(rx))
}

/// `POST /api/runs/ID/cancel`.
pub(crate) async fn cancel(state: &State, id: &str) -> Response<Body> {
    let Some(id) = run_id(id) else {
        return bad_id(id);
    };
    match state.runs.cancel(&id).await {
        Ok(()) => json(StatusCode::OK, &json!({"cancelled": id.as_str()})),
        Err(error) => failure(&error),
    }
}

/// `POST /api/workflows` with `{"file": "/abs/workflow.toml", "resume"?:
/// bool, "fresh"?: bool, "force"?: bool}`: starts (or resumes) the
/// workflow file as `moat workflow run` would, under the flags of `moat
/// ui`; `{"run": ID}`, its record, once its state is taken.
pub(crate) async fn start_workflow(state: &State, body: &[u8]) -> Response<Body> {
    use moat_workflow::{Start, StartError, WorkflowError};
    let Some(starter) = &state.workflows else {
        return text(StatusCode::NOT_FOUND, "this moat ui starts no workflows");
    };
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return text(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    let Some(file) = body.get("file").and_then(Value::as_str).map(str::trim) else {
        return text(
            StatusCode::BAD_REQUEST,
            "file: the workflow file's absolute path",
        );
    };
    let mut flags = [false; 3];
    for (flag, name) in flags.iter_mut().zip(["resume", "fresh", "force"]) {
        *flag = match body.get(name) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(set)) => *set,
            Some(_) => return text(StatusCode::BAD_REQUEST, format!("{name}: not a boolean")),
        };
    }
    let [resume, fresh, force] = flags;
    let start = match (resume, fresh) {
        (true, true) => return text(StatusCode::BAD_REQUEST, "resume or start over: not both"),
        (true, false) => Start::Resume { force },
        (false, _) => Start::Fresh { discard: fresh },
    };
    match starter.start(std::path::Path::new(file), start, None).await {
        Ok(id) => json(
            StatusCode::OK,
            &json!({"run": id.as_ref().map(RunId::as_str)}),
        ),
        Err(error) => {
            let status = match &error {
                StartError::Relative(_)
                | StartError::Definition(_)
                | StartError::NotStarted(WorkflowError::Unrunnable { .. }) => {
                    StatusCode::BAD_REQUEST
                }
                StartError::NotStarted(WorkflowError::NothingToResume { .. }) => {
                    StatusCode::NOT_FOUND
                }
                StartError::NotStarted(
                    WorkflowError::Unfinished { .. }
                    | WorkflowError::Changed { .. }
                    | WorkflowError::State(moat_workflow::state::StateError::Locked { .. }),
                ) => StatusCode::CONFLICT,
                StartError::Stopping => StatusCode::SERVICE_UNAVAILABLE,
                StartError::NotStarted(WorkflowError::State(_) | WorkflowError::Record(_)) => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            };
            text(status, error.to_string())
        }
    }
}

/// `POST /api/runs/ID/approvals/N` with `{"decision": "approve"|"deny",
/// "always"?: bool, "reason"?: string}`.
pub(crate) async fn answer(state: &State, id: &str, number: &str, body: &[u8]) -> Response<Body> {
    let Some(id) = run_id(id) else {
        return bad_id(id);
    };
    let Some(number) = number.parse::<u32>().ok().filter(|n| *n > 0) else {
        return text(StatusCode::BAD_REQUEST, "not a request number");
    };
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return text(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    let always = match body.get("always") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(always)) => *always,
        Some(_) => return text(StatusCode::BAD_REQUEST, "always: not a boolean"),
    };
    let reason = match body.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) if reason.trim().is_empty() => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return text(StatusCode::BAD_REQUEST, "reason: not a string"),
    };
    let answer = match body.get("decision").and_then(Value::as_str) {
        Some("approve") => Answer::approve(state.answerer.clone(), always),
        Some("deny") => Answer::deny(state.answerer.clone(), reason),
        _ => return text(StatusCode::BAD_REQUEST, "decision: approve or deny"),
    };
    match state.runs.answer(&id, Some(number), answer).await {
        Ok(approval) => json(StatusCode::OK, &approval.to_json()),
        Err(error) => failure(&error),
    }
}

/// `GET /api/runs/ID/traffic`: every request and connection the run
/// made through moat, allowed or refused, and its model calls' usage as
/// moat metered it beside what its adapter reported (as `moat show --net
/// --json`). Its strings come from the run: the page shows them as text.
pub(crate) async fn traffic(state: &State, id: &str) -> Response<Body> {
    // The record first: a run that does not exist is a 404, not an empty
    // table.
    let (id, _) = match record_of(state, id).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    match moat_runs::traffic(state.runs.as_ref(), &id).await {
        Ok(traffic) => match serde_json::to_value(&traffic) {
            Ok(value) => json(StatusCode::OK, &value),
            Err(error) => text(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
        },
        Err(error) => failure(&error),
    }
}

/// `GET /api/runs/ID/diff`: the run's workspace diff, as `moat diff`.
pub(crate) async fn diff(state: &State, id: &str) -> Response<Body> {
    let Some(id) = run_id(id) else {
        return bad_id(id);
    };
    let Some(source) = &state.diff else {
        return text(StatusCode::NOT_FOUND, "no workspace diffs here");
    };
    match source.diff(id).await {
        Ok(None) => json(StatusCode::OK, &json!({"diff": null})),
        Ok(Some(mut diff)) => {
            let truncated = diff.len() > MAX_DIFF;
            diff.truncate(diff.floor_char_boundary(MAX_DIFF));
            json(
                StatusCode::OK,
                &json!({"diff": diff, "truncated": truncated}),
            )
        }
        Err(why) => json(StatusCode::OK, &json!({"diff": null, "error": why})),
    }
}

/// `GET /api/runs/ID/workflow`: a workflow record's DAG, each task with
/// its state (from the workflow's state file, as `moat workflow status`).
pub(crate) async fn workflow(state: &State, id: &str) -> Response<Body> {
    let (id, record) = match record_of(state, id).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    if !is_workflow(&record) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("run {id} is not a workflow"),
        );
    }
    let Some(file) = record.run.options.get("file").and_then(Value::as_str) else {
        return text(StatusCode::NOT_FOUND, "the workflow's record names no file");
    };
    // Recorded by its absolute path; records made before were named as
    // given to `moat workflow run` (relative to where it ran, unknown
    // here): the file of that name in its project, the file's directory.
    let mut file = PathBuf::from(file);
    if file.is_relative()
        && let Some(project) = record.run.options.get("project").and_then(Value::as_str)
        && let Some(name) = file.file_name()
    {
        file = PathBuf::from(project).join(name);
    }
    let hash = record.run.component_sha256.clone();
    let read = tokio::task::spawn_blocking(move || workflow_of(&file, &hash)).await;
    match read {
        Ok(Ok(value)) => json(StatusCode::OK, &value),
        Ok(Err(why)) => text(StatusCode::NOT_FOUND, why),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read the workflow",
        ),
    }
}

fn workflow_of(file: &std::path::Path, hash: &str) -> Result<Value, String> {
    let workflow = moat_workflow::load(file).map_err(|e| e.to_string())?;
    let path = moat_workflow::state::directory(&workflow).join("state.json");
    let state = moat_workflow::state::read(&path).map_err(|e| e.to_string())?;
    let tasks: Vec<Value> = workflow
        .tasks
        .iter()
        .map(|task| {
            let task_state = state.as_ref().and_then(|s| s.tasks.get(&task.id));
            json!({
                "id": task.id,
                "adapter": task.adapter,
                "dependsOn": task.depends_on,
                "state": task_state.map(|s| serde_json::to_value(s).unwrap_or_default()),
            })
        })
        .collect();
    Ok(json!({
        "name": workflow.name,
        "file": workflow.file,
        // The file changed since this record's run: its tasks may not be
        // the ones that ran.
        "changed": workflow.hash != hash,
        "status": state.as_ref().map(|s| s.status.as_str()),
        "startedAt": state.as_ref().map(|s| s.started_at.clone()),
        "endedAt": state.as_ref().and_then(|s| s.ended_at.clone()),
        "tasks": tasks,
    }))
}

/// The run's descendants as a tree (at most [`MAX_TREE`] of them,
/// [`MAX_DEPTH`] deep), each with its `children`, oldest first.
async fn tree(runs: &dyn Runs, root: &RunId) -> Vec<Value> {
    // Breadth first: each node with the index of its parent node.
    let mut nodes: Vec<(Value, Option<usize>)> = Vec::new();
    let mut queue = VecDeque::from([(root.clone(), 0usize, None::<usize>)]);
    while let Some((id, depth, at)) = queue.pop_front() {
        if depth >= MAX_DEPTH || nodes.len() >= MAX_TREE {
            continue;
        }
        let filter = RunFilter {
            parent: Some(id),
            limit: Some(MAX_TREE),
            ..RunFilter::default()
        };
        let Ok(children) = runs.list(&filter).await else {
            continue;
        };
        for child in children.iter().rev().take(MAX_TREE - nodes.len()) {
            nodes.push((summary(child), at));
            queue.push_back((child.id.clone(), depth + 1, Some(nodes.len() - 1)));
        }
    }
    // A node's children come after it: built from the last one up.
    let mut children: Vec<Vec<Value>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (index, (mut value, parent)) in nodes.into_iter().enumerate().rev() {
        let mut own = std::mem::take(&mut children[index]);
        own.reverse();
        value["children"] = Value::Array(own);
        match parent {
            Some(parent) => children[parent].push(value),
            None => roots.push(value),
        }
    }
    roots.reverse();
    roots
}

fn is_workflow(record: &RunRecord) -> bool {
    record.run.adapter == "workflow" && record.run.options.get("file").is_some()
}

/// The runs as the table shows them.
fn summaries(records: &[RunRecord]) -> Value {
    Value::Array(records.iter().map(summary).collect())
}

fn summary(record: &RunRecord) -> Value {
    let prompt: String = record.run.prompt.chars().take(LIST_PROMPT).collect();
    json!({
        "id": record.id.as_str(),
        "parent": record.run.parent.as_ref().map(|p| p.as_str().to_owned()),
        "adapter": record.run.adapter,
        "status": record.status.as_str(),
        "reason": record.reason.as_ref().map(|r| r.as_str().to_owned()),
        "prompt": prompt,
        "role": record.run.role,
        "createdMs": record.created_ms,
        "startedMs": record.started_ms,
        "endedMs": record.ended_ms,
        // In the event's own shape (cligent's), whatever shape the record
        // holds: the page reads one.
        "usage": record.usage(),
        "spent": record.spent,
        "workflow": is_workflow(record),
        "worker": record.worker,
    })
}

/// The listing the query asks for.
fn filter(query: &str) -> Result<RunFilter, String> {
    let mut filter = RunFilter {
        limit: Some(DEFAULT_LIMIT),
        ..RunFilter::default()
    };
    if let Some(statuses) = param(query, "status").filter(|s| !s.is_empty()) {
        for status in statuses.split(',') {
            filter.statuses.push(status.parse::<RunStatus>()?);
        }
    }
    if let Some(adapter) = param(query, "adapter").filter(|a| !a.is_empty()) {
        if adapter.len() > 512 || adapter.chars().any(char::is_control) {
            return Err("adapter: not an adapter's name".into());
        }
        filter.adapter = Some(adapter);
    }
    if let Some(parent) = param(query, "parent").filter(|p| !p.is_empty()) {
        filter.parent = Some(RunId::parse(&parent).ok_or("parent: not a run id")?);
    }
    if let Some(limit) = param(query, "limit") {
        let limit: usize = limit.parse().map_err(|_| "limit: not a number")?;
        filter.limit = Some(limit.clamp(1, MAX_LIMIT));
    }
    Ok(filter)
}

/// The run id of a path segment, checked.
fn run_id(text: &str) -> Option<RunId> {
    RunId::parse(&decode(text)?)
}

/// The run a path segment names and its record; else the answer saying
/// why not (not a run id, no such run, the runs unreadable).
async fn record_of(
    state: &State,
    id: &str,
) -> Result<(RunId, moat_runs::RunRecord), Response<Body>> {
    let Some(id) = run_id(id) else {
        return Err(bad_id(id));
    };
    match state.runs.get(&id).await {
        Ok(Some(record)) => Ok((id, record)),
        Ok(None) => Err(text(StatusCode::NOT_FOUND, format!("no run {id}"))),
        Err(error) => Err(failure(&error)),
    }
}

/// The answer to a path segment that is not a run id.
fn bad_id(given: &str) -> Response<Body> {
    let shown: String = given.chars().take(64).collect();
    text(StatusCode::BAD_REQUEST, format!("not a run id: {shown}"))
}

/// The value of `name` in the query, percent-decoded; `None` when absent
/// or not UTF-8.
fn param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(key, _)| *key == name)
        .and_then(|(_, value)| decode(value))
}

/// Percent-decoding (`+` as a space, as forms send it).
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A failure of the runs, as a response.
fn failure(error: &RunsError) -> Response<Body> {
    let status = match error {
        RunsError::NotFound(_) => StatusCode::NOT_FOUND,
        RunsError::Ambiguous { .. } | RunsError::Invalid(_) => StatusCode::CONFLICT,
        RunsError::Lagged { .. } => StatusCode::CONFLICT,
        RunsError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    text(status, error.to_string())
}

/// A stream of the messages a task sends.
fn receiver(rx: mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_decoded_and_checked() {
        assert_eq!(param("a=1&b=x%20y+z", "b").as_deref(), Some("x y z"));
        assert_eq!(param("a=1", "b"), None);
        assert_eq!(param("b=%zz", "b"), None);
        let listed = filter("status=running,waiting&adapter=echo&limit=99999").unwrap();
        assert_eq!(listed.statuses, [RunStatus::Running, RunStatus::Waiting]);
        assert_eq!(listed.adapter.as_deref(), Some("echo"));
        assert_eq!(listed.limit, Some(MAX_LIMIT));
        assert!(filter("status=sleeping").is_err());
        assert!(filter("limit=-1").is_err());
        assert!(filter("parent=..%2F..").is_err());
        assert!(filter("adapter=%0A").is_err());
    }
}
