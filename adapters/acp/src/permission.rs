//! `session/request_permission`: whether the agent may make a tool call.
//!
//! The run's tool policy decides first: a tool (an ACP tool kind, see
//! [`crate::updates`]) outside `--allowed-tools` or in
//! `--disallowed-tools` is refused without asking anyone. A tool under
//! `--ask-tools` is asked of the run's user through moat's approvals
//! (`permission_request`; a run without `--ask` is answered "deny" at
//! once). A tool `--allowed-tools` names is allowed: the user named it.
//! Otherwise the trust level decides: a tool it rules out is asked about,
//! anything else allowed. The answer is one of the options the agent
//! offered.

use moat_guest::json::{Value, json};
use moat_guest::{Options, TrustLevel};

/// What the policy says of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed without asking.
    Allow,
    /// Refused without asking, for this reason.
    Refuse(String),
    /// Ask the run's user; the reason shown with the question.
    Ask(String),
}

/// The run's tool policy, as it applies to the tools an agent asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    allowed: Option<Vec<String>>,
    disallowed: Vec<String>,
    ask: Vec<String>,
    trust: TrustLevel,
}

impl Policy {
    /// The policy of a run with `options`, asking about `ask` tools.
    pub fn new(options: &Options, ask: Vec<String>) -> Self {
        Policy {
            allowed: options.allowed_tools.clone(),
            disallowed: options.disallowed_tools.clone(),
            ask,
            trust: options.trust,
        }
    }

    /// What the policy says of a call of `tool`.
    pub fn decide(&self, tool: &str) -> Decision {
        if self.disallowed.iter().any(|name| name == tool) {
            return Decision::Refuse(format!("moat's tool policy disallows `{tool}` tools"));
        }
        if let Some(allowed) = &self.allowed
            && !allowed.iter().any(|name| name == tool)
        {
            return Decision::Refuse(format!(
                "moat's tool policy allows only {}",
                if allowed.is_empty() {
                    "no tools".to_owned()
                } else {
                    allowed.join(", ")
                }
            ));
        }
        if self.ask.iter().any(|name| name == tool) {
            return Decision::Ask(format!("`{tool}` is under --ask-tools"));
        }
        if self.allowed.is_some() {
            // Named by --allowed-tools (else refused above).
            return Decision::Allow;
        }
        if rules_out(self.trust, tool) {
            return Decision::Ask(format!(
                "trust level {} rules out `{tool}` tools",
                trust_name(self.trust)
            ));
        }
        Decision::Allow
    }
}

impl Policy {
    /// Whether a call of `tool` may be made only once allowed through a
    /// permission request: the policy would ask about it. An agent that
    /// makes such a call without asking breaks the run's policy.
    pub fn needs_permission(&self, tool: &str) -> bool {
        matches!(self.decide(tool), Decision::Ask(_))
    }
}

/// Whether `trust` rules out tools of `kind`: `controlled` the shell,
/// `sandbox` every tool that touches files, the web or the shell (and any
/// the agent does not name).
fn rules_out(trust: TrustLevel, kind: &str) -> bool {
    match trust {
        TrustLevel::Unrestricted => false,
        TrustLevel::Controlled => kind == "execute",
        TrustLevel::Sandbox => !matches!(kind, "think" | "switch_mode"),
    }
}

fn trust_name(trust: TrustLevel) -> &'static str {
    match trust {
        TrustLevel::Sandbox => "sandbox",
        TrustLevel::Controlled => "controlled",
        TrustLevel::Unrestricted => "unrestricted",
    }
}

/// The response to a permission request: the first option the agent
/// offered of the kinds `preferred`, or `cancelled` when it offered none
/// of them (an agent must then not make the call).
pub fn answer(options: &[Value], preferred: &[&str]) -> Value {
    let chosen = preferred.iter().find_map(|kind| {
        options
            .iter()
            .find(|option| option["kind"] == *kind)
            .and_then(|option| option["optionId"].as_str())
    });
    match chosen {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => cancelled(),
    }
}

/// The response when the prompt was cancelled.
pub fn cancelled() -> Value {
    json!({"outcome": {"outcome": "cancelled"}})
}

/// Option kinds that allow a call once, in preference order (moat's
/// `--always` is kept by moat, not handed to the agent).
pub const ALLOW: &[&str] = &["allow_once", "allow_always"];

/// Option kinds that refuse a call, in preference order.
pub const REJECT: &[&str] = &["reject_once", "reject_always"];

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(trust: TrustLevel, allowed: Option<&[&str]>, ask: &[&str]) -> Policy {
        let options = Options {
            trust,
            allowed_tools: allowed.map(|names| names.iter().map(|n| (*n).to_owned()).collect()),
            disallowed_tools: vec!["delete".into()],
            ..Options::default()
        };
        Policy::new(&options, ask.iter().map(|n| (*n).to_owned()).collect())
    }

    #[test]
    fn the_policy_refuses_asks_or_allows() {
        let open = policy(TrustLevel::Unrestricted, None, &["edit"]);
        assert_eq!(open.decide("execute"), Decision::Allow);
        assert!(matches!(open.decide("edit"), Decision::Ask(_)));
        assert!(matches!(open.decide("delete"), Decision::Refuse(_)));
        let narrow = policy(TrustLevel::Sandbox, Some(&["read"]), &[]);
        assert!(
            matches!(narrow.decide("edit"), Decision::Refuse(why) if why.contains("only read"))
        );
        assert_eq!(narrow.decide("read"), Decision::Allow, "named, so allowed");
        let controlled = policy(TrustLevel::Controlled, None, &[]);
        assert_eq!(controlled.decide("edit"), Decision::Allow);
        assert!(
            matches!(controlled.decide("execute"), Decision::Ask(why) if why.contains("controlled"))
        );
        let sandbox = policy(TrustLevel::Sandbox, None, &[]);
        assert!(matches!(sandbox.decide("read"), Decision::Ask(_)));
        assert_eq!(sandbox.decide("think"), Decision::Allow);
        assert!(sandbox.needs_permission("execute") && !sandbox.needs_permission("think"));
    }

    #[test]
    fn the_answer_is_an_option_the_agent_offered() {
        let options = [
            json!({"optionId": "yes", "name": "Allow", "kind": "allow_once"}),
            json!({"optionId": "always", "name": "Always", "kind": "allow_always"}),
            json!({"optionId": "no", "name": "Reject", "kind": "reject_once"}),
        ];
        assert_eq!(answer(&options, ALLOW)["outcome"]["optionId"], "yes");
        assert_eq!(answer(&options, REJECT)["outcome"]["optionId"], "no");
        assert_eq!(answer(&options[..2], REJECT), cancelled());
    }
}
