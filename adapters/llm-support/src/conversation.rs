//! What a vendor adds to the shared tool loop: how its API offers a tool,
//! how an answer is repeated back to it, and how tool results are given.
//! The loop itself (which calls to make, when to stop) is the
//! [`Session`](crate::Session)'s.

use moat_guest::json::Value;

use crate::mcp::McpTool;
use crate::stream::Translate;

/// What one tool call gave, to send back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The model's id of the call.
    pub id: String,
    /// The tool, as the model named it.
    pub name: String,
    /// The tool's text, or why there is none.
    pub text: String,
    /// The call failed or was refused.
    pub is_error: bool,
}

/// A vendor's side of a conversation with tools.
pub trait Conversation: Translate + Default {
    /// The vendor's entry in the request's `tools` for `tool`, offered to
    /// the model as `name`.
    fn tool_entry(name: &str, tool: &McpTool) -> Value;

    /// The answer just finished, as the assistant message the next request
    /// repeats (its text and its tool calls, in the vendor's shape).
    fn take_reply(&mut self) -> Value;

    /// Appends `reply` and the `outputs` of its tool calls to the
    /// request's `messages`.
    fn append_turn(messages: &mut Vec<Value>, reply: Value, outputs: &[ToolOutput]);
}
