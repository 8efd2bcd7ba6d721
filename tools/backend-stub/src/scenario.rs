//! What the stub answers, independent of the vendor's wire format.

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::str::FromStr;

use serde_json::Value;

use crate::http::write_json;

/// A named behaviour of the stub; every request of a run gets the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A plain text reply.
    Text,
    /// A shell tool call (`echo moat-tool-use`), then, once the tool result
    /// comes back, a text reply.
    ToolUse,
    /// A thinking block, then a text reply.
    Thinking,
    /// A shell tool call that writes a file — which a CLI in its default
    /// headless permission mode denies — then a text reply.
    PermissionDenial,
    /// A shell tool call that fails (`cat` of a missing file), then a text
    /// reply.
    ToolError,
    /// Every model call fails with HTTP 400 (not retried by the CLIs).
    ApiError,
    /// The reply starts streaming text, then the connection is cut.
    MidTurnFailure,
}

/// Every scenario, in the order the recorder runs them.
pub const ALL: [Scenario; 7] = [
    Scenario::Text,
    Scenario::ToolUse,
    Scenario::Thinking,
    Scenario::PermissionDenial,
    Scenario::ToolError,
    Scenario::ApiError,
    Scenario::MidTurnFailure,
];

impl Scenario {
    /// The scenario's name, as on the command line and in fixture names.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Text => "text",
            Scenario::ToolUse => "tool-use",
            Scenario::Thinking => "thinking",
            Scenario::PermissionDenial => "permission-denial",
            Scenario::ToolError => "tool-error",
            Scenario::ApiError => "api-error",
            Scenario::MidTurnFailure => "mid-turn-failure",
        }
    }

    /// What to answer to a model call; `after_tool_result` tells whether
    /// the conversation's last message is a tool result (the second call of
    /// a tool turn).
    pub fn plan(self, after_tool_result: bool) -> Plan {
        match self {
            Scenario::Text => Plan::Reply(vec![Block::Text(TEXT_REPLY.into())]),
            Scenario::ToolUse if after_tool_result => {
                Plan::Reply(vec![Block::Text(TOOL_FOLLOW_UP.into())])
            }
            Scenario::ToolUse => Plan::Reply(vec![
                Block::Text("Let me run a command.".into()),
                Block::Shell(TOOL_COMMAND.into()),
            ]),
            Scenario::Thinking => Plan::Reply(vec![
                Block::Thinking(THINKING.into()),
                Block::Text("Hello after thinking it over.".into()),
            ]),
            Scenario::PermissionDenial if after_tool_result => {
                Plan::Reply(vec![Block::Text(DENIAL_FOLLOW_UP.into())])
            }
            Scenario::PermissionDenial => Plan::Reply(vec![Block::Shell(DENIED_COMMAND.into())]),
            Scenario::ToolError if after_tool_result => {
                Plan::Reply(vec![Block::Text(FAILED_FOLLOW_UP.into())])
            }
            Scenario::ToolError => Plan::Reply(vec![Block::Shell(FAILING_COMMAND.into())]),
            Scenario::ApiError => Plan::Fail {
                status: 400,
                message: API_ERROR_MESSAGE.into(),
            },
            Scenario::MidTurnFailure => Plan::Cut(vec![Block::Text(CUT_TEXT.into())]),
        }
    }
}

/// The reply of the `text` scenario.
pub const TEXT_REPLY: &str = "Hello from the moat backend stub.";
/// The command of the `tool-use` scenario.
pub const TOOL_COMMAND: &str = "echo moat-tool-use";
/// The reply after the tool result in the `tool-use` scenario.
pub const TOOL_FOLLOW_UP: &str = "The command printed moat-tool-use.";
/// The thinking of the `thinking` scenario.
pub const THINKING: &str = "The user wants a short greeting, so I will answer briefly.";
/// The command of the `permission-denial` scenario.
pub const DENIED_COMMAND: &str = "touch moat-permission-probe.txt";
/// The reply after the denial in the `permission-denial` scenario.
pub const DENIAL_FOLLOW_UP: &str = "I was not allowed to run that command.";
/// The command of the `tool-error` scenario: it fails.
pub const FAILING_COMMAND: &str = "cat moat-missing-file.txt";
/// The reply after the failed command in the `tool-error` scenario.
pub const FAILED_FOLLOW_UP: &str = "The file does not exist.";
/// The error message of the `api-error` scenario.
pub const API_ERROR_MESSAGE: &str = "moat backend stub: scenario api-error rejects every request";
/// The text the `mid-turn-failure` scenario starts before the cut; only
/// its first half is sent.
pub const CUT_TEXT: &str = "This answer is cut off before it ends, mid sentence.";

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario name that is not one of [`ALL`].
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown scenario `{0}`; expected one of: text, tool-use, thinking, permission-denial, api-error, mid-turn-failure"
)]
pub struct UnknownScenario(String);

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ALL.into_iter()
            .find(|scenario| scenario.name() == name)
            .ok_or_else(|| UnknownScenario(name.to_owned()))
    }
}

/// One piece of a model reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Reasoning, streamed as the vendor streams thinking.
    Thinking(String),
    /// Assistant text, streamed word by word.
    Text(String),
    /// A call of the shell tool the client offered, running this command.
    Shell(String),
}

/// How to answer one model call.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Stream these blocks and end the reply normally.
    Reply(Vec<Block>),
    /// Refuse the call with an HTTP error.
    Fail {
        /// HTTP status.
        status: u16,
        /// The error message, in the vendor's error body.
        message: String,
    },
    /// Start streaming these blocks, then cut the connection half-way
    /// through the first one.
    Cut(Vec<Block>),
}

impl Plan {
    /// What a vendor handler streams: the blocks, and whether to cut the
    /// connection in the first one. For a failing plan, writes the vendor's
    /// error response instead — `error` gives its extra header, if any, and
    /// body from the status and message — and returns `None`.
    pub fn blocks_or_error(
        self,
        stream: &mut TcpStream,
        error: impl FnOnce(u16, &str) -> (Option<(&'static str, String)>, Value),
    ) -> io::Result<Option<(Vec<Block>, bool)>> {
        match self {
            Plan::Reply(blocks) => Ok(Some((blocks, false))),
            Plan::Cut(blocks) => Ok(Some((blocks, true))),
            Plan::Fail { status, message } => {
                let (header, body) = error(status, &message);
                let headers: Vec<(&str, &str)> = header
                    .iter()
                    .map(|(name, value)| (*name, value.as_str()))
                    .collect();
                write_json(stream, status, &headers, &body)?;
                Ok(None)
            }
        }
    }
}

/// Splits text into word-sized deltas (each keeps its trailing space), the
/// way the vendors stream it.
pub fn deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (index, _) in text.match_indices(' ') {
        pieces.push(&text[start..=index]);
        start = index + 1;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// The deltas sent before a cut: the first half of `text`'s deltas (at least
/// one).
pub fn deltas_before_cut(text: &str) -> Vec<&str> {
    let all = deltas(text);
    let keep = all.len().div_ceil(2).max(1).min(all.len());
    all[..keep].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for scenario in ALL {
            assert_eq!(scenario.name().parse::<Scenario>().unwrap(), scenario);
        }
        assert!("nope".parse::<Scenario>().is_err());
    }

    #[test]
    fn deltas_concatenate_back_to_the_text() {
        assert_eq!(deltas("a bc d"), ["a ", "bc ", "d"]);
        assert_eq!(deltas(TEXT_REPLY).concat(), TEXT_REPLY);
        assert!(deltas("").is_empty());
        let cut = deltas_before_cut(CUT_TEXT).concat();
        assert!(CUT_TEXT.starts_with(&cut) && cut.len() < CUT_TEXT.len());
    }

    #[test]
    fn tool_scenarios_answer_the_tool_result_with_text() {
        for scenario in [
            Scenario::ToolUse,
            Scenario::PermissionDenial,
            Scenario::ToolError,
        ] {
            let Plan::Reply(first) = scenario.plan(false) else {
                panic!("{scenario}: first call fails")
            };
            assert!(first.iter().any(|block| matches!(block, Block::Shell(_))));
            let Plan::Reply(second) = scenario.plan(true) else {
                panic!("{scenario}: second call fails")
            };
            assert!(matches!(second.as_slice(), [Block::Text(_)]));
        }
    }
}
