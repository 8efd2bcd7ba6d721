//! The MCP servers an editor hands a session (`mcpServers` of
//! `session/new`), as moat's own MCP configuration: checked by the engine's
//! rules ([`McpServers::from_json`]), their commands programs the run must
//! be granted like any other.

use serde_json::{Map, Value, json};

use moat_engine::McpServers;

use crate::jsonrpc::RpcError;

/// `servers` (ACP's list) as moat's servers by name; `None` for none.
pub fn servers_of(servers: &Value) -> Result<Option<McpServers>, RpcError> {
    let list = match servers {
        Value::Null => return Ok(None),
        Value::Array(list) if list.is_empty() => return Ok(None),
        Value::Array(list) => list,
        _ => return Err(RpcError::invalid_params("mcpServers must be an array")),
    };
    let mut by_name = Map::new();
    for server in list {
        let name = server
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("an MCP server needs a name"))?;
        let entry = match server.get("type").and_then(Value::as_str) {
            None | Some("stdio") => json!({
                "command": server.get("command").cloned().unwrap_or(Value::Null),
                "args": server.get("args").cloned().unwrap_or_else(|| json!([])),
                "env": pairs(server.get("env"))?,
            }),
            Some("http") => json!({
                "url": server.get("url").cloned().unwrap_or(Value::Null),
                "headers": pairs(server.get("headers"))?,
            }),
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "MCP server {name}: moat takes stdio and http servers, not {other}"
                )));
            }
        };
        by_name.insert(name.to_owned(), entry);
    }
    let text = json!({"mcpServers": by_name}).to_string();
    McpServers::from_json(&text)
        .map(Some)
        .map_err(|error| RpcError::invalid_params(error.to_string()))
}

/// ACP's `[{name, value}]` as a JSON object.
fn pairs(list: Option<&Value>) -> Result<Value, RpcError> {
    let mut object = Map::new();
    for pair in list.and_then(Value::as_array).into_iter().flatten() {
        match (
            pair.get("name").and_then(Value::as_str),
            pair.get("value").and_then(Value::as_str),
        ) {
            (Some(name), Some(value)) => {
                object.insert(name.to_owned(), Value::String(value.to_owned()));
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "an MCP server's env and headers are {name, value} pairs of strings",
                ));
            }
        }
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_and_http_servers_become_moats_and_bad_ones_are_refused() {
        let servers = servers_of(&json!([
            {"name": "files", "command": "mcp-files", "args": ["/data"], "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "docs", "url": "https://mcp.example.com", "headers": []}
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            servers.programs().collect::<Vec<_>>(),
            [("files", "mcp-files")]
        );
        assert!(servers_of(&json!([])).unwrap().is_none());
        for bad in [
            json!([{"name": "x y", "command": "c"}]),
            json!([{"name": "x", "command": ""}]),
            json!([{"type": "sse", "name": "x", "url": "https://a"}]),
            json!([{"name": "x", "command": "c", "env": [{"name": "A"}]}]),
            json!({"x": 1}),
        ] {
            assert!(servers_of(&bad).is_err(), "{bad}");
        }
    }
}
