//! What one run sends: the endpoint, the key and the request body, decided
//! from the prompt, the run's options and the environment the run was
//! granted. Refusals happen here, before anything is sent.

use moat_guest::http::Request;
use moat_guest::json::{INVALID_OPTIONS, Map, Value, json};
use moat_guest::{ErrorInfo, Options};

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
/// The code of a refusal to honour an option.
pub const UNSUPPORTED_OPTION: &str = "UNSUPPORTED_OPTION";

/// Keys of `options.extra` the adapter sets itself: the caller sets them
/// through the run's options instead.
const RESERVED: &[(&str, &str)] = &[
    ("model", "pass the model with --model (options.model)"),
    (
        "messages",
        "the prompt and options.system-prompt make the messages",
    ),
    ("stream", "the adapter always streams"),
    (
        "system",
        "pass the system prompt with --system (options.system-prompt)",
    ),
];

/// Where the base URL came from, to say so in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseSource {
    /// `options.extra.base_url`.
    Options,
    /// The [`BASE_URL_VAR`] environment variable.
    Env,
    /// [`DEFAULT_BASE_URL`].
    Default,
}

impl BaseSource {
    /// How a message names the source.
    pub fn describe(self) -> &'static str {
        match self {
            BaseSource::Options => "options.extra.base_url",
            BaseSource::Env => BASE_URL_VAR,
            BaseSource::Default => "the default base URL",
        }
    }
}

/// One run's request, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `{base}/chat/completions`.
    pub url: String,
    pub base_source: BaseSource,
    /// `host:port` of the URL (the port filled in from the scheme), as
    /// `--allow-net` takes it.
    pub grant: String,
    pub api_key: Option<String>,
    pub model: String,
    /// Names of the tools offered to the model, after the allowed and
    /// disallowed lists.
    pub tools: Vec<String>,
    /// The JSON request body.
    pub body: Value,
}

impl Config {
    /// Decides the request from the run's inputs; `env` reads a variable of
    /// the run's (granted) environment. An error is the run's refusal.
    pub fn new(
        prompt: &str,
        options: &Options,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ErrorInfo> {
        if options.resume.is_some() {
            return Err(ErrorInfo::new(
                UNSUPPORTED_OPTION,
                "the Messages API keeps no session on the server, so a resume token cannot be honoured",
                false,
            ));
        }
        if options.max_budget_usd.is_some() {
            return Err(ErrorInfo::new(
                UNSUPPORTED_OPTION,
                "the anthropic adapter has no price table and cannot enforce a budget; leave max-budget-usd out",
                false,
            ));
        }
        let model = options
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ErrorInfo::new(
                    INVALID_OPTIONS,
                    "the anthropic adapter needs a model: pass --model (e.g. claude-sonnet-4-5)",
                    false,
                )
            })?
            .to_owned();

        let mut extra = options.extra_object()?;
        let base_override = match extra.remove("base_url") {
            None => None,
            Some(Value::String(url)) => Some(url),
            Some(_) => return Err(invalid("options.extra.base_url must be a string")),
        };
        for (key, why) in RESERVED {
            if extra.contains_key(*key) {
                return Err(invalid(&format!(
                    "options.extra.{key} cannot be set: {why}"
                )));
            }
        }
        let (base, base_source) = match (base_override, env(BASE_URL_VAR)) {
            (Some(url), _) => (url, BaseSource::Options),
            (None, Some(url)) if !url.trim().is_empty() => (url, BaseSource::Env),
            _ => (DEFAULT_BASE_URL.to_owned(), BaseSource::Default),
        };
        let base = base.trim().trim_end_matches('/').to_owned();
        let grant = grant_of(&base).ok_or_else(|| {
            invalid(&format!(
                "the base URL {base:?} (from {}) is not an http:// or https:// URL",
                base_source.describe()
            ))
        })?;

        let tools = filter_tools(&mut extra, options)?;
        if options.effort.is_some() {
            return Err(ErrorInfo::new(
                UNSUPPORTED_OPTION,
                "the Messages API has no effort setting; set extended thinking in options.extra.thinking, e.g. {\"type\": \"enabled\", \"budget_tokens\": 2048}",
                false,
            ));
        }

        let mut body = Map::new();
        body.insert("model".into(), Value::String(model.clone()));
        body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
        body.insert(
            "messages".into(),
            json!([{"role": "user", "content": prompt}]),
        );
        if let Some(system) = &options.system_prompt {
            body.insert("system".into(), Value::String(system.clone()));
        }
        body.insert("stream".into(), Value::Bool(true));
        body.extend(extra);

        Ok(Config {
            url: format!("{base}/v1/messages"),
            base_source,
            grant,
            api_key: env(KEY_VAR).filter(|key| !key.trim().is_empty()),
            model,
            tools,
            body: Value::Object(body),
        })
    }

    /// Whether the key would travel unencrypted beyond this machine: plain
    /// `http://` to a host that is not loopback.
    pub fn key_in_clear(&self) -> bool {
        let host = self
            .grant
            .rsplit_once(':')
            .map_or(self.grant.as_str(), |(host, _)| host);
        let loopback = host == "localhost" || host == "[::1]" || host.starts_with("127.");
        self.api_key.is_some() && self.url.to_ascii_lowercase().starts_with("http://") && !loopback
    }

    /// The HTTP request.
    pub fn request(&self) -> Request {
        let mut request = Request::new("POST", &self.url)
            .with_header("content-type", "application/json")
            .with_header("accept", "text/event-stream")
            .with_header("anthropic-version", API_VERSION);
        if let Some(key) = &self.api_key {
            request = request.with_header("x-api-key", key.trim());
        }
        request.with_body(self.body.to_string())
    }
}

fn invalid(message: &str) -> ErrorInfo {
    ErrorInfo::new(INVALID_OPTIONS, message, false)
}

/// `host:port` of an `http(s)://` URL, as `--allow-net` takes it; `None`
/// when it is not such a URL.
pub fn grant_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    // Credentials in the URL are not part of the grant.
    let authority = authority.rsplit('@').next()?;
    if authority.is_empty() {
        return None;
    }
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    Some(if has_port {
        authority.to_ascii_lowercase()
    } else {
        format!("{}:{default_port}", authority.to_ascii_lowercase())
    })
}

/// Keeps the tools of `extra.tools` the run allows (ENG-013: the allowed
/// list when given, minus the disallowed list) and returns their names.
/// With none left, the tool keys go too: an empty `tools` array is refused
/// by some servers.
fn filter_tools(
    extra: &mut Map<String, Value>,
    options: &Options,
) -> Result<Vec<String>, ErrorInfo> {
    let Some(tools) = extra.remove("tools") else {
        return Ok(Vec::new());
    };
    let Value::Array(tools) = tools else {
        return Err(invalid("options.extra.tools must be an array of tools"));
    };
    let mut kept = Vec::new();
    let mut names = Vec::new();
    for tool in tools {
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                invalid("each of options.extra.tools needs a name (the Messages API tool schema)")
            })?
            .to_owned();
        let allowed = options
            .allowed_tools
            .as_ref()
            .is_none_or(|allowed| allowed.contains(&name))
            && !options.disallowed_tools.contains(&name);
        if allowed {
            names.push(name);
            kept.push(tool);
        }
    }
    if kept.is_empty() {
        extra.remove("tool_choice");
    } else {
        extra.insert("tools".into(), Value::Array(kept));
    }
    Ok(names)
}

#[cfg(test)]
mod tests;
