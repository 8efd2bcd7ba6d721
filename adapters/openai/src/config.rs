//! What one run sends: the endpoint, the key and the request body, decided
//! from the prompt, the run's options and the environment the run was
//! granted. Refusals happen here, before anything is sent.

use moat_guest::http::Request;
use moat_guest::json::{INVALID_OPTIONS, Map, Value, json};
use moat_guest::{ErrorInfo, Options};

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
    ("stream_options", "the adapter always asks for usage"),
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
                "Chat Completions keeps no session on the server, so a resume token cannot be honoured",
                false,
            ));
        }
        if options.max_budget_usd.is_some() {
            return Err(ErrorInfo::new(
                UNSUPPORTED_OPTION,
                "the openai adapter has no price table and cannot enforce a budget; leave max-budget-usd out",
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
                    "the openai adapter needs a model: pass --model (e.g. gpt-4o-mini, or llama3.2 for Ollama)",
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
        if let Some(effort) = &options.effort
            && !extra.contains_key("reasoning_effort")
        {
            extra.insert("reasoning_effort".into(), Value::String(effort.clone()));
        }

        let mut messages = Vec::new();
        if let Some(system) = &options.system_prompt {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": prompt}));
        let mut body = Map::new();
        body.insert("model".into(), Value::String(model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        body.extend(extra);

        Ok(Config {
            url: format!("{base}/chat/completions"),
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
            .with_header("accept", "text/event-stream");
        if let Some(key) = &self.api_key {
            request = request.with_header("authorization", format!("Bearer {}", key.trim()));
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
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                invalid(
                    "each of options.extra.tools needs function.name (the Chat Completions tool schema)",
                )
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
        extra.remove("parallel_tool_calls");
    } else {
        extra.insert("tools".into(), Value::Array(kept));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn options(model: Option<&str>, extra: Option<Value>) -> Options {
        Options {
            model: model.map(str::to_owned),
            extra: extra.map(|e| e.to_string()),
            ..Options::default()
        }
    }

    fn tools_json(names: &[&str]) -> Value {
        Value::Array(
            names
                .iter()
                .map(|n| json!({"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}))
                .collect(),
        )
    }

    #[test]
    fn the_default_is_the_public_api_with_streaming_and_usage() {
        let config = Config::new("hi", &options(Some("gpt-4o-mini"), None), env_of(&[])).unwrap();
        assert_eq!(config.url, "https://api.openai.com/v1/chat/completions");
        assert_eq!(config.grant, DEFAULT_HOST);
        assert_eq!(config.base_source, BaseSource::Default);
        assert_eq!(config.api_key, None);
        assert_eq!(
            config.body,
            json!({
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
        let request = config.request();
        assert!(
            !request.headers.iter().any(|(n, _)| n == "authorization"),
            "no key, no header (local servers)"
        );
    }

    #[test]
    fn the_base_url_comes_from_options_then_env_then_the_default() {
        let env = env_of(&[
            (BASE_URL_VAR, "http://localhost:11434/v1/"),
            (KEY_VAR, "sk-1"),
        ]);
        let config = Config::new("hi", &options(Some("llama3.2"), None), &env).unwrap();
        assert_eq!(config.url, "http://localhost:11434/v1/chat/completions");
        assert_eq!(config.grant, "localhost:11434");
        assert_eq!(config.base_source, BaseSource::Env);
        let request = config.request();
        assert!(
            request
                .headers
                .contains(&("authorization".into(), b"Bearer sk-1".to_vec()))
        );

        let extra = json!({"base_url": "http://127.0.0.1:9/v1"});
        let config = Config::new("hi", &options(Some("m"), Some(extra)), &env).unwrap();
        assert_eq!(config.url, "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(config.base_source, BaseSource::Options);
        assert!(
            config.body.get("base_url").is_none(),
            "not sent to the server"
        );
    }

    #[test]
    fn a_key_over_plain_http_beyond_loopback_is_flagged() {
        let config = |base: &str, key: Option<&str>| {
            let (base, key) = (base.to_owned(), key.map(str::to_owned));
            Config::new("hi", &options(Some("m"), None), move |name| match name {
                BASE_URL_VAR => Some(base.clone()),
                KEY_VAR => key.clone(),
                _ => None,
            })
            .unwrap()
        };
        assert!(config("http://gpu-box.lan:8000/v1", Some("k")).key_in_clear());
        assert!(!config("http://gpu-box.lan:8000/v1", None).key_in_clear());
        assert!(!config("https://gpu-box.lan/v1", Some("k")).key_in_clear());
        for local in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:8080/v1",
            "http://[::1]:1/v1",
        ] {
            assert!(!config(local, Some("k")).key_in_clear(), "{local}");
        }
    }

    #[test]
    fn grants_name_host_and_port_as_allow_net_takes_them() {
        assert_eq!(
            grant_of("https://API.example.com/v1").as_deref(),
            Some("api.example.com:443")
        );
        assert_eq!(grant_of("http://h:8080").as_deref(), Some("h:8080"));
        assert_eq!(grant_of("http://[::1]/v1").as_deref(), Some("[::1]:80"));
        assert_eq!(grant_of("http://[::1]:5/v1").as_deref(), Some("[::1]:5"));
        assert_eq!(grant_of("http://u:p@h:1/").as_deref(), Some("h:1"));
        assert_eq!(grant_of("ftp://h"), None);
        assert_eq!(grant_of("localhost:11434"), None);
    }

    #[test]
    fn a_run_without_a_model_or_with_what_chat_completions_cannot_do_is_refused() {
        let error = Config::new("hi", &options(None, None), env_of(&[])).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
        assert!(error.message.contains("--model"), "{}", error.message);
        let resume = Options {
            resume: Some("r".into()),
            ..options(Some("m"), None)
        };
        assert_eq!(
            Config::new("hi", &resume, env_of(&[]))
                .unwrap_err()
                .code
                .as_deref(),
            Some(UNSUPPORTED_OPTION)
        );
        let budget = Options {
            max_budget_usd: Some(1.0),
            ..options(Some("m"), None)
        };
        assert!(Config::new("hi", &budget, env_of(&[])).is_err());
        for extra in [
            json!({"stream": false}),
            json!({"model": "x"}),
            json!({"base_url": 1}),
        ] {
            let error =
                Config::new("hi", &options(Some("m"), Some(extra)), env_of(&[])).unwrap_err();
            assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
        }
        let bad_base = env_of(&[(BASE_URL_VAR, "localhost:11434")]);
        let error = Config::new("hi", &options(Some("m"), None), bad_base).unwrap_err();
        assert!(error.message.contains(BASE_URL_VAR), "{}", error.message);
    }

    #[test]
    fn system_prompt_effort_and_extra_fields_reach_the_body() {
        let run = Options {
            system_prompt: Some("be brief".into()),
            effort: Some("low".into()),
            ..options(
                Some("o3"),
                Some(json!({"temperature": 0.2, "max_tokens": 50})),
            )
        };
        let config = Config::new("hi", &run, env_of(&[])).unwrap();
        assert_eq!(
            config.body["messages"],
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
        );
        assert_eq!(config.body["reasoning_effort"], "low");
        assert_eq!(config.body["temperature"], 0.2);
        assert_eq!(config.body["max_tokens"], 50);
    }

    #[test]
    fn tools_are_filtered_by_the_allowed_and_disallowed_lists() {
        let extra =
            json!({"tools": tools_json(&["read", "write", "shell"]), "tool_choice": "auto"});
        let all = Config::new("hi", &options(Some("m"), Some(extra.clone())), env_of(&[])).unwrap();
        assert_eq!(all.tools, ["read", "write", "shell"]);
        assert_eq!(all.body["tools"], tools_json(&["read", "write", "shell"]));

        let run = Options {
            allowed_tools: Some(vec!["read".into(), "shell".into()]),
            disallowed_tools: vec!["shell".into()],
            ..options(Some("m"), Some(extra.clone()))
        };
        let some = Config::new("hi", &run, env_of(&[])).unwrap();
        assert_eq!(some.tools, ["read"]);
        assert_eq!(some.body["tools"], tools_json(&["read"]));
        assert_eq!(some.body["tool_choice"], "auto");

        let none = Options {
            allowed_tools: Some(Vec::new()),
            ..options(Some("m"), Some(extra))
        };
        let none = Config::new("hi", &none, env_of(&[])).unwrap();
        assert!(none.tools.is_empty());
        assert!(none.body.get("tools").is_none() && none.body.get("tool_choice").is_none());

        let nameless = json!({"tools": [{"type": "function"}]});
        assert!(Config::new("hi", &options(Some("m"), Some(nameless)), env_of(&[])).is_err());
    }
}
