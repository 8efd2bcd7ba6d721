//! [`RunTracer`]: one run's spans, made from its events as they pass.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::SystemTime;

use moat_engine::{
    AgentEvent, DoneStatus, EventPayload, METERED_SOURCE, TRAFFIC_EVENT, ToolStatus, UNKNOWN_MODEL,
    USAGE_EVENT,
};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::Span;

use crate::{Telemetry, installed, started};

/// What a run's span starts with.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStart<'a> {
    /// Its run id, when it is recorded.
    pub id: Option<&'a str>,
    /// Its parent run, when it has one: the parent's span, when it lives
    /// in this process, is the run's span's parent.
    pub parent: Option<&'a str>,
    /// A parent span from elsewhere (a cluster job's `traceparent`); wins
    /// over `parent`.
    pub traceparent: Option<&'a str>,
    /// The adapter's name.
    pub adapter: &'a str,
    /// The model it asked for, when it asked for one.
    pub model: Option<&'a str>,
    /// The run is submitted to a cluster and followed from here: the span
    /// is the submitter's side (kind client) of the worker's.
    pub submitted: bool,
}

/// A run's span, and its tool calls' and model calls' under it. Ends with
/// the run's `done`; dropped before it, the span ends then.
pub struct RunTracer {
    span: Span,
    /// The run's span as its children's parent.
    context: Context,
    id: Option<String>,
    model: Option<String>,
    /// Tool calls begun and not ended, by tool-use id.
    tools: HashMap<String, Span>,
    /// When the model call in progress began: the run's start, or the
    /// end of its previous step (a model call's usage or a tool's result).
    /// A call's `tool_use` events come while it streams, before its usage.
    step: SystemTime,
    /// The last error's message: a failed run's status message.
    last_error: Option<String>,
    /// moat's meter read one of its model calls: its calls' spans are the
    /// meter's, not the adapter's reports (one span per call).
    metered: bool,
    ended: bool,
}

/// The tracer of a run started as `start`; `None` when no traces are
/// exported.
pub fn start_run(start: RunStart<'_>) -> Option<RunTracer> {
    let telemetry = started()?;
    Some(RunTracer::start(telemetry, start))
}

impl RunTracer {
    fn start(telemetry: &'static Telemetry, start: RunStart<'_>) -> Self {
        let parent = start
            .traceparent
            .and_then(crate::parse_traceparent)
            .or_else(|| {
                let parent = start.parent?;
                telemetry.live.lock().ok()?.get(parent).cloned()
            });
        let parent_context = match parent {
            Some(span) => Context::new().with_remote_span_context(span),
            None => Context::new(),
        };
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", start.adapter.to_owned()),
        ];
        if let Some(model) = start.model {
            attributes.push(KeyValue::new("gen_ai.request.model", model.to_owned()));
        }
        if let Some(id) = start.id {
            attributes.push(KeyValue::new("moat.run.id", id.to_owned()));
        }
        if let Some(parent) = start.parent {
            attributes.push(KeyValue::new("moat.run.parent_id", parent.to_owned()));
        }
        let span = telemetry
            .tracer
            .span_builder(format!("invoke_agent {}", start.adapter))
            .with_kind(if start.submitted {
                SpanKind::Client
            } else {
                SpanKind::Internal
            })
            .with_attributes(attributes)
            .start_with_context(&telemetry.tracer, &parent_context);
        let own = span.span_context().clone();
        if let Some(id) = start.id
            && let Ok(mut live) = telemetry.live.lock()
        {
            live.insert(id.to_owned(), own.clone());
        }
        Self {
            span,
            context: Context::new().with_remote_span_context(own),
            id: start.id.map(str::to_owned),
            model: start.model.map(str::to_owned),
            tools: HashMap::new(),
            step: SystemTime::now(),
            last_error: None,
            metered: false,
            ended: false,
        }
    }

    /// The run's span context.
    pub fn span_context(&self) -> &SpanContext {
        self.span.span_context()
    }

    /// The run's span as a `traceparent`, for a job that carries it.
    pub fn traceparent(&self) -> String {
        crate::traceparent(self.span.span_context())
    }

    /// Records what `event` says about the run.
    pub fn observe(&mut self, event: &AgentEvent) {
        if self.ended {
            return;
        }
        match &event.payload {
            EventPayload::Init(init) => {
                if let Some(model) = &init.model {
                    if self.model.is_none() {
                        self.span
                            .set_attribute(KeyValue::new("gen_ai.request.model", model.clone()));
                    }
                    self.span
                        .set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
                    self.model = Some(model.clone());
                }
            }
            EventPayload::ToolUse(tool) => {
                let telemetry = installed().expect("a run tracer exists once installed");
                let span = telemetry
                    .tracer
                    .span_builder(format!("execute_tool {}", tool.tool_name))
                    .with_kind(SpanKind::Internal)
                    .with_attributes([
                        KeyValue::new("gen_ai.operation.name", "execute_tool"),
                        KeyValue::new("gen_ai.tool.name", tool.tool_name.clone()),
                        KeyValue::new("gen_ai.tool.call.id", tool.tool_use_id.clone()),
                    ])
                    .start_with_context(&telemetry.tracer, &self.context);
                if let Some(mut earlier) = self.tools.insert(tool.tool_use_id.clone(), span) {
                    earlier.set_status(Status::error("the same tool call began again"));
                    earlier.end();
                }
            }
            EventPayload::ToolResult(result) => {
                if let Some(mut span) = self.tools.remove(&result.tool_use_id) {
                    span.set_attribute(KeyValue::new("moat.tool.status", result.status.as_str()));
                    span.set_status(match result.status {
                        ToolStatus::Success => Status::Ok,
                        ToolStatus::Error => Status::error(summary(&result.output).into_owned()),
                        ToolStatus::Denied => Status::error("denied"),
                    });
                    span.end();
                }
                self.step = SystemTime::now();
            }
            EventPayload::Extension(extension) if extension.name == USAGE_EVENT => {
                let metered = extension.payload["source"] == METERED_SOURCE;
                self.metered |= metered;
                if metered || !self.metered {
                    self.model_call(&extension.payload);
                }
            }
            EventPayload::Extension(extension) if extension.name == TRAFFIC_EVENT => {
                self.span
                    .add_event("moat.traffic", traffic_attributes(&extension.payload));
            }
            EventPayload::Error(error) => {
                let mut attributes = vec![
                    KeyValue::new("exception.message", error.message.clone()),
                    KeyValue::new("moat.error.recoverable", error.recoverable),
                ];
                if let Some(code) = &error.code {
                    attributes.push(KeyValue::new("exception.type", code.clone()));
                }
                self.span.add_event("exception", attributes);
                self.last_error = Some(error.message.clone());
            }
            EventPayload::PermissionRequest(request) => {
                self.span.add_event(
                    "moat.permission_request",
                    vec![KeyValue::new("gen_ai.tool.name", request.tool_name.clone())],
                );
            }
            EventPayload::Done(done) => {
                let status = done.status.as_str();
                self.span
                    .set_attribute(KeyValue::new("moat.done.status", status));
                self.span.set_attribute(KeyValue::new(
                    "moat.usage.tool_uses",
                    i64::from(done.usage.tool_uses),
                ));
                if let Some(tokens) = &done.usage.tokens {
                    self.span.set_attribute(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        as_i64(tokens.input.total),
                    ));
                    self.span.set_attribute(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        as_i64(tokens.output.total),
                    ));
                }
                if let Some(cost) = &done.usage.cost {
                    self.span
                        .set_attribute(KeyValue::new("moat.cost.usd", cost.usd));
                }
                match done.status {
                    DoneStatus::Success => self.span.set_status(Status::Ok),
                    DoneStatus::Interrupted => {}
                    DoneStatus::Error | DoneStatus::MaxTurns | DoneStatus::MaxBudget => {
                        let why = self
                            .last_error
                            .clone()
                            .unwrap_or_else(|| format!("the run ended {status}"));
                        self.span.set_status(Status::error(why));
                    }
                }
                self.end();
            }
            _ => {}
        }
    }

    /// Sets an attribute on the run's span.
    pub fn set_attribute(&mut self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.span.set_attribute(KeyValue::new(key, value));
    }

    /// Ends the span of a run that has no events of its own (a workflow's
    /// record, its tasks' parent): `status` as a `done` says it
    /// (`success`, `error`, …), `error` why it failed.
    pub fn finish(mut self, status: &str, error: Option<&str>) {
        self.span
            .set_attribute(KeyValue::new("moat.done.status", status.to_owned()));
        match error {
            Some(error) => self.span.set_status(Status::error(error.to_owned())),
            None if status == "success" => self.span.set_status(Status::Ok),
            None => {}
        }
        self.end();
    }

    /// A `chat {model}` span for one model call's usage, from the end of
    /// the run's previous step to now.
    fn model_call(&mut self, usage: &serde_json::Value) {
        let telemetry = installed().expect("a run tracer exists once installed");
        let model = usage["model"]
            .as_str()
            .or(self.model.as_deref())
            .unwrap_or(UNKNOWN_MODEL)
            .to_owned();
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", model.clone()),
        ];
        if let Some(source) = usage["source"].as_str() {
            attributes.push(KeyValue::new("moat.usage.source", source.to_owned()));
        }
        if let Some(input) = usage["inputTokens"].as_u64() {
            attributes.push(KeyValue::new("gen_ai.usage.input_tokens", as_i64(input)));
        }
        if let Some(output) = usage["outputTokens"].as_u64() {
            attributes.push(KeyValue::new("gen_ai.usage.output_tokens", as_i64(output)));
        }
        if let Some(usd) = usage["costUsd"].as_f64().filter(|usd| usd.is_finite()) {
            attributes.push(KeyValue::new("moat.cost.usd", usd));
        }
        let mut span = telemetry
            .tracer
            .span_builder(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_start_time(self.step)
            .with_attributes(attributes)
            .start_with_context(&telemetry.tracer, &self.context);
        span.end();
        self.step = SystemTime::now();
    }

    /// Ends the run's span and what is still open under it.
    fn end(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        for (_, mut tool) in self.tools.drain() {
            tool.set_status(Status::error("the run ended before the tool's result"));
            tool.end();
        }
        self.span.end();
        if let (Some(id), Some(telemetry)) = (&self.id, installed())
            && let Ok(mut live) = telemetry.live.lock()
            && live
                .get(id)
                .is_some_and(|own| own == self.span.span_context())
        {
            live.remove(id);
        }
    }
}

impl Drop for RunTracer {
    fn drop(&mut self) {
        if !self.ended {
            self.span
                .set_attribute(KeyValue::new("moat.done.status", "unobserved"));
        }
        self.end();
    }
}

/// A tool's output, short enough for a status message.
fn summary(output: &serde_json::Value) -> Cow<'_, str> {
    let text: Cow<'_, str> = match output {
        serde_json::Value::String(text) => Cow::Borrowed(text),
        other => Cow::Owned(other.to_string()),
    };
    match text.char_indices().nth(200) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
        None => text,
    }
}

fn as_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `moat:traffic` row as a span event's attributes: its strings and
/// numbers as they are, its usage as the GenAI conventions name it.
fn traffic_attributes(row: &serde_json::Value) -> Vec<KeyValue> {
    let mut attributes = Vec::new();
    let Some(fields) = row.as_object() else {
        return attributes;
    };
    for (name, value) in fields {
        let key = format!("moat.traffic.{name}");
        match value {
            serde_json::Value::String(text) => attributes.push(KeyValue::new(key, text.clone())),
            serde_json::Value::Number(n) => {
                if let Some(n) = n.as_u64() {
                    attributes.push(KeyValue::new(key, as_i64(n)));
                }
            }
            serde_json::Value::Bool(b) => attributes.push(KeyValue::new(key, *b)),
            serde_json::Value::Object(_) if name == "usage" => {
                for (field, attribute) in [
                    ("inputTokens", "gen_ai.usage.input_tokens"),
                    ("outputTokens", "gen_ai.usage.output_tokens"),
                ] {
                    if let Some(n) = value[field].as_u64() {
                        attributes.push(KeyValue::new(attribute, as_i64(n)));
                    }
                }
            }
            // The overflow's counts per destination, as one string.
            other => attributes.push(KeyValue::new(key, other.to_string())),
        }
    }
    attributes
}
