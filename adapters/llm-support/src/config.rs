//! One run's request as both adapters decide it: the checks and the
//! endpoint are shared, the body is the vendor's (built by the adapter
//! from a [`Prepared`] run).

use moat_guest::json::{Map, Value};
use moat_guest::{ErrorInfo, Options};

use crate::endpoint::{self, Endpoint, ToolSchema, Vendor};

/// What a vendor's adapter accepts of a run, besides its names.
pub struct Rules {
    /// The vendor's names.
    pub vendor: Vendor,
    /// Keys of `options.extra` the vendor's adapter sets itself besides
    /// [`endpoint::RESERVED`], each with how the caller sets it instead.
    pub reserved: &'static [(&'static str, &'static str)],
    /// How the vendor's tool schema names a tool.
    pub tools: ToolSchema<'static>,
}

/// A run that passed the shared checks; the adapter makes the body.
#[derive(Debug)]
pub struct Prepared {
    /// Where the request goes.
    pub endpoint: Endpoint,
    /// The model (trimmed, not empty).
    pub model: String,
    /// Names of the tools offered to the model, after the allowed and
    /// disallowed lists.
    pub tools: Vec<String>,
    /// What is left of `options.extra`: merged into the body last.
    pub extra: Map<String, Value>,
}

/// Checks a run against `rules` and resolves its endpoint; `env` reads a
/// variable of the run's (granted) environment. An error is the run's
/// refusal.
pub fn prepare(
    rules: &Rules,
    options: &Options,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Prepared, ErrorInfo> {
    endpoint::refuse_unsupported(&rules.vendor, options)?;
    let model = endpoint::require_model(&rules.vendor, options)?;
    let mut extra = options.extra_object()?;
    let base_override = endpoint::take_base_url(&mut extra)?;
    endpoint::check_reserved(&extra, rules.reserved)?;
    let endpoint = Endpoint::resolve(rules.vendor, base_override, env)?;
    let tools = endpoint::filter_tools(&mut extra, options, &rules.tools)?;
    Ok(Prepared {
        endpoint,
        model,
        tools,
        extra,
    })
}

/// One run's request, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the request goes, and the key.
    pub endpoint: Endpoint,
    /// The model asked for.
    pub model: String,
    /// Names of the tools offered to the model.
    pub tools: Vec<String>,
    /// The JSON request body.
    pub body: Value,
}

impl Prepared {
    /// The run's config with the vendor's `body` (`extra` merged in last,
    /// so the caller's fields win over the adapter's defaults).
    pub fn into_config(self, mut body: Map<String, Value>) -> Config {
        body.extend(self.extra);
        Config {
            endpoint: self.endpoint,
            model: self.model,
            tools: self.tools,
            body: Value::Object(body),
        }
    }
}
