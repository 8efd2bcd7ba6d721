//! A field's value read from whatever its dialect wrote: the same checks,
//! and the same words for the same mistake, in every dialect. A flag's
//! value is a string (`30s`, `256MiB`); a file or a client may give the
//! number itself (milliseconds, bytes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moat_engine::{McpServers, PriceTable};
use moat_grants::{NetRule, SecretGrant, TrustLevel, canonical_dir, names};
use serde_json::Value;

use super::dialect::Given;
use super::error::{Problem, RequestError};
use super::field::Field;
use crate::limits::{MAX_COUNT, MAX_PROGRAM_MEMORY, Timeout};

/// The most CPUs a run may ask for.
const MAX_CPUS: f64 = 4096.0;

/// The largest file a flag's value may be read from (`--extra @FILE`, an
/// agents or MCP file, a price table).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads values of one field, naming it in every refusal.
pub(crate) struct Reader<'a> {
    pub(crate) field: Field,
    pub(crate) given: &'a Given,
}

impl Reader<'_> {
    fn invalid(&self, why: impl Into<String>) -> RequestError {
        RequestError::new(
            self.field,
            &self.given.spelled,
            Problem::Invalid(why.into()),
        )
    }

    fn value(&self) -> &Value {
        &self.given.value
    }

    /// A string.
    pub(crate) fn text(&self) -> Result<String, RequestError> {
        match self.value() {
            Value::String(text) => Ok(text.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(self.invalid(format!("{} is not a string", shown(other)))),
        }
    }

    /// A string with something in it.
    pub(crate) fn name(&self) -> Result<String, RequestError> {
        let text = self.text()?;
        if text.trim().is_empty() {
            return Err(self.invalid("is empty"));
        }
        Ok(text)
    }

    /// `true` or `false`.
    pub(crate) fn bool(&self) -> Result<bool, RequestError> {
        match self.value() {
            Value::Bool(b) => Ok(*b),
            Value::String(text) if text == "true" => Ok(true),
            Value::String(text) if text == "false" => Ok(false),
            other => Err(self.invalid(format!("{} is not true or false", shown(other)))),
        }
    }

    /// Strings: a list, or one string (a flag given once).
    fn strings(&self) -> Result<Vec<String>, RequestError> {
        match self.value() {
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text.clone()),
                    other => Err(self.invalid(format!("{} is not a string", shown(other)))),
                })
                .collect(),
            Value::String(text) => Ok(vec![text.clone()]),
            other => Err(self.invalid(format!("{} is not a list of strings", shown(other)))),
        }
    }

    /// Each string, checked by `check`.
    fn each<T, E: std::fmt::Display>(
        &self,
        check: impl Fn(&str) -> Result<T, E>,
    ) -> Result<Vec<T>, RequestError> {
        self.strings()?
            .iter()
            .map(|item| check(item).map_err(|e| self.invalid(format!("`{item}`: {e}"))))
            .collect()
    }

    /// An existing directory, canonical.
    pub(crate) fn dir(&self) -> Result<PathBuf, RequestError> {
        let text = self.name()?;
        self.directory(&text)
            .map_err(|why| self.invalid(format!("`{text}`: {why}")))
    }

    /// Existing directories, canonical.
    pub(crate) fn dirs(&self) -> Result<Vec<PathBuf>, RequestError> {
        self.each(|dir| self.directory(dir))
    }

    /// Unix sockets ([`moat_grants::canonical_socket`]), relative as
    /// directories are.
    pub(crate) fn sockets(&self) -> Result<Vec<PathBuf>, RequestError> {
        self.each(|text| {
            let path = Path::new(text);
            if !self.given.dialect.takes_relative_paths() && !path.is_absolute() {
                return Err("not an absolute path; name sockets absolutely".into());
            }
            moat_grants::canonical_socket(path, self.given.base.as_deref())
                .map_err(|e| e.reason().to_owned())
        })
    }

    /// The value as files or directories that may not exist yet, each
    /// relative to where it was written as directories are.
    pub(crate) fn paths(&self) -> Result<Vec<PathBuf>, RequestError> {
        self.each(|text| {
            let path = Path::new(text);
            if !self.given.dialect.takes_relative_paths() && !path.is_absolute() {
                return Err("not an absolute path; name paths absolutely".into());
            }
            moat_grants::canonical_path(path, self.given.base.as_deref())
                .map_err(|e| e.reason().to_owned())
        })
    }

    /// `text` as a directory: relative to where it was written, except in
    /// a dialect that has no place (a client's request: the server's own
    /// working directory is no business of the client's).
    fn directory(&self, text: &str) -> Result<PathBuf, String> {
        let path = Path::new(text);
        if !self.given.dialect.takes_relative_paths() && !path.is_absolute() {
            return Err("not an absolute path; name directories absolutely".into());
        }
        canonical_dir(path, self.given.base.as_deref()).map_err(|e| e.reason().to_owned())
    }

    /// A whole number, from a number or its digits (`_` between them).
    fn whole(&self, what: &str) -> Result<u64, RequestError> {
        let parsed = match self.value() {
            Value::Number(n) => n.as_u64(),
            Value::String(text) => text.trim().replace('_', "").parse().ok(),
            _ => None,
        };
        parsed.ok_or_else(|| {
            self.invalid(format!(
                "{} is not {what}; give a whole number",
                shown(self.value())
            ))
        })
    }

    /// Agent turns: from 1.
    pub(crate) fn turns(&self) -> Result<u32, RequestError> {
        match u32::try_from(self.whole("a number of turns")?) {
            Ok(turns @ 1..) => Ok(turns),
            _ => Err(self.invalid("must be a whole number from 1 to 4294967295")),
        }
    }

    /// Fuel units.
    pub(crate) fn fuel(&self) -> Result<u64, RequestError> {
        self.whole("a number of fuel units")
    }

    /// A count of a resource the host shares: 1 to [`MAX_COUNT`].
    pub(crate) fn count(&self) -> Result<usize, RequestError> {
        match usize::try_from(self.whole("a count")?) {
            Ok(n @ 1..=MAX_COUNT) => Ok(n),
            _ => Err(self.invalid(format!("must be a whole number from 1 to {MAX_COUNT}"))),
        }
    }

    /// Processes of a run's programs: 1 to [`MAX_COUNT`].
    pub(crate) fn processes(&self) -> Result<u64, RequestError> {
        self.count().map(|n| n as u64)
    }

    /// CPUs (`2`, `0.5`), in thousandths: from a thousandth to
    /// [`MAX_CPUS`].
    pub(crate) fn cpus(&self) -> Result<u64, RequestError> {
        let cpus = match self.value() {
            Value::Number(n) => n.as_f64(),
            Value::String(text) => text.trim().parse().ok(),
            _ => None,
        };
        match cpus.map(|cpus| (cpus * 1000.0).round()) {
            Some(milli) if (1.0..=MAX_CPUS * 1000.0).contains(&milli) => {
                Ok(milli as u64)
            }
            _ => Err(self.invalid(format!(
                "{} is not a number of CPUs; give a positive number up to {MAX_CPUS}, e.g. 2 or 0.5",
                shown(self.value())
            ))),
        }
    }

    /// Tokens: from 1.
    pub(crate) fn tokens(&self) -> Result<u64, RequestError> {
        match self.whole("a number of tokens") {
            Ok(tokens) if tokens > 0 => Ok(tokens),
            _ => Err(self.invalid(format!(
                "{} is not a number of tokens; give a positive whole number, e.g. 50000",
                shown(self.value())
            ))),
        }
    }

    /// Model calls: from 1.
    pub(crate) fn calls(&self) -> Result<u64, RequestError> {
        match self.whole("a number of model calls") {
            Ok(calls) if calls > 0 => Ok(calls),
            _ => Err(self.invalid(format!(
                "{} is not a number of model calls; give a positive whole number, e.g. 20",
                shown(self.value())
            ))),
        }
    }

    /// US dollars: a positive number (`1.50`, `$1.50`).
    pub(crate) fn usd(&self) -> Result<f64, RequestError> {
        let usd = match self.value() {
            Value::Number(n) => n.as_f64(),
            Value::String(text) => text.trim().trim_start_matches('$').parse().ok(),
            _ => None,
        };
        match usd {
            Some(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
            _ => Err(self.invalid(format!(
                "{} is not an amount of dollars; give a positive number, e.g. 1.50",
                shown(self.value())
            ))),
        }
    }

    /// A positive duration: `30s`, `5m`, `500ms`, or milliseconds.
    pub(crate) fn duration(&self) -> Result<Duration, RequestError> {
        match self.value() {
            Value::Number(n) => match n.as_u64() {
                Some(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                _ => Err(self.invalid("must be more than zero")),
            },
            Value::String(text) => parse_duration(text).map_err(|why| self.invalid(why)),
            other => Err(self.invalid(format!("{} is not a duration", shown(other)))),
        }
    }

    /// A duration or `none` (a protocol's `noTimeout: true`).
    pub(crate) fn timeout(&self) -> Result<Timeout, RequestError> {
        match self.value() {
            Value::String(text) if text == "none" => Ok(Timeout::Never),
            Value::Bool(true) if self.given.spelled.ends_with("noTimeout") => Ok(Timeout::Never),
            Value::Bool(_) => {
                Err(self.invalid("true is the only value it takes; leave it out otherwise"))
            }
            _ => self
                .duration()
                .map(Timeout::After)
                .map_err(|e| self.invalid(format!("{}, or `none` for no limit", e.problem()))),
        }
    }

    /// A size in bytes: `256MiB`, or the number of bytes.
    fn size(&self, example: &str) -> Result<u64, RequestError> {
        match self.value() {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| self.invalid(format!("not a size; use e.g. {example}"))),
            Value::String(text) => text
                .parse::<bytesize::ByteSize>()
                .map(|size| size.as_u64())
                .map_err(|_| self.invalid(format!("`{text}` is not a size; use e.g. {example}"))),
            other => Err(self.invalid(format!(
                "{} is not a size; use e.g. {example}",
                shown(other)
            ))),
        }
    }

    /// A run's memory cap: 1MiB to [`MAX_PROGRAM_MEMORY`].
    pub(crate) fn memory(&self) -> Result<u64, RequestError> {
        let bytes = self.size("64MiB, 256MiB or 1GiB")?;
        if bytes < 1024 * 1024 {
            return Err(self.invalid("too small: an adapter needs at least 1MiB"));
        }
        if bytes > MAX_PROGRAM_MEMORY {
            return Err(self.invalid(format!(
                "over the ceiling of {}",
                bytesize::ByteSize::b(MAX_PROGRAM_MEMORY).display().iec()
            )));
        }
        Ok(bytes)
    }

    /// An event size: from 1KiB.
    pub(crate) fn event_size(&self) -> Result<usize, RequestError> {
        usize::try_from(self.size("256KiB or 1MiB")?)
            .ok()
            .filter(|&bytes| bytes >= 1024)
            .ok_or_else(|| self.invalid("must be at least 1KiB"))
    }

    /// Network rules.
    pub(crate) fn net_rules(&self) -> Result<Vec<NetRule>, RequestError> {
        self.each(|rule| NetRule::parse(rule).map_err(|e| e.reason().to_owned()))
    }

    /// Names of environment variables.
    pub(crate) fn env_names(&self) -> Result<Vec<String>, RequestError> {
        self.each(|name| names::env_name(name).map_err(|e| e.reason().to_owned()))
    }

    /// Programs: names or absolute paths.
    pub(crate) fn programs(&self) -> Result<Vec<String>, RequestError> {
        self.each(|program| names::program(program).map_err(|e| e.reason().to_owned()))
    }

    /// Secret grants.
    pub(crate) fn secrets(&self) -> Result<Vec<SecretGrant>, RequestError> {
        self.each(|grant| SecretGrant::parse(grant).map_err(|e| e.reason().to_owned()))
    }

    /// Meter rules, `HOST[:PORT]=VENDOR`.
    pub(crate) fn meter_rules(&self) -> Result<Vec<moat_grants::MeterRule>, RequestError> {
        self.each(|rule| moat_grants::MeterRule::parse(rule).map_err(|e| e.reason().to_owned()))
    }

    /// Tool names: a list, or one string of them comma-separated (an
    /// empty one: none).
    pub(crate) fn tools(&self) -> Result<Vec<String>, RequestError> {
        let listed: Vec<String> = match self.value() {
            Value::String(text) => text
                .split(',')
                .map(str::trim)
                .filter(|tool| !tool.is_empty())
                .map(str::to_owned)
                .collect(),
            _ => self.strings()?,
        };
        for tool in &listed {
            if tool.trim().is_empty() || tool.chars().any(char::is_whitespace) {
                return Err(self.invalid(format!(
                    "tool name {tool:?} is empty or contains whitespace"
                )));
            }
        }
        Ok(listed)
    }

    /// A trust level, by name.
    pub(crate) fn trust(&self) -> Result<TrustLevel, RequestError> {
        let name = self.text()?;
        TrustLevel::ALL
            .into_iter()
            .find(|level| level.as_str() == name)
            .ok_or_else(|| {
                let levels: Vec<&str> = TrustLevel::ALL.iter().map(|l| l.as_str()).collect();
                self.invalid(format!(
                    "`{name}` is not a trust level: one of {}",
                    levels.join(", ")
                ))
            })
    }

    /// `worktree`, `copy`, or `none` (no workspace).
    pub(crate) fn workspace_mode(&self) -> Result<Option<moat_workspace::Mode>, RequestError> {
        match self.text()?.as_str() {
            "worktree" => Ok(Some(moat_workspace::Mode::Worktree)),
            "copy" => Ok(Some(moat_workspace::Mode::Copy)),
            "none" => Ok(None),
            other => Err(self.invalid(format!(
                "`{other}` is not a workspace: worktree, copy or none"
            ))),
        }
    }

    /// JSON given inline, or (a string) as JSON text or `@FILE`.
    fn json(&self) -> Result<Value, RequestError> {
        match self.value() {
            Value::String(text) => {
                let text = match text.strip_prefix('@') {
                    Some(path) => self.file(path)?,
                    None => text.clone(),
                };
                serde_json::from_str(&text).map_err(|e| self.invalid(format!("not JSON: {e}")))
            }
            other => Ok(other.clone()),
        }
    }

    /// The text of the file `path` (relative to where it was written), at
    /// most [`MAX_FILE_BYTES`].
    fn file(&self, path: &str) -> Result<String, RequestError> {
        let path = match &self.given.base {
            Some(base) => base.join(path),
            None => PathBuf::from(path),
        };
        let shown = path.display();
        let size = std::fs::metadata(&path)
            .map_err(|e| self.invalid(format!("cannot read {shown}: {e}")))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(self.invalid(format!("{shown} is larger than 1 MiB")));
        }
        std::fs::read_to_string(&path)
            .map_err(|e| self.invalid(format!("cannot read {shown}: {e}")))
    }

    /// A JSON object (adapter-specific options).
    pub(crate) fn object(&self) -> Result<Value, RequestError> {
        let value = self.json()?;
        match value.is_object() {
            true => Ok(value),
            false => Err(self.invalid("must be a JSON object, e.g. {\"tools\": []}")),
        }
    }

    /// A value given inline, or a file's (a flag names the file).
    fn inline_or_file(&self) -> Result<Value, RequestError> {
        match self.value() {
            Value::String(path) => {
                let text = self.file(path.strip_prefix('@').unwrap_or(path))?;
                serde_json::from_str(&text)
                    .map_err(|e| self.invalid(format!("{path}: not JSON: {e}")))
            }
            other => Ok(other.clone()),
        }
    }

    /// Sub-agents: an object of objects.
    pub(crate) fn agents(&self) -> Result<Value, RequestError> {
        let agents = self.inline_or_file()?;
        match agents.as_object() {
            Some(map) if map.values().all(Value::is_object) => Ok(agents),
            _ => Err(self.invalid("must be a JSON object of sub-agents by name, each an object")),
        }
    }

    /// MCP servers: `{"mcpServers": {…}}` (a file's shape) or the servers
    /// by name.
    pub(crate) fn mcp_servers(&self) -> Result<McpServers, RequestError> {
        let value = self.inline_or_file()?;
        let file = match value.get("mcpServers") {
            Some(_) => value,
            None => serde_json::json!({ "mcpServers": value }),
        };
        McpServers::from_json(&file.to_string()).map_err(|e| self.invalid(e.to_string()))
    }

    /// Prices per model.
    pub(crate) fn price_table(&self) -> Result<Arc<PriceTable>, RequestError> {
        let table = self.inline_or_file()?;
        PriceTable::from_json(&table.to_string())
            .map(Arc::new)
            .map_err(|e| self.invalid(e.to_string()))
    }

    /// A policy file.
    pub(crate) fn policy(&self) -> Result<super::policy::Policy, RequestError> {
        let path = self.name()?;
        let path = match &self.given.base {
            Some(base) => base.join(&path),
            None => PathBuf::from(path),
        };
        super::policy::Policy::load(&path).map_err(|e| self.invalid(e.to_string()))
    }
}

/// A duration such as `30s`, `5m` or `500ms`; more than zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    // humantime's own message lists every unit it knows "(and few
    // variations)": one line with examples says more.
    let duration = humantime::parse_duration(text).map_err(|_| {
        format!("`{text}` is not a duration: write a number and a unit, e.g. 30s, 5m, 2h or 500ms")
    })?;
    if duration.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(duration)
}

/// A value as a message quotes it.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("`{text}`"),
        other => other.to_string(),
    }
}
