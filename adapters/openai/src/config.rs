//! What one run sends: the endpoint, the key and the request body, decided
//! from the prompt, the run's options and the environment the run was
//! granted. Refusals happen here, before anything is sent.

use moat_guest::http::Request;
use moat_guest::json::{Map, Value, json};
use moat_guest::{ErrorInfo, Options};
use moat_llm_support::endpoint::{ToolSchema, Vendor};
use moat_llm_support::{Config, Rules};

/// The public API, used when neither `options.extra.base_url` nor
/// [`BASE_URL_VAR`] names another server.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The host the default base URL needs (declared in `info()`).
pub const DEFAULT_HOST: &str = "api.openai.com:443";
/// The variable holding the API key (optional for local servers).
pub const KEY_VAR: &str = "OPENAI_API_KEY";
/// The variable naming another OpenAI-compatible server, e.g.
/// `http://localhost:11434/v1` for Ollama.
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";

/// What the shared code says of this vendor.
pub const VENDOR: Vendor = Vendor {
    adapter: "openai",
    api: "Chat Completions",
    key_var: KEY_VAR,
    base_url_var: BASE_URL_VAR,
    default_base_url: DEFAULT_BASE_URL,
    path: "/chat/completions",
    base_url_example: "e.g. http://localhost:11434/v1",
    model_examples: "gpt-4o-mini, or llama3.2 for Ollama",
};

/// What the adapter accepts of a run: the shared rules, `stream_options`
/// reserved too (the adapter always asks for usage), and tools in the
/// Chat Completions schema.
const RULES: Rules = Rules {
    vendor: VENDOR,
    reserved: &[("stream_options", "the adapter always asks for usage")],
    tools: TOOLS,
};

/// Chat Completions names a tool in `function.name`.
const TOOLS: ToolSchema<'static> = ToolSchema {
    name_of: |tool| tool.pointer("/function/name").and_then(Value::as_str),
    nameless: "each of options.extra.tools needs function.name (the Chat Completions tool schema)",
    with_tools: &["tool_choice", "parallel_tool_calls"],
};

/// Decides the request from the run's inputs; `env` reads a variable of
/// the run's (granted) environment. An error is the run's refusal.
pub fn configure(
    prompt: &str,
    options: &Options,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ErrorInfo> {
    let mut run = moat_llm_support::prepare(&RULES, options, env)?;
    if let Some(effort) = &options.effort {
        run.extra
            .entry("reasoning_effort")
            .or_insert_with(|| Value::String(effort.clone()));
    }
    let mut messages = Vec::new();
    if let Some(system) = &options.system_prompt {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let mut body = Map::new();
    body.insert("model".into(), Value::String(run.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Ok(run.into_config(body))
}

/// The HTTP request of `config`: the key, when there is one, as a bearer
/// token (local servers need none).
pub fn request(config: &Config) -> Request {
    let mut request = Request::new("POST", &config.endpoint.url)
        .with_header("content-type", "application/json")
        .with_header("accept", "text/event-stream");
    if let Some(key) = &config.endpoint.api_key {
        request = request.with_header("authorization", format!("Bearer {}", key.trim()));
    }
    request.with_body(config.body.to_string())
}

#[cfg(test)]
mod tests;
