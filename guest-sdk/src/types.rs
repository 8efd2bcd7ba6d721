//! Constructors and defaults for the generated contract types.

use serde::de::DeserializeOwned;

use crate::json::{self, Map, Value};
use crate::{
    AdapterInfo, Cost, CostSource, ErrorInfo, InputTokens, Needs, Options, OutputTokens,
    TokenCoverage, TokenReport, TrustLevel, Usage,
};

impl AdapterInfo {
    /// Describes an adapter that needs nothing from the host and takes tool
    /// names literally (no patterns).
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        AdapterInfo {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            needs: Needs::default(),
            tool_patterns: false,
        }
    }

    /// Sets what the adapter needs from the host (shown by `moat inspect`).
    pub fn with_needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }

    /// Declares that tool names in allowed/disallowed lists may be patterns
    /// the adapter understands.
    pub fn with_tool_patterns(mut self, tool_patterns: bool) -> Self {
        self.tool_patterns = tool_patterns;
        self
    }
}

/// Nothing: no hosts, no environment variables, no programs.
impl Default for Needs {
    fn default() -> Self {
        Needs {
            hosts: Vec::new(),
            env: Vec::new(),
            programs: Vec::new(),
        }
    }
}

impl Needs {
    /// Adds network hosts, as `"host"` or `"host:port"`.
    pub fn with_hosts<S: Into<String>>(mut self, hosts: impl IntoIterator<Item = S>) -> Self {
        self.hosts.extend(hosts.into_iter().map(Into::into));
        self
    }

    /// Adds environment variable names.
    pub fn with_env<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.env.extend(names.into_iter().map(Into::into));
        self
    }

    /// Adds programs to spawn, by name or path.
    pub fn with_programs<S: Into<String>>(mut self, programs: impl IntoIterator<Item = S>) -> Self {
        self.programs.extend(programs.into_iter().map(Into::into));
        self
    }
}

impl ErrorInfo {
    /// An error with a machine-readable `code` (e.g. `"AUTH_FAILED"`).
    pub fn new(code: impl Into<String>, message: impl Into<String>, recoverable: bool) -> Self {
        ErrorInfo {
            code: Some(code.into()),
            message: message.into(),
            recoverable,
        }
    }

    /// An error without a code.
    pub fn without_code(message: impl Into<String>, recoverable: bool) -> Self {
        ErrorInfo {
            code: None,
            message: message.into(),
            recoverable,
        }
    }
}

/// The safest level: no backend-native file, web or shell tools.
impl Default for TrustLevel {
    fn default() -> Self {
        TrustLevel::Sandbox
    }
}

/// No option set, no tool restriction, [`TrustLevel::Sandbox`]. Useful in
/// native tests of an adapter.
impl Default for Options {
    fn default() -> Self {
        Options {
            cwd: None,
            model: None,
            max_turns: None,
            max_budget_usd: None,
            effort: None,
            resume: None,
            allowed_tools: None,
            disallowed_tools: Vec::new(),
            trust: TrustLevel::default(),
            system_prompt: None,
            extra: None,
            directories: Vec::new(),
            mcp_servers: None,
            agents: None,
        }
    }
}

impl Options {
    /// Parses `extra` (adapter-specific options) into `T`; `None` when the
    /// caller gave none. A parse failure is an [`INVALID_OPTIONS`] error to
    /// return from [`Adapter::start`](crate::Adapter::start).
    ///
    /// [`INVALID_OPTIONS`]: crate::json::INVALID_OPTIONS
    pub fn parse_extra<T: DeserializeOwned>(&self) -> Result<Option<T>, ErrorInfo> {
        self.extra
            .as_deref()
            .map(|text| json::parse("options.extra", text))
            .transpose()
    }

    /// `extra` as a JSON object: empty when absent, an
    /// [`INVALID_OPTIONS`](crate::json::INVALID_OPTIONS) error when it is
    /// not an object.
    pub fn extra_object(&self) -> Result<Map<String, Value>, ErrorInfo> {
        Ok(self.parse_extra()?.unwrap_or_default())
    }
}

/// No tool calls, tokens and cost unknown.
impl Default for Usage {
    fn default() -> Self {
        Usage {
            tool_uses: 0,
            tokens: None,
            cost: None,
        }
    }
}

impl Usage {
    /// Usage with `tool_uses` distinct tool calls; tokens and cost unknown.
    pub fn new(tool_uses: u32) -> Self {
        Usage {
            tool_uses,
            ..Usage::default()
        }
    }

    /// Sets the token report. Only numbers the backend reported: never
    /// estimate.
    pub fn with_tokens(mut self, tokens: TokenReport) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Sets the cost of the run.
    pub fn with_cost(mut self, cost: Cost) -> Self {
        self.cost = Some(cost);
        self
    }
}

impl TokenReport {
    /// A token report; `input` and `output` totals include their details.
    pub fn new(coverage: TokenCoverage, input: InputTokens, output: OutputTokens) -> Self {
        TokenReport {
            coverage,
            input,
            output,
        }
    }
}

impl InputTokens {
    /// `total` input tokens, cache details unknown.
    pub fn new(total: u64) -> Self {
        InputTokens {
            total,
            cache_read: None,
            cache_write: None,
        }
    }

    /// Sets the tokens read from the prompt cache (part of the total).
    pub fn with_cache_read(mut self, tokens: u64) -> Self {
        self.cache_read = Some(tokens);
        self
    }

    /// Sets the tokens written to the prompt cache (part of the total).
    pub fn with_cache_write(mut self, tokens: u64) -> Self {
        self.cache_write = Some(tokens);
        self
    }
}

impl OutputTokens {
    /// `total` output tokens, reasoning detail unknown.
    pub fn new(total: u64) -> Self {
        OutputTokens {
            total,
            reasoning: None,
        }
    }

    /// Sets the tokens spent on reasoning (part of the total).
    pub fn with_reasoning(mut self, tokens: u64) -> Self {
        self.reasoning = Some(tokens);
        self
    }
}

impl Cost {
    /// A cost of `usd` US dollars, and who computed it.
    pub fn new(usd: f64, source: CostSource) -> Self {
        Cost { usd, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn adapter_info_defaults_to_needing_nothing() {
        let info = AdapterInfo::new("x", "1.0.0", "an adapter");
        assert_eq!(info.needs, Needs::default());
        assert!(!info.tool_patterns);
        let info = info
            .with_needs(
                Needs::default()
                    .with_hosts(["api.example.com:443"])
                    .with_env(["EXAMPLE_KEY"])
                    .with_programs(["example"]),
            )
            .with_tool_patterns(true);
        assert_eq!(info.needs.hosts, ["api.example.com:443"]);
        assert_eq!(info.needs.env, ["EXAMPLE_KEY"]);
        assert_eq!(info.needs.programs, ["example"]);
        assert!(info.tool_patterns);
    }

    #[test]
    fn default_options_restrict_nothing_and_trust_least() {
        let options = Options::default();
        assert_eq!(options.trust, TrustLevel::Sandbox);
        assert_eq!(options.allowed_tools, None);
        assert!(options.disallowed_tools.is_empty());
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Extra {
        temperature: f64,
    }

    fn with_extra(extra: Option<&str>) -> Options {
        Options {
            extra: extra.map(str::to_owned),
            ..Options::default()
        }
    }

    #[test]
    fn extra_parses_into_a_type_or_refuses_with_invalid_options() {
        assert_eq!(with_extra(None).parse_extra::<Extra>(), Ok(None));
        assert_eq!(
            with_extra(Some(r#"{"temperature": 0.5}"#)).parse_extra(),
            Ok(Some(Extra { temperature: 0.5 }))
        );
        let error = with_extra(Some(r#"{"temperature": "hot"}"#))
            .parse_extra::<Extra>()
            .unwrap_err();
        assert_eq!(error.code.as_deref(), Some(json::INVALID_OPTIONS));
        assert!(error.message.contains("options.extra"), "{}", error.message);
        assert!(!error.recoverable);
    }

    #[test]
    fn extra_object_is_empty_when_absent_and_refuses_non_objects() {
        assert!(with_extra(None).extra_object().unwrap().is_empty());
        let object = with_extra(Some(r#"{"a": 1}"#)).extra_object().unwrap();
        assert_eq!(object["a"], 1);
        assert!(with_extra(Some("[1]")).extra_object().is_err());
        assert!(with_extra(Some("{not json")).extra_object().is_err());
    }
}
