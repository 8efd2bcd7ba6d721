//! How the host tells an adapter that its run asks instead of failing
//! (`moat run --ask`, docs/approvals.md): two variables in the adapter's
//! environment, set by the host only for such a run whose programs are
//! contained. An agent CLI the adapter starts can then ask moat before a
//! tool call, through an MCP server on the run's proxy with one tool,
//! `approve` (Claude Code's `--permission-prompt-tool` shape).

/// The variable with the URL of the run's approvals as an MCP server
/// (streamable HTTP). The host's `moat_sandbox::APPROVALS_VARIABLE`.
pub const APPROVALS_VARIABLE: &str = "MOAT_APPROVALS_URL";

/// The variable naming, comma-separated, the tools to ask about before
/// each call (`--ask-tools`). The host's `moat_sandbox::ASK_TOOLS_VARIABLE`.
pub const ASK_TOOLS_VARIABLE: &str = "MOAT_ASK_TOOLS";

/// The name of the approvals MCP server's one tool.
pub const TOOL: &str = "approve";

/// How this run asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvals {
    /// The MCP server's URL.
    pub url: String,
    /// The tools to ask about before each call.
    pub tools: Vec<String>,
}

/// The tools the run asks about before each call (empty: none, or the
/// run does not ask). An adapter whose backend cannot ask refuses a run
/// that names any, rather than let them run unasked.
pub fn ask_tools() -> Vec<String> {
    from(
        Some("http://".into()),
        std::env::var(ASK_TOOLS_VARIABLE).ok(),
    )
    .map(|approvals| approvals.tools)
    .unwrap_or_default()
}

/// How this run asks, when the host says it does.
pub fn asked() -> Option<Approvals> {
    from(
        std::env::var(APPROVALS_VARIABLE).ok(),
        std::env::var(ASK_TOOLS_VARIABLE).ok(),
    )
}

/// The approvals the two variables' values describe.
pub fn from(url: Option<String>, tools: Option<String>) -> Option<Approvals> {
    let url = url.filter(|url| url.starts_with("http://"))?;
    let tools = tools
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|tool| !tool.is_empty())
        .map(str::to_owned)
        .collect();
    Some(Approvals { url, tools })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_read_as_the_host_writes_them() {
        assert_eq!(from(None, Some("Bash".into())), None);
        assert_eq!(
            from(
                Some("http://127.0.0.1:9/moat-approvals/t/mcp".into()),
                Some("Bash, Write,".into())
            ),
            Some(Approvals {
                url: "http://127.0.0.1:9/moat-approvals/t/mcp".into(),
                tools: vec!["Bash".into(), "Write".into()],
            })
        );
    }
}
