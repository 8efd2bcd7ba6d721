//! The policy file: standing grants and limits, for every adapter and per
//! adapter, in TOML — a run request's fields in the policy dialect
//! (`allow-net`, `max-memory`, `ask-tools`, read by the one table of
//! fields), plus `sha256` in an adapter's table.
//!
//! ```toml
//! # Top level: for every adapter run with this policy.
//! allow-read = ["./docs"]
//!
//! # For the adapter named `claude-code` (the name its info() gives).
//! [adapters.claude-code]
//! allow-net = ["api.anthropic.com"]
//! allow-env = ["ANTHROPIC_API_KEY"]
//! allow-run = ["claude"]
//! allow-write = ["."]
//! max-budget-usd = 5
//!
//! [adapters.summarize]
//! grant-declared = true   # what it declares in info()
//! sha256 = "3f1c…"        # only for the component with this content hash
//! ```
//!
//! Grants (`allow-*`, `secret`), `grant-declared` and `ask-tools` add to
//! what the flags give; limits (`timeout`, `max-memory`, …, and the
//! budgets `max-budget-usd`, `max-tokens`) are the most a run of the
//! adapter may have, narrowing the flags'. Relative directories are
//! relative to the policy file's directory. Unknown keys are refused,
//! naming the nearest key, so a typo cannot silently grant less (or more)
//! than meant.
//!
//! An adapter receives the top-level entry and its own table's, merged.
//! Tables are matched by the name the adapter declares, which a component
//! loaded from a path chooses itself: pin such entries with `sha256`, and
//! a different component claiming the name is refused. A table for a
//! built-in adapter's name that pins nothing is that built-in's: a
//! component from elsewhere calling itself by the name is refused too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use moat_grants::Grants;
use serde_json::{Map, Value};

use super::RunRequest;
use super::dialect::{Dialect, Raw};
use crate::limits::AskedLimits;

/// The keys of a policy that are no field of a run: at the top, and in an
/// adapter's table.
const TOP_KEYS: &[&str] = &["adapters"];
const ADAPTER_KEYS: &[&str] = &["sha256"];

/// Why a policy file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file cannot be read.
    #[error("cannot read the policy file {}: {reason}", path.display())]
    Read {
        /// The policy file.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// The file is not a valid policy.
    #[error("policy file {}: {problem}", path.display())]
    Invalid {
        /// The policy file.
        path: PathBuf,
        /// What is wrong, and where.
        problem: String,
    },
    /// The adapter's entry pins another component than the one loaded.
    #[error(
        "policy file {}: the entry for `{adapter}` pins sha256 {pinned}, but this component's is \
         {actual}; check the component, then update the pin",
        path.display()
    )]
    PinMismatch {
        /// The policy file.
        path: PathBuf,
        /// The adapter's name.
        adapter: String,
        /// The hash the entry pins.
        pinned: String,
        /// The loaded component's hash.
        actual: String,
    },
    /// An unpinned table for a built-in adapter's name, and a component
    /// that is not that built-in calling itself by it.
    #[error(
        "policy file {}: [adapters.{adapter}] is for moat's built-in `{adapter}`, and this \
         component only calls itself `{adapter}`; to give it the table, pin the table to it: \
         sha256 = \"{actual}\"",
        path.display()
    )]
    NotTheBuiltIn {
        /// The policy file.
        path: PathBuf,
        /// The built-in's name.
        adapter: String,
        /// The loaded component's hash.
        actual: String,
    },
}

/// A parsed, checked policy file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    path: PathBuf,
    all: PolicyEntry,
    adapters: BTreeMap<String, PolicyEntry>,
}

/// What a policy gives one adapter (or every adapter, at the top level).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyEntry {
    /// What it grants, besides the flags.
    pub grants: Grants,
    /// Tools whose every call is asked about first.
    pub ask_tools: Vec<String>,
    /// The most of each limit a run may have (each `None`: the flags').
    pub limits: AskedLimits,
    /// The most a run may spend, in US dollars.
    pub max_budget_usd: Option<f64>,
    /// Grant the adapter what it declares.
    pub grant_declared: bool,
    /// The content hash the component must have, lowercase hex.
    pub sha256: Option<String>,
}

impl Policy {
    /// Reads and checks a policy file; its directories must exist.
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
        let table: toml::Table =
            toml::from_str(text).map_err(|e| invalid(toml_problem(text, &e)))?;
        let file: Map<String, Value> = serde_json::to_value(table)
            .ok()
            .and_then(|value| value.as_object().cloned())
            .ok_or_else(|| invalid("not a table".into()))?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty());
        let all = entry(&file, base, false).map_err(&invalid)?;
        let mut adapters = BTreeMap::new();
        match file.get("adapters") {
            None => {}
            Some(Value::Object(tables)) => {
                for (name, table) in tables {
                    let Value::Object(table) = table else {
                        return Err(invalid(format!("[adapters.{name}] is not a table")));
                    };
                    let own = entry(table, base, true)
                        .map_err(|problem| invalid(format!("[adapters.{name}] {problem}")))?;
                    adapters.insert(name.clone(), own);
                }
            }
            Some(_) => return Err(invalid("`adapters` is not a table of adapters".into())),
        }
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
    /// hash `sha256` (`built_in`: moat's own adapter of that name): the top
    /// level and its own table, merged. A table that pins another hash is
    /// an error, not a silent skip: the user meant to grant something, and
    /// must learn that the component changed. So is an unpinned table for
    /// a built-in's name and a component that only takes the name: any
    /// component may call itself `openai`.
    pub fn for_adapter(
        &self,
        name: &str,
        sha256: &str,
        built_in: bool,
    ) -> Result<PolicyEntry, PolicyError> {
        let mut merged = self.all.clone();
        let Some(own) = self.adapters.get(name) else {
            return Ok(merged);
        };
        if own.sha256.is_none() && !built_in && moat_builtins::names().any(|known| known == name) {
            return Err(PolicyError::NotTheBuiltIn {
                path: self.path.clone(),
                adapter: name.to_string(),
                actual: sha256.to_string(),
            });
        }
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
        // The lower of each limit: the table narrows the top level.
        merged.limits = lower_limits(&merged.limits, &own.limits);
        merged.max_budget_usd = lower(merged.max_budget_usd, own.max_budget_usd, f64::min);
        merged.sha256.clone_from(&own.sha256);
        Ok(merged)
    }
}

/// One entry of the file: the request fields of `table` (its `sha256`
/// too, in an adapter's table).
fn entry(
    table: &Map<String, Value>,
    base: Option<&Path>,
    adapter: bool,
) -> Result<PolicyEntry, String> {
    let own = if adapter { ADAPTER_KEYS } else { TOP_KEYS };
    let raw = Raw::read(table, Dialect::Policy, base, own).map_err(|e| e.to_string())?;
    let request = RunRequest::from_raw(&raw).map_err(|e| e.to_string())?;
    let sha256 = match table.get("sha256") {
        Some(Value::String(hash)) if adapter => {
            Some(check_sha256(hash).map_err(|p| format!("sha256: {p}"))?)
        }
        Some(_) if adapter => return Err("sha256: not a string".into()),
        _ => None,
    };
    Ok(PolicyEntry {
        grants: request.grants.all(),
        ask_tools: request.ask_tools.clone().unwrap_or_default(),
        max_budget_usd: request.options.max_budget_usd,
        limits: request.limits,
        grant_declared: request.grant_declared,
        sha256,
    })
}

/// The lower of two optional values.
fn lower<T: Copy>(a: Option<T>, b: Option<T>, min: fn(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(min(a, b)),
        (a, b) => a.or(b),
    }
}

/// The lower of each limit.
fn lower_limits(a: &AskedLimits, b: &AskedLimits) -> AskedLimits {
    use crate::limits::Timeout;
    AskedLimits {
        timeout: match (a.timeout, b.timeout) {
            (Some(Timeout::After(x)), Some(Timeout::After(y))) => Some(Timeout::After(x.min(y))),
            (Some(Timeout::Never), other) | (other, Some(Timeout::Never)) => {
                other.or(Some(Timeout::Never))
            }
            (x, y) => x.or(y),
        },
        fuel: lower(a.fuel, b.fuel, u64::min),
        max_memory_bytes: lower(a.max_memory_bytes, b.max_memory_bytes, u64::min),
        max_program_memory_bytes: lower(
            a.max_program_memory_bytes,
            b.max_program_memory_bytes,
            u64::min,
        ),
        max_event_bytes: lower(a.max_event_bytes, b.max_event_bytes, usize::min),
        max_connections: lower(a.max_connections, b.max_connections, usize::min),
        max_open_files: lower(a.max_open_files, b.max_open_files, usize::min),
        max_processes: lower(a.max_processes, b.max_processes, u64::min),
        milli_cpus: lower(a.milli_cpus, b.milli_cpus, u64::min),
        max_tokens: lower(a.max_tokens, b.max_tokens, u64::min),
        max_model_calls: lower(a.max_model_calls, b.max_model_calls, u64::min),
        programs_asked: None,
    }
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
            max-memory = "512MiB"
            [adapters.writer]
            allow-read = ["docs"]
            allow-net = ["api.example.com"]
            grant-declared = true
            max-memory = "128MiB"
            max-budget-usd = 2
        "#;
        let (_dir, root, policy) = in_dir(text);
        let policy = policy.unwrap();
        let writer = policy.for_adapter("writer", HASH, false).unwrap();
        assert_eq!(writer.grants.env, ["SHARED"]);
        assert_eq!(writer.grants.read, [root.join("docs")]);
        assert_eq!(writer.grants.net[0].to_string(), "api.example.com");
        assert!(writer.grant_declared);
        assert_eq!(writer.limits.max_memory_bytes, Some(128 * 1024 * 1024));
        assert_eq!(writer.max_budget_usd, Some(2.0));

        let other = policy.for_adapter("other", HASH, false).unwrap();
        assert_eq!(other.grants.env, ["SHARED"]);
        assert!(other.grants.read.is_empty() && !other.grant_declared);
        assert_eq!(other.limits.max_memory_bytes, Some(512 * 1024 * 1024));
    }

    #[test]
    fn a_pinned_entry_refuses_another_component() {
        let text = format!("[adapters.writer]\nallow-env = [\"K\"]\nsha256 = \"{HASH}\"\n");
        let (_dir, _root, policy) = in_dir(&text);
        let policy = policy.unwrap();
        assert_eq!(
            policy
                .for_adapter("writer", HASH, false)
                .unwrap()
                .grants
                .env,
            ["K"]
        );
        let other = "b".repeat(64);
        let error = policy.for_adapter("writer", &other, false).unwrap_err();
        assert!(error.to_string().contains("pins sha256"), "{error}");
    }

    #[test]
    fn an_unpinned_table_for_a_built_ins_name_is_that_built_ins_only() {
        let text = "[adapters.openai]\nallow-env = [\"K\"]\n";
        let (_dir, _root, policy) = in_dir(text);
        let policy = policy.unwrap();
        assert_eq!(
            policy.for_adapter("openai", HASH, true).unwrap().grants.env,
            ["K"]
        );
        let error = policy.for_adapter("openai", HASH, false).unwrap_err();
        assert!(
            error.to_string().contains(&format!("sha256 = \"{HASH}\"")),
            "{error}"
        );
        // Pinned, the table is the component's whoever it claims to be.
        let pinned = format!("{text}sha256 = \"{HASH}\"\n");
        let (_dir, _root, policy) = in_dir(&pinned);
        let policy = policy.unwrap();
        assert_eq!(
            policy
                .for_adapter("openai", HASH, false)
                .unwrap()
                .grants
                .env,
            ["K"]
        );
    }

    #[test]
    fn mistakes_are_refused_naming_the_key() {
        let cases = [
            ("allow-reed = [\"docs\"]", "did you mean `allow-read`"),
            ("allow-read = [\"missing\"]", "allow-read"),
            (
                "[adapters.x]\nallow-net = [\"*\"]",
                "[adapters.x] allow-net",
            ),
            ("[adapters.x]\nallow-env = [\"A=B\"]", "allow-env"),
            ("[adapters.x]\nsha256 = \"short\"", "sha256"),
            ("sha256 = \"aa\"", "sha256"),
            ("allow-env = 3", "allow-env"),
            ("model = \"m\"", "`model` is not a field"),
            ("allow-env = [", "line 1"),
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
