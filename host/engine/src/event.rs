//! The Unified Event Stream as consumers see it (docs/architecture.md).
//!
//! One [`AgentEvent`] serializes to one JSON object with the field names of
//! the reference TypeScript implementation, so its consumers read moat
//! output unchanged:
//!
//! ```text
//! {"type":"text","agent":"echo","timestamp":1763769600123,
//!  "sessionId":"…","payload":{"content":"Hello"}}
//! ```
//!
//! Optional fields are left out when absent, never written as `null`.
//! Token usage is authentic or absent: nothing here fills in a number an
//! adapter did not report.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object, as carried by tool inputs, capabilities and metadata.
pub type JsonObject = Map<String, Value>;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoneStatus {
    /// The run did what was asked.
    Success,
    /// The run failed.
    Error,
    /// The run was stopped by an abort.
    Interrupted,
    /// The run stopped at its turn limit.
    MaxTurns,
    /// The run stopped at its budget.
    MaxBudget,
}

impl DoneStatus {
    /// Its name in the event stream (`max_turns`), as it is serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
            Self::MaxTurns => "max_turns",
            Self::MaxBudget => "max_budget",
        }
    }
}

/// The extension event an adapter reports one model call's usage with, as
/// it happens: `{"inputTokens": N, "outputTokens": N, "costUsd": X?}`.
/// The run's `done` still reports the whole run's.
pub const USAGE_EVENT: &str = "moat:usage";

/// A `moat:usage` event's `source` when moat read the call's usage from
/// the answer it carried; the adapter's own are marked
/// [`REPORTED_SOURCE`] (whatever they claimed).
pub const METERED_SOURCE: &str = "metered";

/// A `moat:usage` event's `source` when the adapter reported it.
pub const REPORTED_SOURCE: &str = "reported";

/// The extension event moat records one request or connection of a run
/// with (never an adapter's: one it sends is dropped): who made it,
/// where, the rule that allowed it or why it was refused, its status,
/// bytes and time, and for a model call its usage as read. The last
/// before the `done` may instead count, per destination, what the run did
/// past the rows kept (`{"overflow": {...}}`).
pub const TRAFFIC_EVENT: &str = "moat:traffic";

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The call succeeded.
    Success,
    /// The call failed.
    Error,
    /// The call was not allowed.
    Denied,
}

impl ToolStatus {
    /// Its name in the event stream, as it is serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Denied => "denied",
        }
    }
}

/// Whether a token report covers the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCoverage {
    /// Every model call of the run is counted.
    Complete,
    /// Some model calls are missing (e.g. the stream was cut).
    Partial,
}

/// Input token counts; `total` includes the cache details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputTokens {
    /// All input tokens, cache reads and writes included.
    pub total: u64,
    /// Tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<u64>,
    /// Tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
}

/// Output token counts; `total` includes the reasoning detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputTokens {
    /// All output tokens, reasoning included.
    pub total: u64,
    /// Tokens spent on reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
}

/// Token usage exactly as the backend reported it. On the wire it is
/// cligent's `TokenUsageReport` (`{coverage, totals: {input, output}}`);
/// the earlier `{coverage, input, output}` is still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "TokenReportOut", from = "TokenReportIn")]
pub struct TokenReport {
    /// Whether every model call is counted.
    pub coverage: TokenCoverage,
    /// Input tokens.
    pub input: InputTokens,
    /// Output tokens.
    pub output: OutputTokens,
}

/// Inclusive totals, cligent's `TokenUsage`.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct TokenTotals {
    input: InputTokens,
    output: OutputTokens,
}

#[derive(Serialize)]
struct TokenReportOut {
    coverage: TokenCoverage,
    totals: TokenTotals,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TokenReportIn {
    Current {
        coverage: TokenCoverage,
        totals: TokenTotals,
    },
    Earlier {
        coverage: TokenCoverage,
        input: InputTokens,
        output: OutputTokens,
    },
}

impl From<TokenReport> for TokenReportOut {
    fn from(report: TokenReport) -> Self {
        TokenReportOut {
            coverage: report.coverage,
            totals: TokenTotals {
                input: report.input,
                output: report.output,
            },
        }
    }
}

impl From<TokenReportIn> for TokenReport {
    fn from(wire: TokenReportIn) -> Self {
        match wire {
            TokenReportIn::Current { coverage, totals } => TokenReport {
                coverage,
                input: totals.input,
                output: totals.output,
            },
            TokenReportIn::Earlier {
                coverage,
                input,
                output,
            } => TokenReport {
                coverage,
                input,
                output,
            },
        }
    }
}

/// Where a cost figure comes from, in cligent's words (DR-014). Earlier
/// moat names (`vendor`, `agent_estimate`, `adapter_estimate`,
/// `price_table`) are still read, so runs recorded before keep loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// The vendor billed or reported this amount.
    #[serde(alias = "vendor")]
    ProviderReported,
    /// The agent estimated it: the CLI from its own prices, or the adapter
    /// from its price table.
    #[serde(alias = "agent_estimate", alias = "adapter_estimate")]
    AgentEstimate,
    /// The host computed it from the price table the user supplied — the
    /// prices of their account (`moat_engine::price`).
    #[serde(alias = "price_table")]
    AccountEstimate,
}

/// The money a run cost, in US dollars. On the wire it is cligent's
/// `{amount, currency: "USD", source}`; the earlier `{usd, source}` is
/// still read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(into = "CostWire", try_from = "CostWire")]
pub struct Cost {
    /// The amount, in US dollars.
    pub usd: f64,
    /// Where the figure comes from.
    pub source: CostSource,
}

/// The only currency a cost is given in.
const USD: &str = "USD";

#[derive(Serialize, Deserialize)]
struct CostWire {
    #[serde(alias = "usd")]
    amount: f64,
    #[serde(default)]
    currency: Option<String>,
    source: CostSource,
}

impl From<Cost> for CostWire {
    fn from(cost: Cost) -> Self {
        CostWire {
            amount: cost.usd,
            currency: Some(USD.to_owned()),
            source: cost.source,
        }
    }
}

impl TryFrom<CostWire> for Cost {
    type Error = String;

    fn try_from(wire: CostWire) -> Result<Self, String> {
        match wire.currency.as_deref() {
            None | Some(USD) => Ok(Cost {
                usd: wire.amount,
                source: wire.source,
            }),
            Some(other) => Err(format!("a cost in `{other}`: costs are in USD")),
        }
    }
}

/// What a run used. `tokens` and `cost` are absent when unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Distinct tool calls in the run.
    pub tool_uses: u32,
    /// Tokens as the backend reported them; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenReport>,
    /// What the run cost; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

impl Usage {
    /// Adds `more` (another run's usage: a workflow's attempts, a tree of
    /// runs) to this one. Tool uses and token figures add up; a token
    /// detail stays only where both sides report it, and the sum covers
    /// every call only when both did; a report on one side alone is kept
    /// as it is (a run without one, like `echo`, called no model it
    /// reports). Costs add up, and the sum is only as authoritative as
    /// its weakest part.
    pub fn add(&mut self, more: &Usage) {
        self.tool_uses = self.tool_uses.saturating_add(more.tool_uses);
        self.tokens = match (self.tokens, more.tokens) {
            (Some(a), Some(b)) => Some(a.plus(&b)),
            (a, b) => a.or(b),
        };
        self.cost = match (self.cost, more.cost) {
            (Some(a), Some(b)) => Some(Cost {
                usd: a.usd + b.usd,
                source: a.source.weaker(b.source),
            }),
            (a, b) => a.or(b),
        };
    }
}

impl TokenReport {
    /// Both reports' tokens together.
    fn plus(&self, more: &TokenReport) -> TokenReport {
        fn both(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            Some(a?.saturating_add(b?))
        }
        TokenReport {
            coverage: match (self.coverage, more.coverage) {
                (TokenCoverage::Complete, TokenCoverage::Complete) => TokenCoverage::Complete,
                _ => TokenCoverage::Partial,
            },
            input: InputTokens {
                total: self.input.total.saturating_add(more.input.total),
                cache_read: both(self.input.cache_read, more.input.cache_read),
                cache_write: both(self.input.cache_write, more.input.cache_write),
            },
            output: OutputTokens {
                total: self.output.total.saturating_add(more.output.total),
                reasoning: both(self.output.reasoning, more.output.reasoning),
            },
        }
    }
}

impl CostSource {
    /// The less authoritative of two sources: what a vendor reported, then
    /// the user's own prices, then an agent's estimate.
    fn weaker(self, other: CostSource) -> CostSource {
        let rank = |source| match source {
            CostSource::ProviderReported => 0,
            CostSource::AccountEstimate => 1,
            CostSource::AgentEstimate => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// `init`: the session has started.
///
/// The engine fills `model` and `cwd` when the adapter leaves them out
/// (cligent's `InitPayload` requires both), and the host sets `run_id` and
/// `containment`: those two are moat's additions to cligent's shape, so on
/// the wire they are the init event's `metadata` (`runId`,
/// `containment`), not part of its payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitPayload {
    /// The model the backend uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The backend's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Tools the backend offers in this session.
    pub tools: Vec<String>,
    /// What the backend can do, as it describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<JsonObject>,
    /// How the programs the run starts are contained (`namespaces`,
    /// `landlock+seccomp`, `off`…), set by the host, never by the adapter;
    /// absent for a run that may start no program. Read from the payload
    /// too, where moat wrote it before.
    #[serde(default, skip_serializing)]
    pub containment: Option<String>,
    /// The run's id in the run store, set by the host, never by the
    /// adapter; absent for a run recorded nowhere.
    #[serde(skip)]
    pub run_id: Option<String>,
}

/// `text`: a complete piece of assistant text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPayload {
    /// The text.
    pub content: String,
}

/// `text_delta`: a streamed fragment of assistant text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextDeltaPayload {
    /// The fragment.
    pub delta: String,
}

/// `thinking`: a summary of the agent's reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingPayload {
    /// The summary.
    pub summary: String,
}

/// `tool_use`: the agent calls a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUsePayload {
    /// The tool's name.
    pub tool_name: String,
    /// The call's id, which its result refers to.
    pub tool_use_id: String,
    /// The call's arguments.
    pub input: JsonObject,
    /// A short description of the call for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `tool_result`: a tool call finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultPayload {
    /// The id of the call it answers.
    pub tool_use_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Whether the call succeeded, failed or was denied.
    pub status: ToolStatus,
    /// Any JSON value (a string for plain text).
    #[serde(default)]
    pub output: Value,
    /// How long the call took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `error`: something went wrong; `recoverable` says whether the run goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorPayload {
    /// A machine-readable code, e.g. `TIMEOUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What went wrong, for people.
    pub message: String,
    /// Whether the run goes on after it.
    pub recoverable: bool,
}

/// `permission_request`: the agent asks to use a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequestPayload {
    /// The tool's name.
    pub tool_name: String,
    /// The call's id.
    pub tool_use_id: String,
    /// The call's arguments.
    pub input: JsonObject,
    /// Why the agent asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The request's number in its run, when moat holds it open for an
    /// answer (`moat approve RUN N`); absent for a request an adapter only
    /// reports (its backend asked and answered on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What is asked for, when moat holds it open: `tool`, or the grant
    /// kind (`net`, `run`, `read`, `write`, `secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `done`: the run is over. Exactly one per run; nothing follows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DonePayload {
    /// How the run ended.
    pub status: DoneStatus,
    /// The final answer, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Token to continue this session later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// What the run used, authentic or absent.
    pub usage: Usage,
    /// How long the run took, in milliseconds.
    pub duration_ms: u64,
    /// Backend-specific details: on the wire, the done event's `metadata`
    /// (cligent's place for them); read from the payload too, where moat
    /// wrote them before.
    #[serde(default, skip_serializing)]
    pub metadata: Option<JsonObject>,
}

/// A namespaced `vendor:name` event; its type is its name.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionPayload {
    /// `"vendor:name"`, e.g. `"codex:file_change"`.
    pub name: String,
    /// Any JSON value.
    pub payload: Value,
}

/// The typed content of an event; the variant decides the `type` field.
///
/// The payloads that come once or a few times a run (`init`, tool calls
/// and results, permission requests, errors, extensions, `done`) are
/// boxed, leaving the streamed text ones inline: an event is
/// moved several times on its way to the consumer, and the size of the
/// largest variant is what every move of every event copies (a `done`
/// inline made each `text_delta` 272 bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    /// `init`.
    Init(Box<InitPayload>),
    /// `text`.
    Text(TextPayload),
    /// `text_delta`.
    TextDelta(TextDeltaPayload),
    /// `thinking`.
    Thinking(ThinkingPayload),
    /// `tool_use`.
    ToolUse(Box<ToolUsePayload>),
    /// `tool_result`.
    ToolResult(Box<ToolResultPayload>),
    /// `error`.
    Error(Box<ErrorPayload>),
    /// `permission_request`.
    PermissionRequest(Box<PermissionRequestPayload>),
    /// `done`.
    Done(Box<DonePayload>),
    /// A `vendor:name` extension event.
    Extension(Box<ExtensionPayload>),
}

/// The `type` strings of the built-in events, which no extension may take.
pub const BUILT_IN_TYPES: [&str; 9] = [
    "init",
    "text",
    "text_delta",
    "thinking",
    "tool_use",
    "tool_result",
    "error",
    "permission_request",
    "done",
];

/// Whether `name` is a valid extension event type: `vendor:name`, both parts
/// non-empty, no whitespace or control characters, not a built-in type.
pub fn is_extension_name(name: &str) -> bool {
    let Some((vendor, rest)) = name.split_once(':') else {
        return false;
    };
    !vendor.is_empty()
        && !rest.is_empty()
        && !name.chars().any(|c| c.is_whitespace() || c.is_control())
        && !BUILT_IN_TYPES.contains(&name)
}

impl EventPayload {
    /// The event's `type` string.
    pub fn type_name(&self) -> &str {
        match self {
            EventPayload::Init(_) => "init",
            EventPayload::Text(_) => "text",
            EventPayload::TextDelta(_) => "text_delta",
            EventPayload::Thinking(_) => "thinking",
            EventPayload::ToolUse(_) => "tool_use",
            EventPayload::ToolResult(_) => "tool_result",
            EventPayload::Error(_) => "error",
            EventPayload::PermissionRequest(_) => "permission_request",
            EventPayload::Done(_) => "done",
            EventPayload::Extension(ext) => &ext.name,
        }
    }

    /// A `text` payload.
    pub fn text(content: impl Into<String>) -> Self {
        EventPayload::Text(TextPayload {
            content: content.into(),
        })
    }

    /// A `text_delta` payload.
    pub fn text_delta(delta: impl Into<String>) -> Self {
        EventPayload::TextDelta(TextDeltaPayload {
            delta: delta.into(),
        })
    }

    /// An `error` payload with a code.
    pub fn error(code: impl Into<String>, message: impl Into<String>, recoverable: bool) -> Self {
        EventPayload::Error(Box::new(ErrorPayload {
            code: Some(code.into()),
            message: message.into(),
            recoverable,
        }))
    }

    /// Rebuilds a payload from its `type` string and its JSON body, checking
    /// what the types alone do not (non-empty ids, extension names).
    fn from_parts(kind: &str, body: impl PayloadIn) -> Result<Self, String> {
        fn body_of<T: serde::de::DeserializeOwned>(
            kind: &str,
            body: impl PayloadIn,
        ) -> Result<T, String> {
            body.typed().map_err(|e| {
                // A position inside the payload's own text would mislead
                // (it is not the event's): the words alone, as a `Value`
                // gives them.
                let words = e.to_string();
                let position = format!(" at line {} column {}", e.line(), e.column());
                let words = words.strip_suffix(&position).unwrap_or(&words);
                format!("invalid `{kind}` payload: {words}")
            })
        }
        fn non_empty(kind: &str, field: &str, value: &str) -> Result<(), String> {
            if value.is_empty() {
                Err(format!("invalid `{kind}` payload: `{field}` is empty"))
            } else {
                Ok(())
            }
        }
        Ok(match kind {
            "init" => EventPayload::Init(body_of(kind, body)?),
            "text" => EventPayload::Text(body_of(kind, body)?),
            "text_delta" => EventPayload::TextDelta(body_of(kind, body)?),
            "thinking" => EventPayload::Thinking(body_of(kind, body)?),
            "tool_use" => {
                let p: ToolUsePayload = body_of(kind, body)?;
                non_empty(kind, "toolUseId", &p.tool_use_id)?;
                EventPayload::ToolUse(Box::new(p))
            }
            "tool_result" => {
                let p: ToolResultPayload = body_of(kind, body)?;
                non_empty(kind, "toolUseId", &p.tool_use_id)?;
                EventPayload::ToolResult(Box::new(p))
            }
            "error" => EventPayload::Error(body_of(kind, body)?),
            "permission_request" => {
                let p: PermissionRequestPayload = body_of(kind, body)?;
                non_empty(kind, "toolUseId", &p.tool_use_id)?;
                EventPayload::PermissionRequest(Box::new(p))
            }
            "done" => EventPayload::Done(body_of(kind, body)?),
            name if is_extension_name(name) => {
                EventPayload::Extension(Box::new(ExtensionPayload {
                    name: name.to_owned(),
                    payload: body
                        .into_value()
                        .map_err(|e| format!("invalid `{name}` payload: {e}"))?,
                }))
            }
            other => return Err(format!("unknown event type `{other}`")),
        })
    }
}

/// Serializes only the body that goes under `"payload"`.
struct PayloadBody<'a>(&'a EventPayload);

impl Serialize for PayloadBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            EventPayload::Init(p) => p.serialize(s),
            EventPayload::Text(p) => p.serialize(s),
            EventPayload::TextDelta(p) => p.serialize(s),
            EventPayload::Thinking(p) => p.serialize(s),
            EventPayload::ToolUse(p) => p.serialize(s),
            EventPayload::ToolResult(p) => p.serialize(s),
            EventPayload::Error(p) => p.serialize(s),
            EventPayload::PermissionRequest(p) => p.serialize(s),
            EventPayload::Done(p) => p.serialize(s),
            EventPayload::Extension(p) => p.payload.serialize(s),
        }
    }
}

/// One event of the Unified Event Stream.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEvent {
    /// The adapter's registered name.
    pub agent: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// The session id: the backend's, or a fresh one the engine made.
    pub session_id: String,
    /// The task's role in a parallel run; absent for a single run.
    pub role: Option<String>,
    /// What happened.
    pub payload: EventPayload,
}

/// The wire shape, borrowed, for serializing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireOut<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    agent: &'a str,
    timestamp: u64,
    session_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<MetadataOut<'a>>,
    payload: PayloadBody<'a>,
}

/// An event's `metadata`: the host's facts about the run on `init`, the
/// adapter's details on `done`.
#[derive(Serialize)]
#[serde(untagged)]
enum MetadataOut<'a> {
    Init(InitMetadata<'a>),
    Done(&'a JsonObject),
}

/// The metadata keys of an `init` event.
const RUN_ID_KEY: &str = "runId";
const CONTAINMENT_KEY: &str = "containment";

#[derive(Serialize)]
struct InitMetadata<'a> {
    #[serde(rename = "runId", skip_serializing_if = "Option::is_none")]
    run_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    containment: Option<&'a str>,
}

impl EventPayload {
    /// What goes into the event's `metadata`, if anything.
    fn metadata(&self) -> Option<MetadataOut<'_>> {
        match self {
            EventPayload::Init(init) if init.run_id.is_some() || init.containment.is_some() => {
                Some(MetadataOut::Init(InitMetadata {
                    run_id: init.run_id.as_deref(),
                    containment: init.containment.as_deref(),
                }))
            }
            EventPayload::Done(done) => done.metadata.as_ref().map(MetadataOut::Done),
            _ => None,
        }
    }

    /// Takes an event's `metadata` back into the payload it belongs to;
    /// other events have none (moat writes none on them), and what a
    /// foreign one carries is left out.
    fn take_metadata(&mut self, metadata: JsonObject) {
        match self {
            EventPayload::Init(init) => {
                let text = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_owned);
                init.run_id = text(RUN_ID_KEY).or(init.run_id.take());
                init.containment = text(CONTAINMENT_KEY).or(init.containment.take());
            }
            EventPayload::Done(done) => done.metadata = Some(metadata),
            _ => {}
        }
    }
}

/// The wire shape, for parsing; the payload is typed afterwards by `type`
/// from `B`: a [`Value`] from any deserializer, or the payload's JSON text
/// when parsing JSON text ([`AgentEvent::from_json`]), typed straight from
/// it rather than built as a `Value` first.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireIn<B> {
    #[serde(rename = "type")]
    kind: String,
    agent: String,
    timestamp: u64,
    session_id: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    metadata: Option<JsonObject>,
    #[serde(default)]
    payload: B,
}

impl<B: PayloadIn> WireIn<B> {
    /// The event, its payload typed and checked.
    fn into_event(self) -> Result<AgentEvent, String> {
        let mut payload = EventPayload::from_parts(&self.kind, self.payload)?;
        if let Some(metadata) = self.metadata {
            payload.take_metadata(metadata);
        }
        Ok(AgentEvent {
            agent: self.agent,
            timestamp: self.timestamp,
            session_id: self.session_id,
            role: self.role,
            payload,
        })
    }
}

/// A payload's body as parsed before its type is known.
trait PayloadIn {
    /// The body as the payload type `T`.
    fn typed<T: serde::de::DeserializeOwned>(self) -> Result<T, serde_json::Error>;
    /// The body as JSON (an extension's payload).
    fn into_value(self) -> Result<Value, serde_json::Error>;
}

impl PayloadIn for Value {
    fn typed<T: serde::de::DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self)
    }
    fn into_value(self) -> Result<Value, serde_json::Error> {
        Ok(self)
    }
}

/// The payload's JSON text (`None`: missing or `null`).
impl PayloadIn for Option<&serde_json::value::RawValue> {
    fn typed<T: serde::de::DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.map_or("null", |raw| raw.get()))
    }
    fn into_value(self) -> Result<Value, serde_json::Error> {
        self.map_or(Ok(Value::Null), |raw| serde_json::from_str(raw.get()))
    }
}

impl Serialize for AgentEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireOut {
            kind: self.payload.type_name(),
            agent: &self.agent,
            timestamp: self.timestamp,
            session_id: &self.session_id,
            role: self.role.as_deref(),
            metadata: self.payload.metadata(),
            payload: PayloadBody(&self.payload),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        WireIn::<Value>::deserialize(d)?
            .into_event()
            .map_err(D::Error::custom)
    }
}

/// The wire shape of [`AgentEvent::from_json`], its payload borrowed as
/// text.
#[derive(Deserialize)]
struct WireInText<'a>(#[serde(borrow)] WireIn<Option<&'a serde_json::value::RawValue>>);

impl AgentEvent {
    /// Parses one event's JSON text, as deserializing it does (the same
    /// checks, the same errors) and faster: the payload is typed straight
    /// from its text once `type` is read. For readers of many stored
    /// events (a cluster run's followers).
    pub fn from_json(json: &[u8]) -> Result<Self, serde_json::Error> {
        let WireInText(wire) = serde_json::from_slice(json)?;
        wire.into_event().map_err(serde_json::Error::custom)
    }

    /// An event the host itself makes for a run of `agent` (an error it
    /// saw, a `done` it synthesized): stamped now, with a fresh session id.
    pub fn by_host(agent: impl Into<String>, payload: EventPayload) -> Self {
        Self {
            agent: agent.into(),
            timestamp: now_ms(),
            session_id: new_session_id(),
            role: None,
            payload,
        }
    }

    /// The event's `type` string.
    pub fn type_name(&self) -> &str {
        self.payload.type_name()
    }

    /// Whether this is the terminal `done`.
    pub fn is_done(&self) -> bool {
        matches!(self.payload, EventPayload::Done(_))
    }

    /// Whether this is an `error`.
    pub fn is_error(&self) -> bool {
        matches!(self.payload, EventPayload::Error(_))
    }

    /// The `done` payload, if this is a `done`.
    pub fn as_done(&self) -> Option<&DonePayload> {
        match &self.payload {
            EventPayload::Done(done) => Some(done),
            _ => None,
        }
    }

    /// The `error` payload, if this is an `error`.
    pub fn as_error(&self) -> Option<&ErrorPayload> {
        match &self.payload {
            EventPayload::Error(error) => Some(error),
            _ => None,
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    // A clock before 1970 is a broken clock; 0 is as good an answer as any.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh, unique session id (a UUID v4).
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// An event stamped now, with `session_id` or a fresh one (ENG-002).
pub fn create_event(agent: &str, payload: EventPayload, session_id: Option<&str>) -> AgentEvent {
    AgentEvent {
        agent: agent.to_owned(),
        timestamp: now_ms(),
        session_id: session_id.map_or_else(new_session_id, str::to_owned),
        role: None,
        payload,
    }
}

/// Parses and validates a JSON value as an event (ENG-002).
pub fn parse_event(value: &Value) -> Result<AgentEvent, serde_json::Error> {
    AgentEvent::deserialize(value)
}

/// Whether a JSON value is a well-formed event (ENG-002).
pub fn is_agent_event(value: &Value) -> bool {
    parse_event(value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_their_serialised_names() {
        use DoneStatus::*;
        for status in [Success, Error, Interrupted, MaxTurns, MaxBudget] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for status in [ToolStatus::Success, ToolStatus::Error, ToolStatus::Denied] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }
    use serde_json::json;

    const SID: &str = "s-1";

    fn event(payload: EventPayload) -> AgentEvent {
        AgentEvent {
            agent: "echo".into(),
            timestamp: 1_763_769_600_123,
            session_id: SID.into(),
            role: None,
            payload,
        }
    }

    /// The exact JSON text of an event with the fixed envelope above.
    fn wire(kind: &str, payload: &str) -> String {
        format!(
            r#"{{"type":"{kind}","agent":"echo","timestamp":1763769600123,"sessionId":"s-1","payload":{payload}}}"#
        )
    }

    /// The same, with the event's `metadata`.
    fn wire_with(kind: &str, metadata: &str, payload: &str) -> String {
        format!(
            r#"{{"type":"{kind}","agent":"echo","timestamp":1763769600123,"sessionId":"s-1","metadata":{metadata},"payload":{payload}}}"#
        )
    }

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn full_done() -> DonePayload {
        DonePayload {
            status: DoneStatus::MaxTurns,
            result: Some("ok".into()),
            resume_token: Some("r-1".into()),
            usage: Usage {
                tool_uses: 2,
                tokens: Some(TokenReport {
                    coverage: TokenCoverage::Partial,
                    input: InputTokens {
                        total: 100,
                        cache_read: Some(40),
                        cache_write: Some(10),
                    },
                    output: OutputTokens {
                        total: 50,
                        reasoning: Some(20),
                    },
                }),
                cost: Some(Cost {
                    usd: 0.25,
                    source: CostSource::AgentEstimate,
                }),
            },
            duration_ms: 1234,
            metadata: Some(object(json!({"stopReason": "end_turn"}))),
        }
    }

    /// Every kind of event, with and without its optional fields, beside
    /// its exact JSON.
    fn catalogue() -> Vec<(AgentEvent, String)> {
        vec![
            (
                event(EventPayload::Init(Box::new(InitPayload {
                    model: None,
                    cwd: None,
                    tools: vec![],
                    capabilities: None,
                    containment: None,
                    run_id: None,
                }))),
                wire("init", r#"{"tools":[]}"#),
            ),
            (
                event(EventPayload::Init(Box::new(InitPayload {
                    model: Some("m".into()),
                    cwd: Some("/w".into()),
                    tools: vec!["read".into(), "write".into()],
                    capabilities: Some(object(json!({"streaming": true}))),
                    containment: Some("namespaces".into()),
                    run_id: Some("r_1".into()),
                }))),
                wire_with(
                    "init",
                    r#"{"runId":"r_1","containment":"namespaces"}"#,
                    r#"{"model":"m","cwd":"/w","tools":["read","write"],"capabilities":{"streaming":true}}"#,
                ),
            ),
            (
                event(EventPayload::text("Hello")),
                wire("text", r#"{"content":"Hello"}"#),
            ),
            (
                event(EventPayload::text_delta("Hel")),
                wire("text_delta", r#"{"delta":"Hel"}"#),
            ),
            (
                event(EventPayload::Thinking(ThinkingPayload {
                    summary: "hmm".into(),
                })),
                wire("thinking", r#"{"summary":"hmm"}"#),
            ),
            (
                event(EventPayload::ToolUse(Box::new(ToolUsePayload {
                    tool_name: "read".into(),
                    tool_use_id: "t1".into(),
                    input: object(json!({"path": "a"})),
                    description: None,
                }))),
                wire(
                    "tool_use",
                    r#"{"toolName":"read","toolUseId":"t1","input":{"path":"a"}}"#,
                ),
            ),
            (
                event(EventPayload::ToolUse(Box::new(ToolUsePayload {
                    tool_name: "read".into(),
                    tool_use_id: "t1".into(),
                    input: JsonObject::new(),
                    description: Some("look".into()),
                }))),
                wire(
                    "tool_use",
                    r#"{"toolName":"read","toolUseId":"t1","input":{},"description":"look"}"#,
                ),
            ),
            (
                event(EventPayload::ToolResult(Box::new(ToolResultPayload {
                    tool_use_id: "t1".into(),
                    tool_name: "read".into(),
                    status: ToolStatus::Success,
                    output: json!("text"),
                    duration_ms: None,
                }))),
                wire(
                    "tool_result",
                    r#"{"toolUseId":"t1","toolName":"read","status":"success","output":"text"}"#,
                ),
            ),
            (
                event(EventPayload::ToolResult(Box::new(ToolResultPayload {
                    tool_use_id: "t1".into(),
                    tool_name: "read".into(),
                    status: ToolStatus::Denied,
                    output: json!([1, 2]),
                    duration_ms: Some(7),
                }))),
                wire(
                    "tool_result",
                    r#"{"toolUseId":"t1","toolName":"read","status":"denied","output":[1,2],"durationMs":7}"#,
                ),
            ),
            (
                event(EventPayload::Error(Box::new(ErrorPayload {
                    code: None,
                    message: "bad".into(),
                    recoverable: true,
                }))),
                wire("error", r#"{"message":"bad","recoverable":true}"#),
            ),
            (
                event(EventPayload::error("ADAPTER_ERROR", "boom", false)),
                wire(
                    "error",
                    r#"{"code":"ADAPTER_ERROR","message":"boom","recoverable":false}"#,
                ),
            ),
            (
                event(EventPayload::PermissionRequest(Box::new(
                    PermissionRequestPayload {
                        tool_name: "bash".into(),
                        tool_use_id: "t2".into(),
                        input: object(json!({"cmd": "ls"})),
                        reason: Some("needs shell".into()),
                        request_id: None,
                        kind: None,
                    },
                ))),
                wire(
                    "permission_request",
                    r#"{"toolName":"bash","toolUseId":"t2","input":{"cmd":"ls"},"reason":"needs shell"}"#,
                ),
            ),
            (
                event(EventPayload::Done(Box::new(DonePayload {
                    status: DoneStatus::Interrupted,
                    result: None,
                    resume_token: None,
                    usage: Usage::default(),
                    duration_ms: 5,
                    metadata: None,
                }))),
                wire(
                    "done",
                    r#"{"status":"interrupted","usage":{"toolUses":0},"durationMs":5}"#,
                ),
            ),
            (
                event(EventPayload::Done(Box::new(full_done()))),
                wire_with(
                    "done",
                    r#"{"stopReason":"end_turn"}"#,
                    concat!(
                        r#"{"status":"max_turns","result":"ok","resumeToken":"r-1","#,
                        r#""usage":{"toolUses":2,"tokens":{"coverage":"partial","totals":{"#,
                        r#""input":{"total":100,"cacheRead":40,"cacheWrite":10},"#,
                        r#""output":{"total":50,"reasoning":20}}},"#,
                        r#""cost":{"amount":0.25,"currency":"USD","source":"agent-estimate"}},"#,
                        r#""durationMs":1234}"#
                    ),
                ),
            ),
            (
                event(EventPayload::Extension(Box::new(ExtensionPayload {
                    name: "codex:file_change".into(),
                    payload: json!({"path": "a.rs"}),
                }))),
                wire("codex:file_change", r#"{"path":"a.rs"}"#),
            ),
            (
                event(EventPayload::Extension(Box::new(ExtensionPayload {
                    name: "x:y".into(),
                    payload: json!(3),
                }))),
                wire("x:y", "3"),
            ),
        ]
    }

    #[test]
    fn every_event_type_serializes_to_the_exact_wire_shape() {
        for (event, expected) in catalogue() {
            assert_eq!(serde_json::to_string(&event).unwrap(), expected);
        }
    }

    #[test]
    fn every_event_type_round_trips() {
        for (event, text) in catalogue() {
            let parsed: AgentEvent = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed, event, "{text}");
        }
    }

    /// `from_json` parses as deserializing does: every event type, events
    /// with metadata, extensions, a missing or `null` payload, and the
    /// same refusals with the same words.
    #[test]
    fn from_json_reads_what_deserializing_reads_and_refuses_what_it_refuses() {
        let parse =
            |text: &str| serde_json::from_str::<AgentEvent>(text).map_err(|e| e.to_string());
        let quick = |text: &str| AgentEvent::from_json(text.as_bytes()).map_err(|e| e.to_string());
        let mut texts: Vec<String> = catalogue().into_iter().map(|(_, text)| text).collect();
        texts.extend(
            [
                r#"{"type":"text","agent":"echo","timestamp":1,"sessionId":"s","metadata":{"a":1},"payload":{"content":"x"}}"#,
                r#"{"type":"x-moat:usage","agent":"echo","timestamp":1,"sessionId":"s"}"#,
                r#"{"type":"x-moat:usage","agent":"echo","timestamp":1,"sessionId":"s","payload":null}"#,
                r#"{"type":"text","agent":"echo","timestamp":1,"sessionId":"s"}"#,
                r#"{"type":"text","agent":"echo","timestamp":1,"sessionId":"s","payload":{"content":7}}"#,
                r#"{"type":"tool_use","agent":"e","timestamp":1,"sessionId":"s","payload":{"toolName":"t","toolUseId":"","input":{}}}"#,
                r#"{"type":"nope","agent":"echo","timestamp":1,"sessionId":"s","payload":{}}"#,
                r#"{"type":"text","agent":"echo","sessionId":"s","payload":{"content":"x"}}"#,
                r#"{"type":"text","agent":"echo","timestamp":1,"sessionId":"s","payload":{"content":"x"}"#,
                r#"[]"#,
            ]
            .map(str::to_owned),
        );
        for text in &texts {
            assert_eq!(quick(text), parse(text), "{text}");
        }
        assert!(
            quick(&texts[texts.len() - 6]).is_err(),
            "a wrongly typed payload"
        );
    }

    #[test]
    fn role_is_written_only_when_present() {
        let mut ev = event(EventPayload::text("x"));
        ev.role = Some("reviewer".into());
        assert_eq!(
            serde_json::to_string(&ev).unwrap(),
            r#"{"type":"text","agent":"echo","timestamp":1763769600123,"sessionId":"s-1","role":"reviewer","payload":{"content":"x"}}"#
        );
        let back: AgentEvent = serde_json::from_str(&serde_json::to_string(&ev).unwrap()).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn enum_values_are_snake_case() {
        fn s<T: Serialize>(value: T) -> String {
            serde_json::to_string(&value).unwrap()
        }
        assert_eq!(s(DoneStatus::MaxTurns), r#""max_turns""#);
        assert_eq!(s(DoneStatus::MaxBudget), r#""max_budget""#);
        assert_eq!(s(DoneStatus::Success), r#""success""#);
        assert_eq!(s(ToolStatus::Denied), r#""denied""#);
        assert_eq!(s(CostSource::AgentEstimate), r#""agent-estimate""#);
        assert_eq!(s(CostSource::ProviderReported), r#""provider-reported""#);
        assert_eq!(s(CostSource::AccountEstimate), r#""account-estimate""#);
        assert_eq!(s(TokenCoverage::Complete), r#""complete""#);
    }

    #[test]
    fn events_moat_wrote_before_in_its_earlier_shape_still_load() {
        let init = r#"{"type":"init","agent":"echo","timestamp":1,"sessionId":"s","payload":{"tools":[],"containment":"off"}}"#;
        let init: AgentEvent = serde_json::from_str(init).unwrap();
        let EventPayload::Init(init) = init.payload else {
            panic!("not an init");
        };
        assert_eq!(init.containment.as_deref(), Some("off"));
        let done = concat!(
            r#"{"type":"done","agent":"echo","timestamp":1,"sessionId":"s","payload":{"status":"max_turns","#,
            r#""result":"ok","resumeToken":"r-1","usage":{"toolUses":2,"tokens":{"coverage":"partial","#,
            r#""input":{"total":100,"cacheRead":40,"cacheWrite":10},"output":{"total":50,"reasoning":20}},"#,
            r#""cost":{"usd":0.25,"source":"agent_estimate"}},"durationMs":1234,"#,
            r#""metadata":{"stopReason":"end_turn"}}}"#
        );
        let done: AgentEvent = serde_json::from_str(done).unwrap();
        assert_eq!(done.as_done(), Some(&full_done()));
        for (old, new) in [
            ("vendor", CostSource::ProviderReported),
            ("adapter_estimate", CostSource::AgentEstimate),
            ("price_table", CostSource::AccountEstimate),
        ] {
            let source: CostSource = serde_json::from_value(json!(old)).unwrap();
            assert_eq!(source, new);
        }
    }

    #[test]
    fn a_cost_in_another_currency_is_refused() {
        let cost = serde_json::from_value::<Cost>(
            json!({"amount": 1.0, "currency": "EUR", "source": "agent-estimate"}),
        );
        assert!(cost.unwrap_err().to_string().contains("costs are in USD"));
    }

    #[test]
    fn metadata_on_other_events_is_left_out() {
        let text = r#"{"type":"text","agent":"echo","timestamp":1,"sessionId":"s","metadata":{"a":1},"payload":{"content":"x"}}"#;
        let parsed: AgentEvent = serde_json::from_str(text).unwrap();
        assert_eq!(parsed.payload, EventPayload::text("x"));
    }

    #[test]
    fn usages_add_up_and_a_sum_is_only_as_good_as_its_parts() {
        let mut total = Usage::default();
        total.add(&full_done().usage);
        assert_eq!(total, full_done().usage, "a sum of one is that one");
        let other = Usage {
            tool_uses: 1,
            tokens: Some(TokenReport {
                coverage: TokenCoverage::Complete,
                input: InputTokens {
                    total: 1,
                    cache_read: Some(1),
                    cache_write: None,
                },
                output: OutputTokens {
                    total: 2,
                    reasoning: None,
                },
            }),
            cost: Some(Cost {
                usd: 0.5,
                source: CostSource::ProviderReported,
            }),
        };
        total.add(&other);
        total.add(&Usage::default());
        let tokens = total.tokens.unwrap();
        assert_eq!(total.tool_uses, 3);
        assert_eq!(tokens.coverage, TokenCoverage::Partial);
        assert_eq!(
            (tokens.input.total, tokens.input.cache_read),
            (101, Some(41))
        );
        assert_eq!(tokens.input.cache_write, None, "reported on one side only");
        assert_eq!((tokens.output.total, tokens.output.reasoning), (52, None));
        let cost = total.cost.unwrap();
        assert_eq!((cost.usd, cost.source), (0.75, CostSource::AgentEstimate));
    }

    #[test]
    fn usage_leaves_out_unknown_tokens_and_cost() {
        assert_eq!(
            serde_json::to_string(&Usage::default()).unwrap(),
            r#"{"toolUses":0}"#
        );
    }

    #[test]
    fn eng_002_create_event_stamps_now_and_fills_a_session_id() {
        let before = now_ms();
        let ev = create_event("echo", EventPayload::text("hi"), None);
        let after = now_ms();
        assert!(before <= ev.timestamp && ev.timestamp <= after);
        assert_eq!(ev.agent, "echo");
        assert!(uuid::Uuid::parse_str(&ev.session_id).is_ok());
        let given = create_event("echo", EventPayload::text("hi"), Some("abc"));
        assert_eq!(given.session_id, "abc");
        assert_eq!(given.role, None);
    }

    #[test]
    fn eng_002_session_ids_are_unique_uuid_v4() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_session_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in ids.iter().take(10) {
            let uuid = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(uuid.get_version_num(), 4);
        }
    }

    #[test]
    fn eng_002_is_agent_event_accepts_well_formed_events() {
        for (_, text) in catalogue() {
            let value: Value = serde_json::from_str(&text).unwrap();
            assert!(is_agent_event(&value), "{text}");
        }
    }

    #[test]
    fn eng_002_is_agent_event_rejects_malformed_values() {
        let envelope = |kind: &str, payload: Value| json!({"type": kind, "agent": "a", "timestamp": 1, "sessionId": "s", "payload": payload});
        let bad = [
            json!("text"),
            json!({"type": "text", "agent": "a", "timestamp": 1, "payload": {"content": "x"}}),
            json!({"type": "text", "agent": "a", "timestamp": -1, "sessionId": "s", "payload": {"content": "x"}}),
            envelope("text", json!({})),
            envelope("text", json!({"content": 3})),
            envelope("nonsense", json!({})),
            envelope("vendor:", json!({})),
            envelope(":name", json!({})),
            envelope(
                "tool_use",
                json!({"toolName": "t", "toolUseId": "1", "input": [1]}),
            ),
            envelope(
                "tool_use",
                json!({"toolName": "t", "toolUseId": "", "input": {}}),
            ),
            envelope(
                "tool_result",
                json!({"toolName": "t", "toolUseId": "1", "status": "maybe", "output": 1}),
            ),
            envelope(
                "done",
                json!({"status": "success", "usage": {"toolUses": 0}}),
            ),
            envelope(
                "done",
                json!({"status": "finished", "usage": {"toolUses": 0}, "durationMs": 1}),
            ),
            envelope("error", json!({"message": "m"})),
        ];
        for value in bad {
            assert!(!is_agent_event(&value), "accepted {value}");
        }
    }

    #[test]
    fn extension_names_need_a_vendor_and_a_name() {
        assert!(is_extension_name("codex:file_change"));
        assert!(is_extension_name("a:b:c"));
        for bad in ["", "text", "done", ":x", "x:", "a b:c", "a:b\n", "nocolon"] {
            assert!(!is_extension_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn accessors_see_the_payload() {
        let done = event(EventPayload::Done(Box::new(full_done())));
        assert!(done.is_done());
        assert_eq!(done.type_name(), "done");
        assert_eq!(done.as_done().unwrap().status, DoneStatus::MaxTurns);
        assert!(done.as_error().is_none());
        let err = event(EventPayload::error("X", "m", true));
        assert!(err.is_error() && !err.is_done());
        assert_eq!(err.as_error().unwrap().code.as_deref(), Some("X"));
    }

    proptest::proptest! {
        #[test]
        fn any_text_round_trips(content in ".*", sid in "[a-z0-9-]{1,20}", ts in 0u64..u64::MAX) {
            let ev = AgentEvent {
                agent: "echo".into(),
                timestamp: ts,
                session_id: sid,
                role: None,
                payload: EventPayload::text(content),
            };
            let text = serde_json::to_string(&ev).unwrap();
            let back: AgentEvent = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(&AgentEvent::from_json(text.as_bytes()).unwrap(), &back);
            proptest::prop_assert_eq!(back, ev);
        }
    }
}
