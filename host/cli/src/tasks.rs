//! The tasks of `moat parallel`: from `--task [ROLE:]ADAPTER=PROMPT` flags
//! or from a JSON or TOML file with per-task options.
//!
//! A file is a list of tasks — JSON `[{...}, ...]` or `{"tasks": [...]}`,
//! TOML `[[task]]` tables — each with `adapter` and `prompt` and optionally
//! `role`, `model`, `cwd`, `resume`, `maxTurns`, `system`, `trust`,
//! `allowedTools`, `disallowedTools`, `timeout` ("30s" or "none"), `fuel`,
//! `maxMemory` ("256MiB"), and grants: `allowNet`, `allowRead`,
//! `allowWrite`, `allowEnv`, `allowRun` (lists, as the flags take them)
//! and `grantDeclared`, and `extra` (adapter-specific options: a JSON object
//! or TOML table). A field left out takes the command-line flag; a
//! field given replaces it. Relative paths (`cwd`, `allowRead`,
//! `allowWrite`) are relative to the tasks file's directory.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use moat_grants::{NetRule, TrustLevel, canonical_dir, names};

use super::UsageError;
use super::args::{RunFlags, ToolList, extra_object, parse_memory, parse_timeout};

/// One task, resolved against the shared flags.
#[derive(Debug, Clone)]
pub struct Task {
    /// A built-in adapter name or a component path.
    pub adapter: String,
    pub prompt: String,
    pub role: Option<String>,
    pub flags: RunFlags,
}

/// A task as written in a tasks file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskEntry {
    adapter: String,
    prompt: String,
    role: Option<String>,
    model: Option<String>,
    cwd: Option<String>,
    resume: Option<String>,
    max_turns: Option<u32>,
    system: Option<String>,
    trust: Option<TrustLevel>,
    allowed_tools: Option<Vec<String>>,
    disallowed_tools: Option<Vec<String>>,
    timeout: Option<String>,
    fuel: Option<u64>,
    max_memory: Option<String>,
    allow_net: Option<Vec<String>>,
    allow_read: Option<Vec<PathBuf>>,
    allow_write: Option<Vec<PathBuf>>,
    allow_env: Option<Vec<String>>,
    allow_run: Option<Vec<String>>,
    grant_declared: Option<bool>,
    /// Adapter-specific options (a JSON object, or a TOML table).
    extra: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlTasks {
    task: Vec<TaskEntry>,
}

/// Parses `[ROLE:]ADAPTER=PROMPT`.
pub fn from_flag(spec: &str, flags: &RunFlags) -> Result<Task, UsageError> {
    let (target, prompt) = spec.split_once('=').ok_or_else(|| {
        UsageError(format!(
            "--task {spec:?} has no `=`; write it as [ROLE:]ADAPTER=PROMPT"
        ))
    })?;
    let (role, adapter) = match target.split_once(':') {
        Some((role, adapter)) => (Some(role.trim().to_string()), adapter.trim()),
        None => (None, target.trim()),
    };
    if adapter.is_empty() || role.as_deref() == Some("") {
        return Err(UsageError(format!(
            "--task {spec:?} names no adapter or an empty role; write it as [ROLE:]ADAPTER=PROMPT"
        )));
    }
    Ok(Task {
        adapter: adapter.to_string(),
        prompt: prompt.to_string(),
        role,
        flags: flags.clone(),
    })
}

/// Reads a tasks file; JSON unless its name ends in `.toml`.
pub fn from_file(path: &Path, flags: &RunFlags) -> Result<Vec<Task>, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "cannot read the tasks file {}: {e}",
            path.display()
        ))
    })?;
    let is_toml = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("toml"));
    let base = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    parse(&text, is_toml, base, flags)
        .map_err(|problem| UsageError(format!("{}: {problem}", path.display())))
}

fn parse(
    text: &str,
    is_toml: bool,
    base: Option<&Path>,
    flags: &RunFlags,
) -> Result<Vec<Task>, String> {
    let entries = if is_toml {
        toml::from_str::<TomlTasks>(text)
            .map_err(|e| e.to_string())?
            .task
    } else {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let list = match value {
            serde_json::Value::Object(mut object) if object.contains_key("tasks") => {
                object.remove("tasks")
            }
            list @ serde_json::Value::Array(_) => Some(list),
            _ => None,
        }
        .ok_or("expected a list of tasks, or an object with a `tasks` list")?;
        serde_json::from_value(list).map_err(|e| e.to_string())?
    };
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            resolve(entry, base, flags).map_err(|problem| format!("task {}: {problem}", index + 1))
        })
        .collect()
}

fn resolve(entry: TaskEntry, base: Option<&Path>, shared: &RunFlags) -> Result<Task, String> {
    let mut flags = shared.clone();
    resolve_grants(&entry, base, &mut flags)?;
    let or = |field: Option<String>, shared: &Option<String>| field.or_else(|| shared.clone());
    flags.model = or(entry.model, &shared.model);
    if let Some(cwd) = entry.cwd {
        let dir = canonical_dir(Path::new(&cwd), base).map_err(|e| format!("cwd: {e}"))?;
        flags.cwd = Some(dir.to_string_lossy().into_owned());
    }
    flags.resume = or(entry.resume, &shared.resume);
    flags.system = or(entry.system, &shared.system);
    flags.max_turns = entry.max_turns.or(shared.max_turns);
    flags.fuel = entry.fuel.or(shared.fuel);
    if let Some(extra) = entry.extra {
        flags.extra = Some(extra_object(extra).map_err(|e| format!("extra: {e}"))?);
    }
    if let Some(trust) = entry.trust {
        flags.trust = trust;
    }
    if let Some(tools) = entry.allowed_tools {
        flags.allowed_tools = Some(ToolList(tools));
    }
    if let Some(tools) = entry.disallowed_tools {
        flags.disallowed_tools = Some(ToolList(tools));
    }
    if let Some(timeout) = entry.timeout {
        flags.timeout =
            Some(parse_timeout(&timeout).map_err(|e| format!("timeout {timeout:?}: {e}"))?);
    }
    if let Some(memory) = entry.max_memory {
        flags.max_memory =
            parse_memory(&memory).map_err(|e| format!("maxMemory {memory:?}: {e}"))?;
    }
    Ok(Task {
        adapter: entry.adapter,
        prompt: entry.prompt,
        role: entry.role,
        flags,
    })
}

/// Replaces the shared grant flags with the entry's, where it has them.
fn resolve_grants(
    entry: &TaskEntry,
    base: Option<&Path>,
    flags: &mut RunFlags,
) -> Result<(), String> {
    fn each<T, U, E: std::fmt::Display>(
        key: &str,
        items: &[T],
        check: impl Fn(&T) -> Result<U, E>,
    ) -> Result<Vec<U>, String> {
        items
            .iter()
            .map(|item| check(item).map_err(|e| format!("{key}: {e}")))
            .collect()
    }
    let grants = &mut flags.grants;
    if let Some(rules) = &entry.allow_net {
        grants.allow_net = each("allowNet", rules, |r| NetRule::parse(r))?;
    }
    if let Some(dirs) = &entry.allow_read {
        grants.allow_read = each("allowRead", dirs, |d| canonical_dir(d, base))?;
    }
    if let Some(dirs) = &entry.allow_write {
        grants.allow_write = each("allowWrite", dirs, |d| canonical_dir(d, base))?;
    }
    if let Some(names) = &entry.allow_env {
        grants.allow_env = each("allowEnv", names, |n| names::env_name(n))?;
    }
    if let Some(programs) = &entry.allow_run {
        grants.allow_run = each("allowRun", programs, |p| names::program(p))?;
    }
    if let Some(grant_declared) = entry.grant_declared {
        grants.grant_declared = grant_declared;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};
    use moat_launch::Timeout;

    fn shared() -> RunFlags {
        let cli = Cli::parse_from([
            "moat",
            "parallel",
            "--task",
            "echo=x",
            "--model",
            "shared-model",
        ]);
        match cli.command {
            Command::Parallel(args) => args.run,
            _ => unreachable!("parsed a parallel command"),
        }
    }

    #[test]
    fn task_flags_take_an_optional_role_before_the_adapter() {
        let task = from_flag("writer:echo=hello = world", &shared()).unwrap();
        assert_eq!(task.role.as_deref(), Some("writer"));
        assert_eq!(task.adapter, "echo");
        assert_eq!(task.prompt, "hello = world");
        let plain = from_flag("./a.wasm=hi", &shared()).unwrap();
        assert_eq!((plain.role, plain.adapter.as_str()), (None, "./a.wasm"));
    }

    #[test]
    fn a_task_flag_without_equals_is_refused_with_the_syntax() {
        let error = from_flag("echo", &shared()).unwrap_err();
        assert!(error.0.contains("[ROLE:]ADAPTER=PROMPT"));
    }

    #[test]
    fn json_tasks_override_the_shared_flags_field_by_field() {
        let text = r#"[{"adapter":"echo","prompt":"a","role":"r","timeout":"2s","allowedTools":[]},
                       {"adapter":"echo","prompt":"b","model":"own"}]"#;
        let tasks = parse(text, false, None, &shared()).unwrap();
        assert_eq!(
            tasks[0].flags.timeout,
            Some(Timeout::After(Duration::from_secs(2)))
        );
        assert_eq!(tasks[0].flags.allowed_tools, Some(ToolList(vec![])));
        assert_eq!(tasks[0].flags.model.as_deref(), Some("shared-model"));
        assert_eq!(tasks[1].flags.model.as_deref(), Some("own"));
    }

    #[test]
    fn toml_tasks_are_task_tables() {
        let text = "[[task]]\nadapter = \"echo\"\nprompt = \"hi\"\ntrust = \"controlled\"\n";
        let tasks = parse(text, true, None, &shared()).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].flags.trust, TrustLevel::Controlled);
    }

    #[test]
    fn extra_is_an_object_from_json_or_a_toml_table() {
        let json = r#"[{"adapter":"openai","prompt":"a","extra":{"tools":[{"type":"function"}]}}]"#;
        let tasks = parse(json, false, None, &shared()).unwrap();
        let extra = tasks[0].flags.options().extra.unwrap();
        assert_eq!(extra["tools"][0]["type"], "function");

        let toml =
            "[[task]]\nadapter = \"openai\"\nprompt = \"hi\"\n[task.extra]\ntemperature = 0.5\n";
        let tasks = parse(toml, true, None, &shared()).unwrap();
        assert_eq!(tasks[0].flags.options().extra.unwrap()["temperature"], 0.5);

        let error = parse(
            r#"[{"adapter":"echo","prompt":"a","extra":[1]}]"#,
            false,
            None,
            &shared(),
        )
        .unwrap_err();
        assert!(
            error.contains("task 1") && error.contains("extra"),
            "{error}"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_task_and_field() {
        let error = parse(
            r#"[{"adapter":"echo","prompt":"a","timeout":"soon"}]"#,
            false,
            None,
            &shared(),
        )
        .unwrap_err();
        assert!(
            error.contains("task 1") && error.contains("timeout"),
            "{error}"
        );
        let unknown = parse(
            r#"[{"adapter":"echo","prompt":"a","colour":"red"}]"#,
            false,
            None,
            &shared(),
        )
        .unwrap_err();
        assert!(unknown.contains("colour"), "{unknown}");
    }

    #[test]
    fn task_grants_replace_the_shared_ones_with_paths_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("data")).unwrap();
        let text = r#"[{"adapter":"echo","prompt":"a","allowRead":["data"],"cwd":".",
                        "allowEnv":["KEY"],"allowNet":["api.example.com"],"grantDeclared":true},
                       {"adapter":"echo","prompt":"b"}]"#;
        let tasks = parse(text, false, Some(&root), &shared()).unwrap();
        let own = &tasks[0].flags;
        assert_eq!(own.grants.allow_read, [root.join("data")]);
        assert_eq!(own.cwd.as_deref(), root.to_str());
        assert_eq!(own.grants.allow_env, ["KEY"]);
        assert!(own.grants.grant_declared);
        assert!(tasks[1].flags.grants.allow_read.is_empty());

        let missing = parse(
            r#"[{"adapter":"echo","prompt":"a","allowWrite":["nope"]}]"#,
            false,
            Some(&root),
            &shared(),
        )
        .unwrap_err();
        assert!(
            missing.contains("allowWrite") && missing.contains("no such directory"),
            "{missing}"
        );
    }
}
