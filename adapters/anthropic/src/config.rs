//! What one run sends: the endpoint, the key and the request body, decided
//! from the prompt, the run's options and the environment the run was
//! granted. Refusals happen here, before anything is sent.

use moat_guest::http::Request;
use moat_guest::json::{Map, Value, json};
use moat_guest::{ErrorInfo, Options};
use moat_llm_support::endpoint::{ToolSchema, Vendor};
use moat_llm_support::{Config, Rules, UNSUPPORTED_OPTION};

/// The public API, used when neither `options.extra.base_url` nor
/// [`BASE_URL_VAR`] names another server. Without `/v1`, as Anthropic's
/// SDKs and Claude Code take it.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The host the default base URL needs (declared in `info()`).
pub const DEFAULT_HOST: &str = "api.anthropic.com:443";
/// The variable holding the API key.
pub const KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The variable naming another server (a proxy, a gateway, a test server).
pub const BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
/// The API version the adapter speaks (`anthropic-version`).
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when `options.extra` does not set it (the API requires it).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// What the shared code says of this vendor.
pub const VENDOR: Vendor = Vendor {
    adapter: "anthropic",
    api: "the Messages API",
    key_var: KEY_VAR,
    base_url_var: BASE_URL_VAR,
    default_base_url: DEFAULT_BASE_URL,
    path: "/v1/messages",
    base_url_example: "without /v1, e.g. https://api.anthropic.com",
    model_examples: "claude-sonnet-4-5",
};

/// What the adapter accepts of a run: the shared rules, `system`
/// reserved too (the system prompt is an option of the run), and tools in
/// the Messages API schema.
const RULES: Rules = Rules {
    vendor: VENDOR,
    reserved: &[(
        "system",
        "pass the system prompt with --system (options.system-prompt)",
    )],
    tools: TOOLS,
};

/// The Messages API names a tool at the top of its entry.
const TOOLS: ToolSchema<'static> = ToolSchema {
    name_of: |tool| tool.get("name").and_then(Value::as_str),
    nameless: "each of options.extra.tools needs a name (the Messages API tool schema)",
    with_tools: &["tool_choice"],
};

/// Decides the request from the run's inputs; `env` reads a variable of
/// the run's (granted) environment. An error is the run's refusal.
pub fn configure(
    prompt: &str,
    options: &Options,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ErrorInfo> {
    let run = moat_llm_support::prepare(&RULES, options, env)?;
    if options.effort.is_some() {
        return Err(ErrorInfo::new(
            UNSUPPORTED_OPTION,
            "the Messages API has no effort setting; set extended thinking in options.extra.thinking, e.g. {\"type\": \"enabled\", \"budget_tokens\": 2048}",
            false,
        ));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(run.model.clone()));
    body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    body.insert(
        "messages".into(),
        json!([{"role": "user", "content": prompt}]),
    );
    if let Some(system) = &options.system_prompt {
        body.insert("system".into(), Value::String(system.clone()));
    }
    body.insert("stream".into(), Value::Bool(true));
    Ok(run.into_config(body))
}

/// The HTTP request of `config`: the API version, and the key in
/// `x-api-key` when there is one.
pub fn request(config: &Config) -> Request {
    let mut request = Request::new("POST", &config.endpoint.url)
        .with_header("content-type", "application/json")
        .with_header("accept", "text/event-stream")
        .with_header("anthropic-version", API_VERSION);
    if let Some(key) = &config.endpoint.api_key {
        request = request.with_header("x-api-key", key.trim());
    }
    request.with_body(config.body.to_string())
}

#[cfg(test)]
mod tests;
