//! The `moat:adapter/approvals` import of contract 0.4.0: a component asks
//! the run's [`Asking`](moat_contain::Asking) whether to make a tool call, and
//! waits for the answer.
//!
//! The request is the guest's: it is checked as the `permission_request`
//! event it becomes (by the engine's own rules, one home for them) before
//! anyone is asked, and a malformed one is denied saying why. A run that
//! does not ask denies at once; an aborted run answers `interrupted`.

use moat_engine::{AdapterEvent, AdapterEventKind, EventPayload};

use super::moat::adapter::approvals::{Approval, ApprovalRequest, Host};
use crate::state::RunState;

/// The most a request may carry, its strings together: a tool call's
/// input is what a model wrote, a few KiB; a megabyte is far past any.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

impl Host for RunState {
    async fn request_approval(&mut self, request: ApprovalRequest) -> Approval {
        let Some(asking) = self.asking.clone() else {
            return Approval::Deny(
                "this run does not ask: nobody can answer (start it with --ask)".into(),
            );
        };
        let question = AdapterEvent {
            session_id: None,
            kind: AdapterEventKind::PermissionRequest {
                tool_name: request.tool_name,
                tool_use_id: request.tool_use_id,
                input: request.input,
                reason: request.reason,
            },
        };
        let payload =
            match moat_engine::validate_event(question, MAX_REQUEST_BYTES, Default::default) {
                Ok(valid) => valid.payload,
                Err(invalid) => {
                    return Approval::Deny(format!("the request was malformed: {invalid}"));
                }
            };
        let EventPayload::PermissionRequest(asked) = payload else {
            return Approval::Deny("the request was malformed".into());
        };
        let asked = *asked;
        // No guest code of the run runs until the answer comes.
        let _waiting = moat_contain::approvals::Waiting::begin();
        let answer = asking.ask_tool(
            asked.tool_name,
            asked.tool_use_id,
            asked.input,
            asked.reason,
        );
        match self.control.interrupt.guard(None, answer).await {
            Ok(Ok(())) => Approval::Allow,
            Ok(Err(reason)) => Approval::Deny(reason),
            Err(_) => Approval::Interrupted,
        }
    }
}
