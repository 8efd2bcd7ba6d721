//! Which destinations speak a model API moat reads the usage of
//! ([`moat_meter`]): the vendors' own hosts, every destination of a vendor
//! key's secret grant, and `--meter HOST=VENDOR` rules for any other (an
//! Ollama, a vLLM, a gateway).
//!
//! A meter rule only adds reading: it never grants a destination, so a
//! request may name any and a ceiling's apply to every run under it.

use std::fmt;

use moat_meter::Vendor;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{GrantError, Grants, NetRule, Scheme};

/// `HOST[:PORT]=VENDOR`: requests to HOST speak VENDOR's API.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterRule {
    /// Where.
    pub rule: NetRule,
    /// Whose API.
    pub vendor: Vendor,
}

impl MeterRule {
    /// Parses `HOST[:PORT]=VENDOR`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, GrantError> {
        let text = text.trim();
        let refuse = |reason: String| GrantError::Meter {
            rule: text.to_owned(),
            reason,
        };
        let Some((host, vendor)) = text.rsplit_once('=') else {
            return Err(refuse(
                "write HOST=VENDOR, e.g. 127.0.0.1:11434=openai".to_owned(),
            ));
        };
        let rule = NetRule::parse(host).map_err(|e| refuse(e.reason().to_owned()))?;
        let vendor = vendor.parse::<Vendor>().map_err(refuse)?;
        Ok(Self { rule, vendor })
    }
}

impl fmt::Display for MeterRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.rule, self.vendor)
    }
}

impl Serialize for MeterRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MeterRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        MeterRule::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Where a run's model calls go, and whose API each destination speaks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meters {
    rules: Vec<MeterRule>,
}

impl Meters {
    /// The destinations `grants` say speak a model API: its meter rules,
    /// then each vendor key's secret destinations; the vendors' own hosts
    /// always.
    pub fn of(grants: &Grants) -> Self {
        let mut rules = grants.meter.clone();
        for secret in &grants.secrets {
            if let Some(key) = crate::vendor_key(&secret.name) {
                rules.push(MeterRule {
                    rule: secret.rule.clone(),
                    vendor: key.vendor,
                });
            }
        }
        Self { rules }
    }

    /// Whose API `scheme://host:port` speaks, if a model API moat reads.
    pub fn vendor(&self, scheme: Scheme, host: &str, port: u16) -> Option<Vendor> {
        self.rules
            .iter()
            .find(|meter| meter.rule.matches(scheme, host, port))
            .map(|meter| meter.vendor)
            .or_else(|| Vendor::of_host(host.trim_start_matches('[').trim_end_matches(']')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_rule_names_a_host_and_a_vendor() {
        let rule = MeterRule::parse("127.0.0.1:11434=openai").unwrap();
        assert_eq!(rule.vendor, Vendor::OpenAi);
        assert_eq!(rule.to_string(), "127.0.0.1:11434=openai");
        let json = serde_json::to_string(&rule).unwrap();
        assert_eq!(serde_json::from_str::<MeterRule>(&json).unwrap(), rule);
        for (text, said) in [
            ("127.0.0.1:11434", "HOST=VENDOR"),
            ("127.0.0.1=mistral", "openai, anthropic or gemini"),
            ("=openai", "empty"),
        ] {
            let error = MeterRule::parse(text).unwrap_err().to_string();
            assert!(error.contains(said), "{text}: {error}");
        }
    }

    #[test]
    fn model_apis_are_the_vendors_hosts_the_vendor_keys_destinations_and_the_meter_rules() {
        let grants = Grants {
            secrets: vec![
                crate::SecretGrant::parse("OPENAI_API_KEY@http://127.0.0.1:9000").unwrap(),
                crate::SecretGrant::parse("OTHER_TOKEN@http://127.0.0.1:9001").unwrap(),
            ],
            meter: vec![MeterRule::parse("llm.internal=anthropic").unwrap()],
            ..Grants::default()
        };
        let meters = Meters::of(&grants);
        assert_eq!(
            meters.vendor(Scheme::Http, "127.0.0.1", 9000),
            Some(Vendor::OpenAi)
        );
        assert_eq!(meters.vendor(Scheme::Http, "127.0.0.1", 9001), None);
        assert_eq!(
            meters.vendor(Scheme::Https, "llm.internal", 443),
            Some(Vendor::Anthropic)
        );
        assert_eq!(
            meters.vendor(Scheme::Https, "generativelanguage.googleapis.com", 443),
            Some(Vendor::Gemini)
        );
        assert_eq!(meters.vendor(Scheme::Https, "github.com", 443), None);
    }
}
