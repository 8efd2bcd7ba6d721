//! A `session/prompt`'s content blocks as the one prompt text a run takes.

use serde_json::Value;

use crate::jsonrpc::RpcError;

/// The most a prompt may hold, with its embedded files.
const MAX_PROMPT_BYTES: usize = 16 * 1024 * 1024;

/// The text of `blocks`: text as it is, a linked file by its URI, an
/// embedded one with its text under its URI. Images and audio are refused:
/// `initialize` said moat takes neither.
pub fn text_of(blocks: &Value) -> Result<String, RpcError> {
    let blocks = blocks
        .as_array()
        .ok_or_else(|| RpcError::invalid_params("prompt must be an array of content blocks"))?;
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let part = match kind {
            "text" => string(block, "text")?,
            "resource_link" => format!("[{}]", string(block, "uri")?),
            "resource" => {
                let resource = block
                    .get("resource")
                    .ok_or_else(|| RpcError::invalid_params("a resource block needs resource"))?;
                let uri = string(resource, "uri")?;
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[{uri}]\n{text}"),
                    None => format!("[{uri}] (binary, not included)"),
                }
            }
            "image" | "audio" => {
                return Err(RpcError::invalid_params(format!(
                    "moat takes no {kind} in prompts (promptCapabilities): send text"
                )));
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "unknown content block type {other:?}"
                )));
            }
        };
        parts.push(part);
    }
    let text = parts.join("\n");
    if text.len() > MAX_PROMPT_BYTES {
        return Err(RpcError::invalid_params(format!(
            "the prompt is {} bytes; moat takes at most {MAX_PROMPT_BYTES}",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params("the prompt is empty"));
    }
    Ok(text)
}

fn string(value: &Value, field: &str) -> Result<String, RpcError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RpcError::invalid_params(format!("a content block needs {field}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_links_and_embedded_files_make_one_prompt() {
        let prompt = json!([
            {"type": "text", "text": "fix"},
            {"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///b.rs", "text": "fn b() {}"}}
        ]);
        assert_eq!(
            text_of(&prompt).unwrap(),
            "fix\n[file:///a.rs]\n[file:///b.rs]\nfn b() {}"
        );
    }

    #[test]
    fn images_unknown_blocks_and_empty_prompts_are_refused() {
        for prompt in [
            json!([{"type": "image", "data": "", "mimeType": "image/png"}]),
            json!([{"type": "video"}]),
            json!([{"type": "text"}]),
            json!([]),
            json!("text"),
        ] {
            assert_eq!(
                text_of(&prompt).unwrap_err().code,
                RpcError::INVALID_PARAMS,
                "{prompt}"
            );
        }
    }
}
