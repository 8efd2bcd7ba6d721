//! JSON-RPC 2.0 as ACP frames it: one message per line of the agent's
//! stdout and stdin. Parsing sorts what the (untrusted) agent writes into
//! the three kinds of message, refusing anything else with a reason;
//! the builders write the client's messages.

use moat_guest::json::{Map, Value, json};

/// JSON-RPC: the method does not exist (or is not offered).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the parameters are not what the method takes.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the request failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP: the agent must be authenticated first.
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP: the resource (a file) does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The longest request id kept (ids are echoed back to the agent).
const MAX_ID: usize = 256;

/// A message from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call the client must answer (`fs/…`, `session/request_permission`).
    Request {
        /// Its id, echoed in the answer (a number or a string).
        id: Value,
        /// The method called.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A message that needs no answer (`session/update`).
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// The answer to one of the client's requests.
    Response {
        /// The id of the request it answers.
        id: Value,
        /// The result, or the agent's error.
        outcome: Result<Value, RpcError>,
    },
}

/// A JSON-RPC error: sent to the agent, or received from it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// The parameters of a request are not what the method takes.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// Parses one line the agent wrote. `Err` says why it is not a JSON-RPC
/// 2.0 message.
pub fn parse(line: &str) -> Result<Incoming, String> {
    let Some(mut object) = moat_cli_support::parse_line(line) else {
        return Err("not a JSON object".into());
    };
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err("no \"jsonrpc\": \"2.0\"".into());
    }
    let id = object.remove("id");
    if let Some(id) = &id {
        let valid = match id {
            Value::Number(_) => true,
            Value::String(id) => id.len() <= MAX_ID,
            _ => false,
        };
        if !valid {
            return Err("an id that is neither a number nor a short string".into());
        }
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err("a method that is not a string".into()),
        (None, Some(id)) => {
            let outcome = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(received_error(&error)?),
                _ => return Err("a response with neither or both of result and error".into()),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err("neither a method nor an id".into()),
    }
}

/// The error object of a response.
fn received_error(error: &Value) -> Result<RpcError, String> {
    let code = error["code"]
        .as_i64()
        .ok_or("an error without an integer code")?;
    let mut message = error["message"]
        .as_str()
        .unwrap_or("(no message)")
        .to_owned();
    // Agents put the specifics there ("Internal error" alone says little).
    if !error["data"].is_null() {
        message.push_str(&format!(
            " ({})",
            moat_cli_support::clip(&error["data"].to_string(), 1000)
        ));
    }
    Ok(RpcError::new(
        code,
        moat_cli_support::clip(&message, moat_cli_support::MAX_MESSAGE),
    ))
}

/// The line of a request the client sends.
pub fn request(id: u64, method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// The line of a notification the client sends.
pub fn notification(method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// The line answering the agent's request `id`.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> String {
    let mut message = Map::new();
    message.insert("jsonrpc".into(), "2.0".into());
    message.insert("id".into(), id.clone());
    match outcome {
        Ok(result) => message.insert("result".into(), result),
        Err(error) => message.insert(
            "error".into(),
            json!({"code": error.code, "message": error.message}),
        ),
    };
    line(Value::Object(message))
}

fn line(message: Value) -> String {
    let mut line = message.to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kinds_of_message_are_told_apart() {
        assert_eq!(
            parse(
                r#"{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"path":"/a"}}"#
            ),
            Ok(Incoming::Request {
                id: json!(3),
                method: "fs/read_text_file".into(),
                params: json!({"path": "/a"}),
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/update"}"#),
            Ok(Incoming::Notification {
                method: "session/update".into(),
                params: Value::Null,
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#),
            Ok(Incoming::Response {
                id: json!("a"),
                outcome: Ok(json!({"x": 1})),
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"log in"}}"#),
            Ok(Incoming::Response {
                id: json!(1),
                outcome: Err(RpcError::new(AUTH_REQUIRED, "log in")),
            })
        );
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        for bad in [
            "loading...",
            "[1]",
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":7}"#,
            r#"{"jsonrpc":"2.0"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_echo_the_id_and_carry_a_result_or_an_error() {
        let ok: Value = serde(&response(&json!("r1"), Ok(json!({}))));
        assert_eq!(ok, json!({"jsonrpc": "2.0", "id": "r1", "result": {}}));
        let error: Value = serde(&response(
            &json!(2),
            Err(RpcError::new(METHOD_NOT_FOUND, "no")),
        ));
        assert_eq!(error["error"], json!({"code": -32601, "message": "no"}));
        assert!(request(1, "initialize", json!({})).ends_with('\n'));
    }

    fn serde(line: &str) -> Value {
        moat_guest::serde_json::from_str(line).unwrap()
    }
}
