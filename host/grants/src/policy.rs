//! The policy file: standing grants, for every adapter and per adapter, in
//! TOML.
//!
//! ```toml
//! # Top level: grants for every adapter run with this policy.
//! allow-read = ["./docs"]
//!
//! # Grants for the adapter named `claude-code` (the name its info() gives).
//! [adapters.claude-code]
//! allow-net = ["api.anthropic.com"]
//! allow-env = ["ANTHROPIC_API_KEY"]
//! allow-run = ["claude"]
//! allow-write = ["."]
//!
//! [adapters.summarize]
//! grant-declared = true   # what it declares in info()
//! sha256 = "3f1c…"        # only for the component with this content hash
//! ```
//!
//! Keys: `allow-net`, `allow-read`, `allow-write`, `allow-env`, `allow-run`
//! (lists of strings, the same values as the flags), `grant-declared`
//! (bool), `ask-tools` (tools every call of which is asked about first,
//! as `--ask-tools`), `max-budget-usd` and `max-tokens` (the most a run
//! may spend, as the flags), and in an adapter's table `sha256` (the
//! component's content hash, shown by `moat inspect`). Relative directories are relative to the
//! policy file's directory. Unknown keys are refused, so a typo cannot
//! silently grant less (or more) than meant.
//!
//! An adapter receives the top-level grants and those of its own table,
//! merged as a union. Tables are matched by the name the adapter declares,
//! which a component loaded from a path chooses itself: pin such entries
//! with `sha256`, and a different component claiming the name is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{GrantError, Grants, NetRule, PolicyError, SecretGrant, canonical_dir, names};

/// A parsed, validated policy file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    path: PathBuf,
    all: PolicyEntry,
    adapters: BTreeMap<String, PolicyEntry>,
}

/// What a policy gives one adapter (or every adapter, at the top level).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyEntry {
    /// What the policy grants.
    pub grants: Grants,
    /// Tools whose every call is asked about first (`ask-tools`).
    pub ask_tools: Vec<String>,
    /// The most a run may spend, in US dollars (`max-budget-usd`).
    pub max_budget_usd: Option<f64>,
    /// The most tokens a run may use (`max-tokens`).
    pub max_tokens: Option<u64>,
    /// Grant the adapter what it declares.
    pub grant_declared: bool,
    /// The content hash the component must have, lowercase hex.
    pub sha256: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct RawPolicy {
    allow_net: Vec<String>,
    allow_read: Vec<PathBuf>,
    allow_write: Vec<PathBuf>,
    allow_env: Vec<String>,
    allow_run: Vec<String>,
    secret: Vec<String>,
    grant_declared: bool,
    ask_tools: Vec<String>,
    max_budget_usd: Option<f64>,
    max_tokens: Option<u64>,
    adapters: BTreeMap<String, RawEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct RawEntry {
    allow_net: Vec<String>,
    allow_read: Vec<PathBuf>,
    allow_write: Vec<PathBuf>,
    allow_env: Vec<String>,
    allow_run: Vec<String>,
    secret: Vec<String>,
    grant_declared: bool,
    ask_tools: Vec<String>,
    max_budget_usd: Option<f64>,
    max_tokens: Option<u64>,
    sha256: Option<String>,
}

impl Policy {
    /// Reads and validates a policy file; directories must exist.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::parse(&text, path)
    }

    /// Parses policy text; `path` names it in messages and its directory
    /// anchors relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PolicyError> {
        let invalid = |problem: String| PolicyError::Invalid {
            path: path.to_path_buf(),
            problem,
        };
        let raw: RawPolicy = toml::from_str(text).map_err(|e| invalid(toml_problem(text, &e)))?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty());
        let all = RawEntry {
            allow_net: raw.allow_net,
            allow_read: raw.allow_read,
            allow_write: raw.allow_write,
            allow_env: raw.allow_env,
            allow_run: raw.allow_run,
            secret: raw.secret,
            grant_declared: raw.grant_declared,
            ask_tools: raw.ask_tools,
            max_budget_usd: raw.max_budget_usd,
            max_tokens: raw.max_tokens,
            sha256: None,
        };
        let all = entry(all, base).map_err(|p| invalid(p.to_string()))?;
        let adapters = raw
            .adapters
            .into_iter()
            .map(|(name, raw)| {
                let entry =
                    entry(raw, base).map_err(|p| invalid(format!("[adapters.{name}] {p}")))?;
                Ok((name, entry))
            })
            .collect::<Result<_, PolicyError>>()?;
        Ok(Self {
            path: path.to_path_buf(),
            all,
            adapters,
        })
    }

    /// The file this policy came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the policy gives the adapter `name` whose component has content
    /// hash `sha256`: the top level and its own table, merged. A table that
    /// pins another hash is an error, not a silent skip: the user meant to
    /// grant something, and must learn that the component changed.
    pub fn for_adapter(&self, name: &str, sha256: &str) -> Result<PolicyEntry, PolicyError> {
        let mut merged = self.all.clone();
        if let Some(own) = self.adapters.get(name) {
            if let Some(pinned) = &own.sha256
                && !pinned.eq_ignore_ascii_case(sha256)
            {
                return Err(PolicyError::PinMismatch {
                    path: self.path.clone(),
                    adapter: name.to_string(),
                    pinned: pinned.clone(),
                    actual: sha256.to_string(),
                });
            }
            merged.grants.merge(&own.grants);
            merged.grant_declared |= own.grant_declared;
            for tool in &own.ask_tools {
                if !merged.ask_tools.contains(tool) {
                    merged.ask_tools.push(tool.clone());
                }
            }
            // The lower of each budget: the table narrows the top level.
            merged.max_budget_usd = match (merged.max_budget_usd, own.max_budget_usd) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            merged.max_tokens = match (merged.max_tokens, own.max_tokens) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            merged.sha256.clone_from(&own.sha256);
        }
        Ok(merged)
    }
}

/// A problem with one entry, naming the key.
#[derive(Debug)]
struct KeyProblem {
    key: &'static str,
    problem: String,
}

impl std::fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)
    }
}

fn entry(raw: RawEntry, base: Option<&Path>) -> Result<PolicyEntry, KeyProblem> {
    fn each<T, U>(
        key: &'static str,
        items: &[T],
        check: impl Fn(&T) -> Result<U, GrantError>,
    ) -> Result<Vec<U>, KeyProblem> {
        items
            .iter()
            .map(|item| {
                check(item).map_err(|error| KeyProblem {
                    key,
                    problem: error.to_string(),
                })
            })
            .collect()
    }
    let sha256 = match raw.sha256 {
        Some(hash) => Some(check_sha256(&hash).map_err(|problem| KeyProblem {
            key: "sha256",
            problem,
        })?),
        None => None,
    };
    Ok(PolicyEntry {
        grants: Grants {
            net: each("allow-net", &raw.allow_net, |r| NetRule::parse(r))?,
            read: each("allow-read", &raw.allow_read, |d| canonical_dir(d, base))?,
            write: each("allow-write", &raw.allow_write, |d| canonical_dir(d, base))?,
            env: each("allow-env", &raw.allow_env, |n| names::env_name(n))?,
            run: each("allow-run", &raw.allow_run, |p| names::program(p))?,
            secrets: each("secret", &raw.secret, |g| SecretGrant::parse(g))?,
        },
        grant_declared: raw.grant_declared,
        ask_tools: each("ask-tools", &raw.ask_tools, |t| names::tool(t))?,
        max_budget_usd: match raw.max_budget_usd {
            Some(usd) if !(usd.is_finite() && usd > 0.0) => {
                return Err(KeyProblem {
                    key: "max-budget-usd",
                    problem: format!("{usd} is not a positive number of dollars"),
                });
            }
            usd => usd,
        },
        max_tokens: match raw.max_tokens {
            Some(0) => {
                return Err(KeyProblem {
                    key: "max-tokens",
                    problem: "0 tokens allows nothing; give a positive number".into(),
                });
            }
            tokens => tokens,
        },
        sha256,
    })
}

/// Accepts `HEX` or `sha256:HEX`, in either case; returns lowercase hex.
fn check_sha256(hash: &str) -> Result<String, String> {
    let lower = hash.trim().to_ascii_lowercase();
    let hex = lower.strip_prefix("sha256:").unwrap_or(&lower);
    if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(hex.to_string())
    } else {
        Err(format!(
            "`{hash}` is not a sha256 hash (64 hex digits, as `moat inspect` shows)"
        ))
    }
}

/// A TOML error in one line: where, and what.
fn toml_problem(text: &str, error: &toml::de::Error) -> String {
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {}", error.message().trim())
        }
        None => error.message().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn in_dir(text: &str) -> (tempfile::TempDir, PathBuf, Result<Policy, PolicyError>) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("docs")).unwrap();
        let path = root.join("policy.toml");
        let policy = Policy::parse(text, &path);
        (dir, root, policy)
    }

    #[test]
    fn top_level_and_adapter_tables_merge_with_paths_relative_to_the_file() {
        let text = r#"
            allow-env = ["SHARED"]
            [adapters.writer]
            allow-read = ["docs"]
            allow-net = ["api.example.com"]
            grant-declared = true
        "#;
        let (_dir, root, policy) = in_dir(text);
        let policy = policy.unwrap();
        let writer = policy.for_adapter("writer", HASH).unwrap();
        assert_eq!(writer.grants.env, ["SHARED"]);
        assert_eq!(writer.grants.read, [root.join("docs")]);
        assert_eq!(writer.grants.net[0].to_string(), "api.example.com");
        assert!(writer.grant_declared);

        let other = policy.for_adapter("other", HASH).unwrap();
        assert_eq!(other.grants.env, ["SHARED"]);
        assert!(other.grants.read.is_empty() && !other.grant_declared);
    }

    #[test]
    fn a_pinned_entry_refuses_another_component() {
        let text = format!("[adapters.writer]\nallow-env = [\"K\"]\nsha256 = \"{HASH}\"\n");
        let (_dir, _root, policy) = in_dir(&text);
        let policy = policy.unwrap();
        assert_eq!(
            policy.for_adapter("writer", HASH).unwrap().grants.env,
            ["K"]
        );
        let other = "b".repeat(64);
        let error = policy.for_adapter("writer", &other).unwrap_err();
        assert!(error.to_string().contains("pins sha256"), "{error}");
    }

    #[test]
    fn mistakes_are_refused_naming_the_key() {
        let cases = [
            ("allow-reed = [\"docs\"]", "allow-reed"),
            ("allow-read = [\"missing\"]", "allow-read"),
            (
                "[adapters.x]\nallow-net = [\"*\"]",
                "[adapters.x] allow-net",
            ),
            ("[adapters.x]\nallow-env = [\"A=B\"]", "allow-env"),
            ("[adapters.x]\nsha256 = \"short\"", "sha256"),
            ("allow-env = \"NOT_A_LIST\"", "line 1"),
        ];
        for (text, needle) in cases {
            let (_dir, _root, policy) = in_dir(text);
            let error = policy.unwrap_err().to_string();
            assert!(error.contains(needle), "{needle:?} in {error}");
            assert_eq!(error.lines().count(), 1, "{error}");
        }
    }

    #[test]
    fn a_missing_file_is_a_read_error() {
        let error = Policy::load(Path::new("/nonexistent/policy.toml")).unwrap_err();
        assert!(matches!(error, PolicyError::Read { .. }), "{error}");
    }
}
