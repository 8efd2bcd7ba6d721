//! Whether and where traces go ([`OtelConfig`]): the standard `OTEL_*`
//! variables, or `--otel[=URL]`.
//!
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as it is;
//! - else `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL,
//!   `/v1/traces` appended;
//! - `--otel=URL` is a base URL too and wins over both; `--otel` alone
//!   takes the variables, else [`DEFAULT_ENDPOINT`];
//! - `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn the
//!   variables off (an explicit `--otel` still exports).
//!
//! Headers (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TRACES_HEADERS`), the export
//! timeout, the service name (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`)
//! and the batch processor's queue (`OTEL_BSP_*`) are read by the
//! OpenTelemetry crates themselves.

use crate::TelemetryError;

/// Where an OTLP collector listens when `--otel` names none.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The path of the traces signal under a collector's base URL.
const TRACES_PATH: &str = "/v1/traces";

/// Traces are exported, to this endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtelConfig {
    /// The full traces URL (`http://host:4318/v1/traces`).
    pub traces_endpoint: String,
}

impl OtelConfig {
    /// The configuration from the process's environment and the `--otel`
    /// flag (`None`: not given; `Some(None)`: given without a URL);
    /// `Ok(None)`: no traces.
    pub fn from_env(flag: Option<Option<&str>>) -> Result<Option<Self>, TelemetryError> {
        Self::from_vars(flag, |name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with the variables read by `var`.
    pub fn from_vars(
        flag: Option<Option<&str>>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        let from_vars = || {
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| traces_url(&base)))
        };
        let endpoint = match flag {
            Some(Some(url)) => traces_url(url),
            Some(None) => from_vars().unwrap_or_else(|| traces_url(DEFAULT_ENDPOINT)),
            None => {
                let disabled = set("OTEL_SDK_DISABLED")
                    .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
                    || set("OTEL_TRACES_EXPORTER")
                        .is_some_and(|value| value.trim().eq_ignore_ascii_case("none"));
                match from_vars() {
                    Some(endpoint) if !disabled => endpoint,
                    _ => return Ok(None),
                }
            }
        };
        let endpoint = endpoint.trim().to_owned();
        let uri: http::Uri = endpoint
            .parse()
            .map_err(|e| TelemetryError::Endpoint(endpoint.clone(), format!("{e}")))?;
        match uri.scheme_str() {
            Some("http") if uri.host().is_some() => {}
            Some("https") => {
                return Err(TelemetryError::Endpoint(
                    endpoint,
                    "moat exports over plain HTTP only: point it at a local collector (or an agent) that forwards over TLS".into(),
                ));
            }
            _ => {
                return Err(TelemetryError::Endpoint(
                    endpoint,
                    "not an http://HOST[:PORT] URL".into(),
                ));
            }
        }
        Ok(Some(Self {
            traces_endpoint: endpoint,
        }))
    }
}

/// The traces URL under the collector's base URL `base`.
fn traces_url(base: &str) -> String {
    format!("{}{TRACES_PATH}", base.trim().trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flag: Option<Option<&str>>, vars: &[(&str, &str)]) -> Option<String> {
        OtelConfig::from_vars(flag, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .expect("valid")
        .map(|c| c.traces_endpoint)
    }

    #[test]
    fn nothing_set_exports_nothing() {
        assert_eq!(config(None, &[]), None);
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path() {
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")];
        assert_eq!(
            config(None, &vars).as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
    }

    #[test]
    fn the_traces_endpoint_is_used_as_it_is_and_wins() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:9999/traces"),
        ];
        assert_eq!(config(None, &vars).as_deref(), Some("http://b:9999/traces"));
    }

    #[test]
    fn disabled_turns_the_variables_off_but_not_the_flag() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ];
        assert_eq!(config(None, &vars), None);
        assert_eq!(
            config(Some(None), &vars).as_deref(),
            Some("http://a:4318/v1/traces")
        );
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert_eq!(config(None, &none), None);
    }

    #[test]
    fn the_flag_wins_and_defaults_to_localhost() {
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318")];
        assert_eq!(
            config(Some(Some("http://c:1")), &vars).as_deref(),
            Some("http://c:1/v1/traces")
        );
        assert_eq!(
            config(Some(None), &[]).as_deref(),
            Some("http://localhost:4318/v1/traces")
        );
    }

    #[test]
    fn https_and_garbage_are_refused() {
        for url in ["https://collector:4318", "collector:4318", "not a url"] {
            let result = OtelConfig::from_vars(Some(Some(url)), |_| None);
            assert!(
                matches!(result, Err(TelemetryError::Endpoint(..))),
                "{url}: {result:?}"
            );
        }
    }
}
