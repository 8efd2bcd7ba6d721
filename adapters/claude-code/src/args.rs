//! Run options → Claude Code's command line.
//!
//! | option | switch |
//! |---|---|
//! | model | `--model=M` |
//! | resume | `--resume=ID` |
//! | max turns | `--max-turns=N` |
//! | max budget | `--max-budget-usd=X` |
//! | effort | `--effort=E` |
//! | system prompt | `--system-prompt=S` |
//! | cwd | the process's working directory |
//! | directories | `--add-dir=D` each |
//! | agents | `--agents=JSON` (its sub-agents, as given) |
//! | MCP servers | `--mcp-config={"mcpServers": …}` and `--strict-mcp-config` (only the run's own), their tools approved (`--allowedTools=mcp__NAME`) at every trust level |
//! | `extra.program` | the CLI's absolute path, granted by that path (default: `claude` on PATH) |
//! | allowed tools | `--tools=a,b` (only these exist) and `--allowedTools=a,b` (they run without asking), `--strict-mcp-config` (no MCP servers) |
//! | disallowed tools | `--disallowedTools=…` |
//! | the run asks (`--ask`, `--ask-tools`) | `--permission-prompt-tool=mcp__moat__approve` with moat's approvals MCP server in the config: what Claude Code would ask a person it asks moat. The tools the trust level rules out, and those named by `--ask-tools`, are not refused but asked about at every call (`ask` rules: `--settings={"permissions":{"ask":[…]}}`), never pre-approved; at `sandbox`, the built-in tools then exist (each call asked) and the permission mode is `default` |
//!
//! Trust levels (Claude Code's permission modes; headless `-p` denies what
//! would need asking):
//!
//! - `sandbox`: `--permission-mode=dontAsk`, no built-in tools
//!   (`--tools=`) unless allowed by name, no MCP servers; the file, web and
//!   shell tools are also disallowed by name.
//! - `controlled`: `--permission-mode=acceptEdits` (file edits run), web
//!   tools approved, shell tools disallowed.
//! - `unrestricted`: `--permission-mode=acceptEdits`, shell and web tools
//!   approved. Not `bypassPermissions`: Claude Code refuses it as root, and
//!   the approvals above already let every built-in tool run.
//!
//! Values go in `--flag=value` form so a value starting with `-` cannot be
//! read as another switch, and the prompt comes after `--`.

use moat_cli_support::{Invocation, check_exact_names, unsupported};
use moat_guest::approvals::Approvals;
use moat_guest::json::{Map, Value, json};
use moat_guest::{ErrorInfo, Options, TrustLevel};

/// The program run.
pub const PROGRAM: &str = "claude";

/// The name moat's approvals MCP server has in Claude Code's config.
pub const APPROVALS_SERVER: &str = "moat";

/// How long Claude Code waits on one call of an MCP tool when the run asks
/// (`MCP_TOOL_TIMEOUT`): a day, so moat's own approval timeout decides.
const ANSWER_PATIENCE_MS: &str = "86400000";

/// Claude Code's shell tools.
pub const SHELL_TOOLS: &[&str] = &["Bash", "BashOutput", "KillShell", "KillBash", "PowerShell"];
/// Claude Code's file tools.
pub const FILE_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Glob",
    "Grep",
    "LS",
];
/// Claude Code's web tools.
pub const WEB_TOOLS: &[&str] = &["WebFetch", "WebSearch"];

/// Variables that keep Claude Code from calling home (telemetry, error
/// reports, update checks): its traffic goes to the model API only.
pub const QUIET_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
];

/// The tools `trust` rules out.
pub fn forbidden(trust: TrustLevel) -> Vec<&'static str> {
    match trust {
        TrustLevel::Sandbox => [SHELL_TOOLS, FILE_TOOLS, WEB_TOOLS].concat(),
        TrustLevel::Controlled => SHELL_TOOLS.to_vec(),
        TrustLevel::Unrestricted => Vec::new(),
    }
}

/// The command line for one run, or the refusal of an option Claude Code
/// cannot honour.
pub fn invocation(
    prompt: &str,
    options: &Options,
    approvals: Option<&Approvals>,
) -> Result<Invocation, ErrorInfo> {
    let program = moat_cli_support::program("claude-code", PROGRAM, options)?;
    let mcp_servers: Option<Map<String, Value>> = options
        .mcp_servers
        .as_deref()
        .map(|text| moat_guest::json::parse("options.mcp-servers", text))
        .transpose()?;
    if mcp_servers
        .as_ref()
        .is_some_and(|servers| servers.contains_key(APPROVALS_SERVER))
    {
        return Err(unsupported(
            "claude-code",
            &format!("an MCP server named {APPROVALS_SERVER}"),
            "that name is moat's own (its approvals); rename the server",
        ));
    }
    let mut approved: Vec<String> = Vec::new();
    let mut strict = false;
    let mut args: Vec<String> = [
        "-p",
        "--output-format=stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    .map(str::to_owned)
    .to_vec();
    if let Some(model) = &options.model {
        args.push(format!("--model={model}"));
    }
    if let Some(resume) = &options.resume {
        args.push(format!("--resume={resume}"));
    }
    if let Some(turns) = options.max_turns {
        args.push(format!("--max-turns={turns}"));
    }
    if let Some(budget) = options.max_budget_usd {
        if !budget.is_finite() || budget <= 0.0 {
            return Err(unsupported(
                "claude-code",
                "--max-budget-usd",
                "the budget must be a positive number of dollars",
            ));
        }
        args.push(format!("--max-budget-usd={budget}"));
    }
    if let Some(effort) = &options.effort {
        args.push(format!("--effort={effort}"));
    }
    if let Some(system) = &options.system_prompt {
        args.push(format!("--system-prompt={system}"));
    }
    for dir in &options.directories {
        args.push(format!("--add-dir={dir}"));
    }
    if let Some(agents) = &options.agents {
        args.push(format!("--agents={agents}"));
    }

    // A run that asks turns the trust level's refusals into questions:
    // what it rules out is asked about at every call instead of refused
    // (with the tools the run names itself).
    let mut asked: Vec<String> = Vec::new();
    let forbidden = match approvals {
        Some(approvals) => {
            asked.extend(forbidden(options.trust).iter().map(|t| (*t).to_owned()));
            for tool in &approvals.tools {
                if !asked.contains(tool) {
                    asked.push(tool.clone());
                }
            }
            Vec::new()
        }
        None => forbidden(options.trust),
    };
    check_exact_names(
        "claude-code",
        "--disallowed-tools",
        &options.disallowed_tools,
    )?;
    let trust = trust_name(options.trust);
    match &options.allowed_tools {
        Some(allowed) => {
            check_exact_names("claude-code", "--allowed-tools", allowed)?;
            if let Some(tool) = allowed
                .iter()
                .find(|tool| forbidden.contains(&tool.as_str()))
            {
                return Err(unsupported(
                    "claude-code",
                    &format!("--allowed-tools {tool}"),
                    &format!("trust level {trust} rules it out; raise --trust to allow it"),
                ));
            }
            if let Some(tool) = allowed.iter().find(|tool| tool.starts_with("mcp__")) {
                return Err(unsupported(
                    "claude-code",
                    &format!("--allowed-tools {tool}"),
                    "MCP tools cannot be restricted by name through its command line",
                ));
            }
            // Only the allowed tools exist, and they run without asking.
            args.push(format!("--tools={}", allowed.join(",")));
            strict = true;
            approved.extend(allowed.iter().cloned());
        }
        None => match options.trust {
            // Asking, its tools exist and each call is asked about.
            TrustLevel::Sandbox if approvals.is_some() => {}
            TrustLevel::Sandbox => {
                args.push("--tools=".to_owned());
                strict = true;
            }
            TrustLevel::Controlled => approved.extend(WEB_TOOLS.iter().map(|t| (*t).to_owned())),
            TrustLevel::Unrestricted => approved.extend(
                [SHELL_TOOLS, WEB_TOOLS]
                    .concat()
                    .iter()
                    .map(|t| (*t).to_owned()),
            ),
        },
    }
    // MCP servers work at every trust level: given in a config of the
    // run's own (and only that one: --strict-mcp-config), their tools
    // approved so the headless run does not deny them.
    let mut servers = mcp_servers.unwrap_or_default();
    approved.extend(servers.keys().map(|name| format!("mcp__{name}")));
    let mut env: Vec<(&str, &str)> = QUIET_ENV.to_vec();
    if let Some(approvals) = approvals {
        // What it would ask a person, it asks moat; the tools asked about
        // are not approved beforehand, and are asked about at every call
        // (its `ask` rules: even a call it deems harmless).
        approved.retain(|tool| !asked.contains(tool));
        if !asked.is_empty() {
            args.push(format!(
                "--settings={}",
                json!({"permissions": {"ask": asked}})
            ));
        }
        servers.insert(
            APPROVALS_SERVER.to_owned(),
            json!({"type": "http", "url": approvals.url}),
        );
        args.push(format!(
            "--permission-prompt-tool=mcp__{APPROVALS_SERVER}__{}",
            moat_guest::approvals::TOOL
        ));
        // A call waits for a person's answer: as long as moat lets it.
        env.push(("MCP_TOOL_TIMEOUT", ANSWER_PATIENCE_MS));
    }
    if !servers.is_empty() {
        args.push(format!("--mcp-config={}", json!({ "mcpServers": servers })));
        strict = true;
    }
    if strict {
        args.push("--strict-mcp-config".to_owned());
    }
    if !approved.is_empty() {
        args.push(format!("--allowedTools={}", approved.join(",")));
    }
    let mut disallowed: Vec<String> = forbidden.iter().map(|tool| (*tool).to_owned()).collect();
    for tool in &options.disallowed_tools {
        if !disallowed.contains(tool) {
            disallowed.push(tool.clone());
        }
    }
    if !disallowed.is_empty() {
        args.push(format!("--disallowedTools={}", disallowed.join(",")));
    }
    let mode = match options.trust {
        // `dontAsk` would refuse what the run asks about.
        TrustLevel::Sandbox if approvals.is_some() => "default",
        TrustLevel::Sandbox => "dontAsk",
        TrustLevel::Controlled | TrustLevel::Unrestricted => "acceptEdits",
    };
    args.push(format!("--permission-mode={mode}"));
    args.push("--".to_owned());
    args.push(prompt.to_owned());

    Ok(Invocation::new(program, args, options).with_env(&env))
}

/// The trust level as the user writes it.
fn trust_name(trust: TrustLevel) -> &'static str {
    match trust {
        TrustLevel::Sandbox => "sandbox",
        TrustLevel::Controlled => "controlled",
        TrustLevel::Unrestricted => "unrestricted",
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
