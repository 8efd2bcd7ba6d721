//! JSON-RPC 2.0 as ACP frames it: one message per line. Every line from
//! the editor is checked here before anything reads it; what is not a
//! request, a notification or a response to one of ours is answered with
//! the standard error codes.

use serde_json::{Value, json};

/// The most a line from the editor may hold: a prompt with files embedded
/// is large, but not this large.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A JSON-RPC error: its code and a message the user can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// A standard JSON-RPC code, or one of ACP's.
    pub code: i64,
    /// What went wrong and, where there is one, what to do.
    pub message: String,
}

impl RpcError {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method's parameters are wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Anything else that failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the session, or the thing named, does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;

    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Wrong parameters.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, message)
    }

    /// A failure of moat's, not of the editor's message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Self::INTERNAL_ERROR, message)
    }

    /// As the `error` member of a response.
    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// A request or response id: a number or a string, as the sender chose.
pub type Id = Value;

/// One message from the editor, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call the editor waits for the answer of.
    Request {
        /// Its id, echoed in the answer.
        id: Id,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A call without an answer.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// The answer to one of moat's requests.
    Response {
        /// The id of moat's request.
        id: Id,
        /// Its result, or the editor's error.
        outcome: Result<Value, RpcError>,
    },
}

/// Reads one line. An error carries the id to answer with, when the line
/// had a usable one.
pub fn parse(line: &str) -> Result<Incoming, (Option<Id>, RpcError)> {
    let value: Value = serde_json::from_str(line).map_err(|error| {
        (
            None,
            RpcError::new(RpcError::PARSE_ERROR, format!("not JSON: {error}")),
        )
    })?;
    let Value::Object(mut message) = value else {
        return Err((None, invalid("a message must be a JSON object")));
    };
    let id = match message.remove("id") {
        None => None,
        Some(id @ (Value::Number(_) | Value::String(_))) => Some(id),
        Some(_) => return Err((None, invalid("id must be a number or a string"))),
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, invalid("jsonrpc must be \"2.0\"")));
    }
    let params = message.remove("params").unwrap_or(Value::Null);
    if !matches!(params, Value::Object(_) | Value::Array(_) | Value::Null) {
        return Err((id, invalid("params must be an object or an array")));
    }
    match (message.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err((id, invalid("method must be a string"))),
        (None, Some(id)) => response(id, message),
        (None, None) => Err((None, invalid("a message needs a method or an id"))),
    }
}

fn response(
    id: Id,
    mut message: serde_json::Map<String, Value>,
) -> Result<Incoming, (Option<Id>, RpcError)> {
    let outcome = match (message.remove("result"), message.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_owned(),
        }),
        _ => {
            return Err((
                None,
                invalid("a response needs exactly one of result and error"),
            ));
        }
    };
    Ok(Incoming::Response { id, outcome })
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(RpcError::INVALID_REQUEST, message)
}

/// The answer to request `id`.
pub fn answer(id: &Id, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
    }
}

/// An error answer to a line that had no usable id.
pub fn error_without_id(error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": error.to_json()})
}

/// A request of moat's to the editor.
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification of moat's to the editor.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).unwrap(),
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({})
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#)
                .unwrap(),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({"sessionId": "s"})
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#).unwrap(),
            Incoming::Response {
                id: json!("a"),
                outcome: Ok(json!({"x": 1}))
            }
        );
        let Incoming::Response { outcome, .. } =
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no"}}"#).unwrap()
        else {
            panic!("a response")
        };
        assert_eq!(outcome.unwrap_err().code, -32000);
    }

    #[test]
    fn malformed_lines_get_the_standard_codes_and_the_id_when_usable() {
        let code = |line: &str| parse(line).unwrap_err();
        assert_eq!(code("{").1.code, RpcError::PARSE_ERROR);
        assert_eq!(code("[1]").1.code, RpcError::INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#),
            (Some(json!(7)), invalid("jsonrpc must be \"2.0\""))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).1.code,
            RpcError::INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#).0,
            Some(json!(1))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#)
                .1
                .code,
            RpcError::INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0"}"#).1.code,
            RpcError::INVALID_REQUEST
        );
    }
}
