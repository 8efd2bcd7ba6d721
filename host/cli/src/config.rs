//! The user's defaults for flags: `~/.config/moat/config.toml`
//! (`$XDG_CONFIG_HOME/moat/config.toml`; `$MOAT_CONFIG` names another).
//! A flag, or the variable a flag reads (`MOAT_STORE`…), always wins over
//! the file; the file over moat's own defaults.
//!
//! ```toml
//! store = "~/moat/runs.db"      # --store
//! cache-dir = "~/.cache/moat"   # --cache-dir
//! secrets = "~/moat/secrets.json"  # --secrets
//! workspace-dir = "~/moat/ws"   # --workspace-dir
//! output = "text"               # -o of run, parallel and logs
//! policy = "policy.toml"        # --policy: grants per adapter (beside this file)
//!
//! [adapters.openai]
//! model = "gpt-4o-mini"         # --model of `moat run openai`
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use moat_launch::Policy;
use moat_launch::request::Field;
use serde::Deserialize;

use crate::UsageError;
use crate::args::{Cli, Command, OutputFormat};
use crate::flags::{RequestFlags, RunFields};

/// The variable naming the config file.
pub const CONFIG_VAR: &str = "MOAT_CONFIG";

/// A config file, read and checked.
#[derive(Debug)]
pub struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// What it says, as written.
    pub file: ConfigFile,
    output: Option<OutputFormat>,
}

/// The file's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    pub store: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub secrets: Option<PathBuf>,
    pub workspace_dir: Option<PathBuf>,
    pub output: Option<String>,
    pub policy: Option<PathBuf>,
    pub adapters: BTreeMap<String, AdapterDefaults>,
}

/// Defaults for one adapter's runs.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AdapterDefaults {
    pub model: Option<String>,
}

/// Where the config file is: `$MOAT_CONFIG`, else the XDG place; whether
/// it was named (a named file must exist).
pub fn path() -> Option<(PathBuf, bool)> {
    if let Some(named) = std::env::var_os(CONFIG_VAR) {
        return Some((PathBuf::from(named), true));
    }
    let dir = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some((dir.join("moat/config.toml"), false))
}

/// The config file, when there is one.
pub fn load() -> Result<Option<Config>, UsageError> {
    let Some((path, named)) = path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(error) => {
            return Err(UsageError(format!(
                "cannot read the config file {} ({error}); fix {CONFIG_VAR} or create it",
                path.display()
            )));
        }
    };
    let bad = |why: String| UsageError(format!("the config file {}: {why}", path.display()));
    let file: ConfigFile = toml::from_str(&text).map_err(|e| bad(e.message().to_owned()))?;
    let output = file
        .output
        .as_deref()
        .map(|name| {
            OutputFormat::from_str(name, true)
                .map_err(|_| bad(format!("output `{name}`: use pretty, ndjson, text or json")))
        })
        .transpose()?;
    let beside = |file: &Path| expand(file, path.parent().unwrap_or(Path::new(".")));
    // Checked now, so a mistake in it names this file; runs read it again
    // by its path, as `--policy` is read.
    if let Some(policy) = &file.policy {
        Policy::load(&beside(policy)).map_err(|e| bad(e.to_string()))?;
    }
    Ok(Some(Config {
        output,
        file: ConfigFile {
            store: file.store.as_deref().map(beside),
            cache_dir: file.cache_dir.as_deref().map(beside),
            secrets: file.secrets.as_deref().map(beside),
            workspace_dir: file.workspace_dir.as_deref().map(beside),
            policy: file.policy.as_deref().map(beside),
            ..file
        },
        path,
    }))
}

/// `path` with a leading `~` made the home directory, and a relative one
/// made relative to `base` (the config file's directory).
fn expand(path: &Path, base: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(path)
}

impl Config {
    /// The model the file gives `adapter`.
    fn model_of(&self, adapter: &str) -> Option<String> {
        self.file
            .adapters
            .get(adapter)
            .and_then(|a| a.model.clone())
    }

    /// Fills what the command line left unsaid.
    pub fn apply(&self, cli: &mut Cli) {
        let file = &self.file;
        fill(&mut cli.store, &file.store);
        fill(&mut cli.cache_dir, &file.cache_dir);
        fill(&mut cli.secrets, &file.secrets);
        fill(&mut cli.workspace_dir, &file.workspace_dir);
        let policy = self
            .file
            .policy
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned());
        let defaults = |run: &mut RequestFlags<RunFields>, adapter: Option<&str>| {
            if let Some(model) = adapter.and_then(|adapter| self.model_of(adapter)) {
                run.default_to(Field::Model, &model);
            }
            if let Some(policy) = &policy {
                run.default_to(Field::Policy, policy);
            }
        };
        match &mut cli.command {
            Command::Run(args) => {
                fill(&mut args.output, &self.output);
                defaults(&mut args.run, Some(&args.adapter));
            }
            Command::Parallel(args) => {
                fill(&mut args.output, &self.output);
                defaults(&mut args.run, None);
            }
            // An editor's agent: the adapter's model and the policy, as
            // for `moat run`.
            Command::Acp(args) => defaults(&mut args.run, Some(&args.adapter)),
            // `-t` asks for pretty output itself.
            Command::Logs(args) if !args.timestamps => fill(&mut args.output, &self.output),
            _ => {}
        }
    }
}

fn fill<T: Clone>(value: &mut Option<T>, default: &Option<T>) {
    if value.is_none() {
        value.clone_from(default);
    }
}
