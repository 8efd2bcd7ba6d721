//! Secret grants: a named secret, added by the host to a run's requests to
//! one destination, never given to the run itself.
//!
//! Written `NAME@[scheme://]host[:port]`: `NAME` names a secret kept by
//! moat (`moat secret set NAME`), the rest is a network rule
//! ([`NetRule`]) saying where it may go. A secret grant does not grant the
//! destination: reaching it still needs `--allow-net`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{GrantError, NetRule, names};

/// A vendor's API key, as its SDKs and CLIs look for it: the variable of
/// the key, the header the API takes it in, and the variable of the base
/// URL (with the path the SDK expects after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorKey {
    /// The key's variable, the secret's name (`ANTHROPIC_API_KEY`).
    pub name: &'static str,
    /// Whose API its destinations speak: their answers' usage is read
    /// ([`crate::meter`]).
    pub vendor: moat_meter::Vendor,
    /// The header the API takes it in (lowercase).
    pub header: &'static str,
    /// The base-URL variable the SDKs and CLIs read.
    pub base_url: &'static str,
    /// What follows the base URL before the API's paths (`/v1` for
    /// OpenAI's SDKs).
    pub base_url_suffix: &'static str,
}

/// The vendors' keys moat knows: a secret of one of these names is sent
/// in the vendor's header unless it names another, and a program holding
/// it is pointed at the secret's route by the vendor's base-URL variable.
pub const VENDOR_KEYS: [VendorKey; 3] = [
    VendorKey {
        name: "ANTHROPIC_API_KEY",
        vendor: moat_meter::Vendor::Anthropic,
        header: "x-api-key",
        base_url: "ANTHROPIC_BASE_URL",
        base_url_suffix: "",
    },
    VendorKey {
        name: "OPENAI_API_KEY",
        vendor: moat_meter::Vendor::OpenAi,
        header: "authorization",
        base_url: "OPENAI_BASE_URL",
        base_url_suffix: "/v1",
    },
    VendorKey {
        name: "GEMINI_API_KEY",
        vendor: moat_meter::Vendor::Gemini,
        header: "x-goog-api-key",
        base_url: "GOOGLE_GEMINI_BASE_URL",
        base_url_suffix: "",
    },
];

/// The vendor key named `name`, if moat knows it.
pub fn vendor_key(name: &str) -> Option<&'static VendorKey> {
    VENDOR_KEYS.iter().find(|key| key.name == name)
}

/// One secret a run's requests to a destination carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretGrant {
    /// The secret's name, as kept by moat (an environment-variable-like
    /// name, e.g. `ANTHROPIC_API_KEY`).
    pub name: String,
    /// Where requests get it.
    pub rule: NetRule,
}

impl SecretGrant {
    /// Parses `NAME@[scheme://]host[:port]`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, GrantError> {
        let text = text.trim();
        let refuse = |reason: &str| GrantError::Secret {
            grant: text.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((name, destination)) = text.split_once('@') else {
            return Err(refuse(
                "write NAME@HOST, e.g. ANTHROPIC_API_KEY@api.anthropic.com",
            ));
        };
        let name = names::env_name(name).map_err(|e| refuse(e.reason()))?;
        let rule = NetRule::parse(destination).map_err(|e| refuse(e.reason()))?;
        Ok(Self { name, rule })
    }
}

impl fmt::Display for SecretGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.rule)
    }
}

impl Serialize for SecretGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SecretGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        SecretGrant::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_grant_names_the_secret_and_where_it_goes() {
        let grant = SecretGrant::parse("ANTHROPIC_API_KEY@api.anthropic.com:443").unwrap();
        assert_eq!(grant.name, "ANTHROPIC_API_KEY");
        assert_eq!(grant.rule, NetRule::parse("api.anthropic.com:443").unwrap());
        assert_eq!(grant.to_string(), "ANTHROPIC_API_KEY@api.anthropic.com:443");
        let json = serde_json::to_string(&grant).unwrap();
        assert_eq!(serde_json::from_str::<SecretGrant>(&json).unwrap(), grant);
        let http = SecretGrant::parse("TOKEN@http://127.0.0.1:8080").unwrap();
        assert_eq!(http.rule.to_string(), "http://127.0.0.1:8080");
    }

    #[test]
    fn a_malformed_secret_grant_says_what_is_wrong() {
        for (text, said) in [
            ("api.anthropic.com", "NAME@HOST"),
            ("@api.anthropic.com", "empty"),
            ("KEY@*", "*"),
            ("KEY@", "empty"),
        ] {
            let error = SecretGrant::parse(text).unwrap_err().to_string();
            assert!(error.contains(said), "{text}: {error}");
        }
    }
}
