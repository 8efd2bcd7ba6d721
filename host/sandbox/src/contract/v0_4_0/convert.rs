//! Conversions between contract 0.4.0's generated types and the engine's.
//! Older versions' modules convert with them too: their bindings return
//! these types (`types` is unchanged since 0.3.0, and 0.2.0's differs
//! only in `options`, which it makes from these).
//!
//! Only shapes change here; the engine validates the values.

use moat_engine::{
    AdapterEvent, AdapterEventKind, AdapterInfo, Cost, CostSource, DoneInfo, DoneStatus, ErrorInfo,
    InputTokens, OutputTokens, RunOptions, TokenCoverage, TokenReport, ToolStatus, Usage,
};
use moat_grants::{Needs, TrustLevel};

use super::moat::adapter::types as wit;

pub(in crate::contract) fn options(options: &RunOptions, trust: TrustLevel) -> wit::Options {
    wit::Options {
        cwd: options.cwd.clone(),
        model: options.model.clone(),
        max_turns: options.max_turns,
        max_budget_usd: options.max_budget_usd,
        effort: options.effort.clone(),
        resume: options.resume.clone(),
        allowed_tools: options.allowed_tools.clone(),
        disallowed_tools: options.disallowed_tools.clone(),
        trust: match trust {
            TrustLevel::Sandbox => wit::TrustLevel::Sandbox,
            TrustLevel::Controlled => wit::TrustLevel::Controlled,
            TrustLevel::Unrestricted => wit::TrustLevel::Unrestricted,
        },
        system_prompt: options.system_prompt.clone(),
        extra: options.extra.as_ref().map(|extra| extra.to_string()),
        directories: options.directories.clone(),
        mcp_servers: options
            .mcp_servers
            .as_ref()
            .map(|servers| servers.to_string()),
        agents: options.agents.as_ref().map(|agents| agents.to_string()),
    }
}

pub(in crate::contract) fn info(info: wit::AdapterInfo) -> (AdapterInfo, Needs) {
    let needs = Needs {
        hosts: info.needs.hosts,
        env: info.needs.env,
        programs: info.needs.programs,
    };
    let info = AdapterInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        tool_patterns: info.tool_patterns,
    };
    (info, needs)
}

pub(in crate::contract) fn error_info(error: wit::ErrorInfo) -> ErrorInfo {
    ErrorInfo {
        code: error.code,
        message: error.message,
        recoverable: error.recoverable,
    }
}

pub(in crate::contract) fn event(event: wit::Event) -> AdapterEvent {
    AdapterEvent {
        session_id: event.session_id,
        kind: event_kind(event.kind),
    }
}

fn event_kind(kind: wit::EventKind) -> AdapterEventKind {
    use wit::EventKind as K;
    match kind {
        K::Init(init) => AdapterEventKind::Init {
            model: init.model,
            cwd: init.cwd,
            tools: init.tools,
            capabilities: init.capabilities,
        },
        K::Text(text) => AdapterEventKind::Text(text),
        K::TextDelta(delta) => AdapterEventKind::TextDelta(delta),
        K::Thinking(summary) => AdapterEventKind::Thinking(summary),
        K::ToolUse(t) => AdapterEventKind::ToolUse {
            tool_name: t.tool_name,
            tool_use_id: t.tool_use_id,
            input: t.input,
            description: t.description,
        },
        K::ToolResult(t) => AdapterEventKind::ToolResult {
            tool_use_id: t.tool_use_id,
            tool_name: t.tool_name,
            status: match t.status {
                wit::ToolStatus::Success => ToolStatus::Success,
                wit::ToolStatus::Error => ToolStatus::Error,
                wit::ToolStatus::Denied => ToolStatus::Denied,
            },
            output: t.output,
            duration_ms: t.duration_ms,
        },
        K::Error(error) => AdapterEventKind::Error(error_info(error)),
        K::PermissionRequest(p) => AdapterEventKind::PermissionRequest {
            tool_name: p.tool_name,
            tool_use_id: p.tool_use_id,
            input: p.input,
            reason: p.reason,
        },
        K::Done(done) => AdapterEventKind::Done(done_info(done)),
        K::Extension(ext) => AdapterEventKind::Extension {
            name: ext.name,
            payload: ext.payload,
        },
    }
}

fn done_info(done: wit::DoneEvent) -> DoneInfo {
    DoneInfo {
        status: match done.status {
            wit::DoneStatus::Success => DoneStatus::Success,
            wit::DoneStatus::Error => DoneStatus::Error,
            wit::DoneStatus::Interrupted => DoneStatus::Interrupted,
            wit::DoneStatus::MaxTurns => DoneStatus::MaxTurns,
            wit::DoneStatus::MaxBudget => DoneStatus::MaxBudget,
        },
        result: done.result,
        resume_token: done.resume_token,
        usage: usage(done.usage),
        duration_ms: done.duration_ms,
        metadata: done.metadata,
    }
}

fn usage(usage: wit::Usage) -> Usage {
    Usage {
        tool_uses: usage.tool_uses,
        tokens: usage.tokens.map(|t| TokenReport {
            coverage: match t.coverage {
                wit::TokenCoverage::Complete => TokenCoverage::Complete,
                wit::TokenCoverage::Partial => TokenCoverage::Partial,
            },
            input: InputTokens {
                total: t.input.total,
                cache_read: t.input.cache_read,
                cache_write: t.input.cache_write,
            },
            output: OutputTokens {
                total: t.output.total,
                reasoning: t.output.reasoning,
            },
        }),
        cost: usage.cost.map(|c| Cost {
            usd: c.usd,
            source: match c.source {
                wit::CostSource::Vendor => CostSource::ProviderReported,
                // cligent's words have one for an estimate by the agent's
                // side, the CLI's or the adapter's own.
                wit::CostSource::AgentEstimate | wit::CostSource::AdapterEstimate => {
                    CostSource::AgentEstimate
                }
            },
        }),
    }
}
