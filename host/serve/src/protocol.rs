//! The messages of the protocol (docs/protocol.md): what a client sends,
//! what it gets back, and the error codes. One JSON object per line.
//!
//! Everything here comes from a client and is untrusted: a line that is not
//! a request is answered with `INVALID_REQUEST` (and the id, when one could
//! be read), and the connection stays usable.

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The longest request line read; a longer one is refused and skipped.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Why a request failed, as the protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Not JSON, not an object, an unknown op, a missing or malformed field.
    InvalidRequest,
    /// A run, adapter or subscription that does not exist.
    NotFound,
    /// A run asked for more than the server (or its parent) allows.
    BoundaryViolation,
    /// A run could not start, or an awaited run did not complete.
    RunFailed,
    /// A run's changes do not apply to its project as it is now (nothing
    /// was changed).
    Conflict,
}

impl Code {
    /// The code's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidRequest => "INVALID_REQUEST",
            Code::NotFound => "NOT_FOUND",
            Code::BoundaryViolation => "BOUNDARY_VIOLATION",
            Code::RunFailed => "RUN_FAILED",
            Code::Conflict => "CONFLICT",
        }
    }
}

/// A failed request: its code, a message for people, and what else the
/// client should know (e.g. the results of an `await` whose runs failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Its code.
    pub code: Code,
    /// What went wrong, for people.
    pub message: String,
    /// What else the client gets (an `await`'s results).
    pub data: Option<Value>,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `INVALID_REQUEST`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidRequest, message)
    }

    /// `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }
}

/// A request: its id (echoed in the response) and its operation.
#[derive(Debug)]
pub struct Request {
    /// The client's id of the request, echoed in the response.
    pub id: Value,
    /// What it asks.
    pub op: Op,
}

/// The operations.
#[derive(Debug)]
pub enum Op {
    /// Start a run.
    Run(Box<moat_launch::RunRequest>),
    /// Start (or resume) a workflow file.
    WorkflowRun(WorkflowRunParams),
    /// A workflow file's state here.
    WorkflowStatus(WorkflowFileParam),
    /// Wait for runs' results.
    Await(RunsParams),
    /// Stop a run.
    Cancel(RunParam),
    /// A run's record and result.
    Get(RunParam),
    /// Records.
    List(ListParams),
    /// Stream runs' events.
    Subscribe(SubscribeParams),
    /// End a subscription.
    Unsubscribe(UnsubscribeParams),
    /// The built-in adapters.
    Adapters,
    /// What an adapter is, and what this server allows it.
    Inspect(InspectParams),
    /// What a run changed in its workspace.
    Diff(DiffParams),
    /// Apply what a run changed in its workspace to its project.
    Apply(ApplyParams),
    /// Approve a run's request.
    Approve(ApproveParams),
    /// Deny a run's request.
    Deny(DenyParams),
    /// A run's requests and their answers.
    Approvals(RunParam),
    /// A run's traffic: its requests and connections through moat, and
    /// its model calls' usage, metered and reported.
    Traffic(RunParam),
    /// Stop the server.
    Shutdown,
}

/// `approve`: a run's request to approve.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveParams {
    /// A run id, or a prefix naming one run.
    pub run: String,
    /// The request's number; absent: the run's only open one.
    pub request: Option<u32>,
    /// Also every later request of the run it covers.
    #[serde(default)]
    pub always: bool,
}

/// `deny`: a run's request to deny.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenyParams {
    /// A run id, or a prefix naming one run.
    pub run: String,
    /// The request's number; absent: the run's only open one.
    pub request: Option<u32>,
    /// Why, for the run.
    pub reason: Option<String>,
}

/// `diff`: a run's changes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    /// A run id, or a prefix naming one run.
    pub run: String,
    /// Only the summary (files and lines changed).
    #[serde(default)]
    pub stat: bool,
}

/// `await`: the runs to wait for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsParams {
    /// Run ids, or prefixes naming one run each.
    pub runs: Vec<String>,
}

/// `cancel`, `get`: one run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParam {
    /// A run id, or a prefix naming one run.
    pub run: String,
}

/// `apply`: one run's changes, or its commits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyParams {
    /// A run id, or a prefix naming one run.
    pub run: String,
    /// Land the commits the run made in its workspace's repository on
    /// the project's branch, instead of its changes as a patch.
    #[serde(default)]
    pub commits: bool,
    /// Land what is not landed unasked too (links out of the project,
    /// files that run code later).
    #[serde(default, rename = "includeProtected")]
    pub include_protected: bool,
}

/// `list`: which runs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only these statuses (`pending`, `running`, `completed`, `failed`).
    #[serde(default)]
    pub status: Vec<String>,
    /// Only runs of this adapter.
    pub adapter: Option<String>,
    /// Only the children of this run.
    pub parent: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

/// `subscribe`: the runs whose events to stream, from which sequence
/// number (0, the first, when absent).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubscribeParams {
    /// Run ids, or prefixes naming one run each.
    pub runs: Vec<String>,
    /// The first event to send of each.
    #[serde(default)]
    pub from_seq: u64,
}

/// `unsubscribe`: the subscription to end.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UnsubscribeParams {
    /// The subscription.
    pub subscription_id: String,
}

/// `workflow_run`: the workflow file, and how it starts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowRunParams {
    /// The workflow file: an absolute path on the server's machine.
    pub file: String,
    /// Start over though an earlier run did not finish.
    #[serde(default)]
    pub fresh: bool,
    /// Go on where its state says: completed tasks are skipped.
    #[serde(default)]
    pub resume: bool,
    /// Resume though the file changed since its state was written.
    #[serde(default)]
    pub force: bool,
    /// How many tasks run at once (else as the file says, else 4).
    pub max_parallel: Option<usize>,
}

/// `workflow_status`: the workflow file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowFileParam {
    /// The workflow file: an absolute path on the server's machine.
    pub file: String,
}

/// `inspect`: the adapter to describe.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InspectParams {
    /// A built-in's name, an installed adapter's, or a component's path.
    pub adapter: String,
}

/// Reads one line: the request, or the failure to answer with the id when
/// one could be read (`Value::Null` otherwise).
pub fn parse(line: &str) -> Result<Request, (Value, Failure)> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| (Value::Null, Failure::invalid(format!("not JSON: {e}"))))?;
    let Value::Object(mut fields) = value else {
        return Err((
            Value::Null,
            Failure::invalid("a request is a JSON object with an id and an op"),
        ));
    };
    let id = match fields.remove("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id,
        Some(_) => {
            return Err((
                Value::Null,
                Failure::invalid("the id must be a number or a string"),
            ));
        }
        None => return Err((Value::Null, Failure::invalid("the request has no id"))),
    };
    let fail = |failure: Failure| (id.clone(), failure);
    let op = match fields.remove("op") {
        Some(Value::String(op)) => op,
        _ => return Err(fail(Failure::invalid("the request has no op (a string)"))),
    };
    let params = Value::Object(fields.clone());
    let op = match op.as_str() {
        "run" => Op::Run(Box::new(run_request(&fields).map_err(fail)?)),
        "workflow_run" => Op::WorkflowRun(params_of(&op, params).map_err(fail)?),
        "workflow_status" => Op::WorkflowStatus(params_of(&op, params).map_err(fail)?),
        "await" => Op::Await(params_of(&op, params).map_err(fail)?),
        "cancel" => Op::Cancel(params_of(&op, params).map_err(fail)?),
        "get" => Op::Get(params_of(&op, params).map_err(fail)?),
        "list" => Op::List(params_of(&op, params).map_err(fail)?),
        "subscribe" => Op::Subscribe(params_of(&op, params).map_err(fail)?),
        "unsubscribe" => Op::Unsubscribe(params_of(&op, params).map_err(fail)?),
        "adapters" => no_params(&op, params, Op::Adapters).map_err(fail)?,
        "inspect" => Op::Inspect(params_of(&op, params).map_err(fail)?),
        "diff" => Op::Diff(params_of(&op, params).map_err(fail)?),
        "apply" => Op::Apply(params_of(&op, params).map_err(fail)?),
        "approve" => Op::Approve(params_of(&op, params).map_err(fail)?),
        "deny" => Op::Deny(params_of(&op, params).map_err(fail)?),
        "approvals" => Op::Approvals(params_of(&op, params).map_err(fail)?),
        "traffic" => Op::Traffic(params_of(&op, params).map_err(fail)?),
        "shutdown" => no_params(&op, params, Op::Shutdown).map_err(fail)?,
        other => {
            return Err(fail(Failure::invalid(format!(
                "unknown op {:?}; the ops are run, await, cancel, get, list, subscribe, unsubscribe, adapters, inspect, diff, apply, approve, deny, approvals, workflow_run, workflow_status, shutdown",
                cut(other)
            ))));
        }
    };
    Ok(Request { id, op })
}

/// `run`'s fields: a run request in the protocol's words
/// (`moat_launch::request`), with its adapter and prompt.
fn run_request(fields: &Map<String, Value>) -> Result<moat_launch::RunRequest, Failure> {
    let request = moat_launch::RunRequest::read(fields, moat_launch::Dialect::Protocol, None, &[])
        .map_err(|e| Failure::invalid(e.to_string()))?;
    for (field, given) in [("adapter", &request.adapter), ("prompt", &request.prompt)] {
        if given.is_none() {
            return Err(Failure::invalid(format!("run: `{field}` is missing")));
        }
    }
    Ok(request)
}

fn params_of<T: serde::de::DeserializeOwned>(op: &str, params: Value) -> Result<T, Failure> {
    serde_json::from_value(params).map_err(|e| Failure::invalid(format!("{op}: {e}")))
}

fn no_params(op: &str, params: Value, parsed: Op) -> Result<Op, Failure> {
    match params {
        Value::Object(fields) if fields.is_empty() => Ok(parsed),
        _ => Err(Failure::invalid(format!("{op} takes no fields"))),
    }
}

/// A client's text, bounded, for a message.
fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(100)]
}

/// The response to request `id`.
pub fn response(id: &Value, outcome: Result<Value, Failure>) -> Value {
    match outcome {
        Ok(result) => json!({"id": id, "result": result}),
        Err(failure) => {
            let mut error = Map::new();
            error.insert("code".into(), json!(failure.code.as_str()));
            error.insert("message".into(), json!(failure.message));
            if let Some(data) = failure.data {
                error.insert("data".into(), data);
            }
            json!({"id": id, "error": error})
        }
    }
}

/// `await`'s answer: every run's result, or `RUN_FAILED` carrying them
/// when some (`failed`: "id reason") did not complete.
pub fn awaited(
    results: serde_json::Map<String, Value>,
    failed: &[String],
) -> Result<Value, Failure> {
    let results = serde_json::json!({"results": results});
    if failed.is_empty() {
        return Ok(results);
    }
    let mut failure = Failure::new(
        Code::RunFailed,
        format!("not every run completed: {}", failed.join(", ")),
    );
    failure.data = Some(results);
    Err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> (Value, Failure) {
        parse(line).unwrap_err()
    }

    #[test]
    fn every_malformed_request_is_invalid_and_keeps_its_id_when_it_has_one() {
        assert_eq!(refused("{").0, Value::Null);
        assert_eq!(refused("[1]").1.code, Code::InvalidRequest);
        assert_eq!(
            refused(r#"{"op":"list"}"#).1.message,
            "the request has no id"
        );
        assert_eq!(refused(r#"{"id":true,"op":"list"}"#).0, Value::Null);
        let (id, failure) = refused(r#"{"id":7,"op":"fly"}"#);
        assert_eq!(id, json!(7));
        assert!(
            failure.message.contains("unknown op \"fly\""),
            "{}",
            failure.message
        );
        let (id, failure) = refused(r#"{"id":"a","op":"run","prompt":"hi"}"#);
        assert_eq!(id, json!("a"));
        assert!(failure.message.contains("adapter"), "{}", failure.message);
        let (_, failure) = refused(r#"{"id":1,"op":"get","run":"r_1","extra":1}"#);
        assert!(
            failure.message.contains("unknown field"),
            "{}",
            failure.message
        );
        let (_, failure) = refused(r#"{"id":1,"op":"shutdown","now":true}"#);
        assert_eq!(failure.message, "shutdown takes no fields");
    }

    #[test]
    fn requests_are_read_with_their_fields() {
        let request = parse(
            r#"{"id":1,"op":"run","adapter":"echo","prompt":"hi","limits":{"timeoutMs":500},"grants":{"env":["HOME"]}}"#,
        )
        .unwrap();
        let Op::Run(run) = request.op else { panic!() };
        assert_eq!(
            (run.adapter.as_deref(), run.prompt.as_deref()),
            (Some("echo"), Some("hi"))
        );
        assert_eq!(
            run.limits.timeout,
            Some(moat_launch::Timeout::After(
                std::time::Duration::from_millis(500)
            ))
        );
        assert_eq!(run.grants.env, Some(vec!["HOME".to_owned()]));
        let request = parse(r#"{"id":2,"op":"subscribe","runs":["r_1"],"fromSeq":3}"#).unwrap();
        let Op::Subscribe(sub) = request.op else {
            panic!()
        };
        assert_eq!(sub.from_seq, 3);
    }

    /// The schema's `run` names every field the protocol takes, as the
    /// request's one table spells it, and no other.
    #[test]
    fn the_schemas_run_is_the_requests_fields() {
        use moat_launch::{Dialect, Field};
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../protocol/moat-protocol.schema.json"
        );
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let run = schema["$defs"]["request"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|op| op["properties"]["op"]["const"] == "run")
            .unwrap();
        let mut in_schema: Vec<String> = Vec::new();
        for (key, property) in run["properties"].as_object().unwrap() {
            let nested = property
                .get("properties")
                .and_then(Value::as_object)
                .or_else(|| {
                    let reference = property.get("$ref")?.as_str()?.rsplit('/').next()?;
                    schema["$defs"][reference]["properties"].as_object()
                });
            match nested {
                Some(inner) => {
                    in_schema.extend(inner.keys().map(|name| format!("{key}.{name}")));
                    if key == "ask" {
                        in_schema.push(key.clone());
                    }
                }
                None if key == "op" => {}
                None => in_schema.push(key.clone()),
            }
        }
        let mut in_table: Vec<String> = Field::all()
            .flat_map(|field| Dialect::Protocol.spellings(field))
            .collect();
        in_schema.sort();
        in_table.sort();
        assert_eq!(
            in_schema, in_table,
            "protocol/moat-protocol.schema.json's run"
        );
    }

    #[test]
    fn responses_pair_the_id_with_a_result_or_an_error() {
        assert_eq!(
            response(&json!(3), Ok(json!({"run": "r_1"}))),
            json!({"id": 3, "result": {"run": "r_1"}})
        );
        let mut failure = Failure::new(Code::RunFailed, "r_1 failed");
        failure.data = Some(json!({"results": {}}));
        assert_eq!(
            response(&json!("x"), Err(failure)),
            json!({"id": "x", "error": {"code": "RUN_FAILED", "message": "r_1 failed", "data": {"results": {}}}})
        );
    }
}
