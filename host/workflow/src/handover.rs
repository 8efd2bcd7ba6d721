//! A task's handover: the state it leaves for the tasks after it, a JSON
//! object in a fenced block of its final answer whose info string is
//! `handover`:
//!
//! ````text
//! ```handover
//! {"files": ["src/lib.rs"], "open_questions": []}
//! ```
//! ````
//!
//! The last such block counts. An answer without one hands over nothing
//! (`{}`); a block that is not a JSON object, or is larger than
//! [`MAX_HANDOVER_BYTES`], fails the attempt: the agent broke the
//! convention, and a retry may fix it.

use serde_json::{Map, Value};

/// The largest handover accepted, in bytes of JSON.
pub const MAX_HANDOVER_BYTES: usize = 64 * 1024;

/// The info string of the fenced block.
pub const FENCE_INFO: &str = "handover";

/// The handover in `answer`: `Ok(None)` without a block.
pub fn extract(answer: &str) -> Result<Option<Map<String, Value>>, String> {
    let Some(body) = last_block(answer) else {
        return Ok(None);
    };
    if body.len() > MAX_HANDOVER_BYTES {
        return Err(format!(
            "the handover block has {} bytes; at most {MAX_HANDOVER_BYTES} are taken",
            body.len()
        ));
    }
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(object)) => Ok(Some(object)),
        Ok(_) => Err("the handover block is not a JSON object".into()),
        Err(e) => Err(format!("the handover block is not JSON: {e}")),
    }
}

/// The body of the last ```` ```handover ```` block.
fn last_block(answer: &str) -> Option<&str> {
    let mut found = None;
    let mut rest = answer;
    let mut offset = 0;
    while let Some(at) = rest.find("```") {
        let fence_start = offset + at;
        let after_fence = &answer[fence_start + 3..];
        let line_end = after_fence.find('\n')?;
        let info = after_fence[..line_end].trim();
        let body_start = fence_start + 3 + line_end + 1;
        let body = &answer[body_start..];
        // The closing fence: ``` at the start of a line.
        let close = body
            .match_indices("```")
            .find(|(i, _)| *i == 0 || body[..*i].ends_with('\n'))
            .map(|(i, _)| i);
        let Some(close) = close else {
            break;
        };
        if info == FENCE_INFO {
            found = Some(&body[..close]);
        }
        offset = body_start + close + 3;
        rest = &answer[offset..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_handover_block_counts() {
        let answer = "Done.\n```rust\nfn x() {}\n```\n```handover\n{\"a\": 1}\n```\nthen\n```handover\n{\"a\": 2}\n```\n";
        assert_eq!(extract(answer).unwrap().unwrap()["a"], 2);
        assert_eq!(extract("no block").unwrap(), None);
        assert!(
            extract("```handover\n[1]\n```")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            extract("```handover\n{oops\n```")
                .unwrap_err()
                .contains("not JSON")
        );
        // A block that is never closed hands over nothing.
        assert_eq!(extract("```handover\n{\"a\": 1}").unwrap(), None);
    }
}
