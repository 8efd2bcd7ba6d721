//! JSON helpers.
//!
//! Free-form JSON (tool input and output, metadata, capabilities, extension
//! payloads, `options.extra`) crosses the component boundary as text. The
//! host parses every such field and drops an event whose JSON is invalid
//! (`INVALID_EVENT`), so build these fields from [`Value`]s rather than by
//! formatting strings: the builders on [`Event`](crate::Event) take `&Value`
//! and encode it with [`encode`].

pub use serde_json::{Map, Value, json};

use serde::de::DeserializeOwned;

use crate::ErrorInfo;

/// The error code an adapter uses to refuse options it cannot parse.
pub const INVALID_OPTIONS: &str = "INVALID_OPTIONS";

/// Encodes a JSON value as the text a JSON field of an event carries.
///
/// Never fails: a [`Value`] always has a valid JSON encoding.
pub fn encode(value: &Value) -> String {
    value.to_string()
}

/// Parses the JSON text of a field into `T`, turning a failure into a
/// non-recoverable [`INVALID_OPTIONS`] error that names `field`, ready to be
/// returned from [`Adapter::start`](crate::Adapter::start).
pub fn parse<T: DeserializeOwned>(field: &str, text: &str) -> Result<T, ErrorInfo> {
    serde_json::from_str(text).map_err(|err| {
        ErrorInfo::new(
            INVALID_OPTIONS,
            format!("{field} is not valid for this adapter: {err}"),
            false,
        )
    })
}
