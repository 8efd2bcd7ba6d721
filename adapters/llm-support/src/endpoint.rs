//! Where one run's request goes and with which key, decided from the run's
//! options and the environment it was granted, and the option checks every
//! LLM adapter makes. Refusals happen here, before anything is sent.

use moat_guest::json::{INVALID_OPTIONS, Map, Value};
use moat_guest::{AdapterInfo, ErrorInfo, Needs, Options};

/// The code of a refusal to honour an option.
pub const UNSUPPORTED_OPTION: &str = "UNSUPPORTED_OPTION";

/// What differs between the vendors where the shared code resolves the
/// endpoint or words a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vendor {
    /// The adapter's name, as messages name it (`the openai adapter`).
    pub adapter: &'static str,
    /// The API, as a sentence names it (`Chat Completions`,
    /// `the Messages API`).
    pub api: &'static str,
    /// The variable holding the API key.
    pub key_var: &'static str,
    /// The variable naming another server.
    pub base_url_var: &'static str,
    /// The public API, used when neither `options.extra.base_url` nor
    /// [`Vendor::base_url_var`] names another server.
    pub default_base_url: &'static str,
    /// The path appended to the base URL (`/chat/completions`).
    pub path: &'static str,
    /// What a base URL looks like, for the hint of an HTTP 404 (`e.g.
    /// http://localhost:11434/v1`).
    pub base_url_example: &'static str,
    /// Models to suggest when a run names none (`gpt-4o-mini`).
    pub model_examples: &'static str,
}

impl Vendor {
    /// The adapter's description: its name, `version` and `description`,
    /// and its declared needs: the public API's `host` (`host:port`) and the
    /// key and base-URL variables. A user pointing it at another server
    /// grants that host with `--allow-net`.
    pub fn adapter_info(&self, host: &str, version: &str, description: &str) -> AdapterInfo {
        AdapterInfo::new(self.adapter, version, description).with_needs(
            Needs::default()
                .with_hosts([host])
                .with_env([self.key_var, self.base_url_var]),
        )
    }
}

/// Where the base URL came from, to say so in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseSource {
    /// `options.extra.base_url`.
    Options,
    /// The vendor's base-URL environment variable.
    Env,
    /// The vendor's public API.
    Default,
}

impl BaseSource {
    /// How a message names the source; `base_url_var` is the vendor's
    /// variable.
    pub fn describe(self, base_url_var: &'static str) -> &'static str {
        match self {
            BaseSource::Options => "options.extra.base_url",
            BaseSource::Env => base_url_var,
            BaseSource::Default => "the default base URL",
        }
    }
}

/// Where one run's request goes, and the key it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The vendor whose names messages use.
    pub vendor: Vendor,
    /// The base URL (trimmed, without a trailing `/`) and the vendor's path.
    pub url: String,
    /// Where the base URL came from.
    pub base_source: BaseSource,
    /// `host:port` of the URL (the port filled in from the scheme), as
    /// `--allow-net` takes it.
    pub grant: String,
    /// The key from the vendor's variable, when set and not blank.
    pub api_key: Option<String>,
}

impl Endpoint {
    /// The endpoint of a run whose `options.extra.base_url` was
    /// `base_override` (see [`take_base_url`]); `env` reads a variable of
    /// the run's (granted) environment.
    pub fn resolve(
        vendor: Vendor,
        base_override: Option<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ErrorInfo> {
        let (base, base_source) = match (base_override, env(vendor.base_url_var)) {
            (Some(url), _) => (url, BaseSource::Options),
            (None, Some(url)) if !url.trim().is_empty() => (url, BaseSource::Env),
            _ => (vendor.default_base_url.to_owned(), BaseSource::Default),
        };
        let base = base.trim().trim_end_matches('/').to_owned();
        let grant = grant_of(&base).ok_or_else(|| {
            invalid(&format!(
                "the base URL {base:?} (from {}) is not an http:// or https:// URL",
                base_source.describe(vendor.base_url_var)
            ))
        })?;
        Ok(Endpoint {
            url: format!("{base}{}", vendor.path),
            base_source,
            grant,
            api_key: env(vendor.key_var).filter(|key| !key.trim().is_empty()),
            vendor,
        })
    }

    /// How a message names where the base URL came from.
    pub fn source(&self) -> &'static str {
        self.base_source.describe(self.vendor.base_url_var)
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
}

/// An `INVALID_OPTIONS` refusal.
pub fn invalid(message: &str) -> ErrorInfo {
    ErrorInfo::new(INVALID_OPTIONS, message, false)
}

/// Refuses what a model API cannot honour: a resume token (it keeps no
/// session), a budget (no prices), directories (no files) and sub-agents.
/// MCP servers are honoured: their tools are the adapter's tool loop.
pub fn refuse_unsupported(vendor: &Vendor, options: &Options) -> Result<(), ErrorInfo> {
    let refuse = |message: String| Err(ErrorInfo::new(UNSUPPORTED_OPTION, message, false));
    if !options.directories.is_empty() {
        return refuse(format!(
            "the {} adapter gives the model no files, so extra directories cannot be honoured",
            vendor.adapter
        ));
    }
    if options.agents.is_some() {
        return refuse(format!("{} has no sub-agents", vendor.api));
    }
    if options.resume.is_some() {
        return Err(ErrorInfo::new(
            UNSUPPORTED_OPTION,
            format!(
                "{} keeps no session on the server, so a resume token cannot be honoured",
                vendor.api
            ),
            false,
        ));
    }
    if options.max_budget_usd.is_some() {
        return Err(ErrorInfo::new(
            UNSUPPORTED_OPTION,
            format!(
                "the {} adapter has no price table and cannot enforce a budget; leave max-budget-usd out",
                vendor.adapter
            ),
            false,
        ));
    }
    Ok(())
}

/// The run's model, trimmed; a run without one is refused with the
/// vendor's example models.
pub fn require_model(vendor: &Vendor, options: &Options) -> Result<String, ErrorInfo> {
    options
        .model
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            invalid(&format!(
                "the {} adapter needs a model: pass --model (e.g. {})",
                vendor.adapter, vendor.model_examples
            ))
        })
}

/// Takes `base_url` out of `extra` (it is the adapter's, not the
/// server's): the URL, if set.
pub fn take_base_url(extra: &mut Map<String, Value>) -> Result<Option<String>, ErrorInfo> {
    match extra.remove("base_url") {
        None => Ok(None),
        Some(Value::String(url)) => Ok(Some(url)),
        Some(_) => Err(invalid("options.extra.base_url must be a string")),
    }
}

/// Keys of `options.extra` every LLM adapter sets itself, each with how
/// the caller sets it instead.
pub const RESERVED: &[(&str, &str)] = &[
    ("model", "pass the model with --model (options.model)"),
    (
        "messages",
        "the prompt and options.system-prompt make the messages",
    ),
    ("stream", "the adapter always streams"),
];

/// Refuses keys of `extra` the adapter sets itself: the [`RESERVED`] ones
/// and the vendor's `reserved` ones, each paired with how the caller sets
/// it instead.
pub fn check_reserved(
    extra: &Map<String, Value>,
    reserved: &[(&str, &str)],
) -> Result<(), ErrorInfo> {
    let mut all = RESERVED.iter().chain(reserved);
    match all.find(|(key, _)| extra.contains_key(*key)) {
        Some((key, why)) => Err(invalid(&format!(
            "options.extra.{key} cannot be set: {why}"
        ))),
        None => Ok(()),
    }
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

/// Whether the run's tool policy lets the model have the tool `name`
/// (ENG-013): on the allowed list when there is one, and not on the
/// disallowed list. Names are taken literally.
pub fn permits(options: &Options, name: &str) -> bool {
    options
        .allowed_tools
        .as_ref()
        .is_none_or(|allowed| allowed.iter().any(|a| a == name))
        && !options.disallowed_tools.iter().any(|d| d == name)
}

/// How a vendor's tool schema names a tool, and what the refusal of a
/// nameless one says.
pub struct ToolSchema<'a> {
    /// The tool's name in one entry of `tools`.
    pub name_of: fn(&Value) -> Option<&str>,
    /// The refusal of an entry without a name (it names the schema).
    pub nameless: &'a str,
    /// Keys of `extra` that only make sense with tools (`tool_choice`),
    /// removed with them.
    pub with_tools: &'a [&'a str],
}

/// Keeps the tools of `extra.tools` the run allows (ENG-013: the allowed
/// list when given, minus the disallowed list) and returns their names.
/// With none left, the tool keys go too: an empty `tools` array is refused
/// by some servers.
pub fn filter_tools(
    extra: &mut Map<String, Value>,
    options: &Options,
    schema: &ToolSchema<'_>,
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
        let name = (schema.name_of)(&tool)
            .ok_or_else(|| invalid(schema.nameless))?
            .to_owned();
        if permits(options, &name) {
            names.push(name);
            kept.push(tool);
        }
    }
    if kept.is_empty() {
        for key in schema.with_tools {
            extra.remove(*key);
        }
    } else {
        extra.insert("tools".into(), Value::Array(kept));
    }
    Ok(names)
}

#[cfg(test)]
mod tests;
