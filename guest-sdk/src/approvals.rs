//! Asking instead of failing (`moat run --ask`, docs/approvals.md).
//!
//! An adapter asks the run's user itself with [`request`] (the contract's
//! blocking `request-approval`), before a tool call its run puts under
//! `ask` ([`ask_tools`]). An agent CLI the adapter starts asks through the
//! run's approvals MCP server instead ([`asked`]): one tool, `approve`
//! (Claude Code's `--permission-prompt-tool` shape), on the run's proxy.
//! The host tells the adapter both in two variables of its environment.

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

/// The answer to a [`request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead with the call.
    Allow,
    /// Do not make it: who refused, and why (tell the backend).
    Deny(String),
    /// The run was aborted while waiting: end with `done` interrupted.
    Interrupted,
}

/// Asks the run's user whether to make the tool call `tool_use_id` of
/// `tool_name` with `input` (a JSON object), and waits for the answer. The
/// user sees it as a `permission_request` event with `reason`. A run
/// started without `--ask` is answered [`Approval::Deny`] at once.
pub fn request(
    tool_name: &str,
    tool_use_id: &str,
    input: &serde_json::Value,
    reason: Option<&str>,
) -> Approval {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::moat::adapter::approvals as wit;
        let request = wit::ApprovalRequest {
            tool_name: tool_name.to_owned(),
            tool_use_id: tool_use_id.to_owned(),
            input: input.to_string(),
            reason: reason.map(str::to_owned),
        };
        match wit::request_approval(&request) {
            wit::Approval::Allow => Approval::Allow,
            wit::Approval::Deny(why) => Approval::Deny(why),
            wit::Approval::Interrupted => Approval::Interrupted,
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        testing::answer(tool_name, tool_use_id, input, reason)
    }
}

/// A stand-in for the host's answers on native targets, for adapter unit
/// tests.
#[cfg(not(target_arch = "wasm32"))]
pub mod testing {
    use super::Approval;
    use core::cell::RefCell;

    type Answerer = Box<dyn FnMut(&str, &str, &serde_json::Value, Option<&str>) -> Approval>;

    thread_local! {
        static ANSWERER: RefCell<Option<Answerer>> = const { RefCell::new(None) };
    }

    /// Answers this thread's [`request`](super::request)s with `answerer`
    /// (given the tool's name, the call's id, its input and the reason).
    /// Without one, every request is denied, as a run that does not ask
    /// denies it.
    pub fn answer_with(
        answerer: impl FnMut(&str, &str, &serde_json::Value, Option<&str>) -> Approval + 'static,
    ) {
        ANSWERER.with(|slot| *slot.borrow_mut() = Some(Box::new(answerer)));
    }

    pub(super) fn answer(
        tool_name: &str,
        tool_use_id: &str,
        input: &serde_json::Value,
        reason: Option<&str>,
    ) -> Approval {
        ANSWERER.with(|slot| match slot.borrow_mut().as_mut() {
            Some(answerer) => answerer(tool_name, tool_use_id, input, reason),
            None => Approval::Deny("no answerer set (approvals::testing::answer_with)".into()),
        })
    }
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

    #[test]
    fn natively_requests_are_answered_by_the_stand_in() {
        let input = serde_json::json!({"path": "a"});
        assert!(matches!(
            request("Write", "t1", &input, None),
            Approval::Deny(_)
        ));
        testing::answer_with(|tool, id, input, reason| {
            if tool == "Write" && id == "t1" && input["path"] == "a" && reason == Some("why") {
                Approval::Allow
            } else {
                Approval::Deny("unexpected".into())
            }
        });
        assert_eq!(request("Write", "t1", &input, Some("why")), Approval::Allow);
    }
}
