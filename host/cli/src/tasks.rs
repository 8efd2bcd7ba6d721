//! The tasks of `moat parallel`: from `--task [ROLE:]ADAPTER=PROMPT` flags
//! or from a JSON or TOML file of tasks.
//!
//! A file is a list of tasks — JSON `[{...}, ...]` or `{"tasks": [...]}`,
//! TOML `[[task]]` tables —, each a run request in the tasks dialect
//! (`moat_launch::request`: `adapter`, `prompt`, `role`, `model`,
//! `allowNet`, `maxMemory`, `timeout` …, every field of `moat run`'s flags
//! spelled in camelCase). A field left out takes the command-line flag; a
//! field given replaces it. Relative paths are relative to the tasks
//! file's directory.

use std::path::Path;

use moat_launch::request::{Dialect, Field, Raw, RequestError, RunRequest};
use serde_json::Value;

use super::UsageError;
use super::flags::{RequestFlags, RunFields};

/// One task, resolved against the shared flags.
#[derive(Debug, Clone)]
pub struct Task {
    /// A built-in adapter name or a component path.
    pub adapter: String,
    /// Its request: its own fields over the shared flags'.
    pub request: RunRequest,
}

impl Task {
    /// Its role, when it was given one.
    pub fn role(&self) -> Option<&str> {
        self.request.role.as_deref()
    }
}

/// Parses `[ROLE:]ADAPTER=PROMPT`.
pub fn from_flag(spec: &str, flags: &RequestFlags<RunFields>) -> Result<Task, UsageError> {
    let (target, prompt) = spec.split_once('=').ok_or_else(|| {
        UsageError(format!(
            "--task {spec:?} has no `=`; write it as [ROLE:]ADAPTER=PROMPT"
        ))
    })?;
    let (role, adapter) = match target.split_once(':') {
        Some((role, adapter)) => (Some(role.trim()), adapter.trim()),
        None => (None, target.trim()),
    };
    if adapter.is_empty() || role == Some("") {
        return Err(UsageError(format!(
            "--task {spec:?} names no adapter or an empty role; write it as [ROLE:]ADAPTER=PROMPT"
        )));
    }
    let mut raw = flags.raw().map_err(usage)?;
    raw.set(
        Field::Adapter,
        Value::String(adapter.into()),
        Dialect::Flags,
    );
    raw.set(Field::Prompt, Value::String(prompt.into()), Dialect::Flags);
    if let Some(role) = role {
        raw.set(Field::Role, Value::String(role.into()), Dialect::Flags);
    }
    task(&raw).map_err(usage)
}

/// Reads a tasks file; JSON unless its name ends in `.toml`.
pub fn from_file(path: &Path, flags: &RequestFlags<RunFields>) -> Result<Vec<Task>, UsageError> {
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
    let shared = flags.raw().map_err(usage)?;
    parse(&text, is_toml, base, &shared)
        .map_err(|problem| UsageError(format!("{}: {problem}", path.display())))
}

fn parse(
    text: &str,
    is_toml: bool,
    base: Option<&Path>,
    shared: &Raw,
) -> Result<Vec<Task>, String> {
    let list = if is_toml {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.message().trim().to_owned())?;
        let value = serde_json::to_value(table).map_err(|e| e.to_string())?;
        match value {
            Value::Object(mut object) if object.len() == 1 && object.contains_key("task") => {
                object.remove("task")
            }
            _ => None,
        }
        .ok_or("expected [[task]] tables, and nothing else")?
    } else {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match value {
            Value::Object(mut object) if object.contains_key("tasks") => object.remove("tasks"),
            list @ Value::Array(_) => Some(list),
            _ => None,
        }
        .ok_or("expected a list of tasks, or an object with a `tasks` list")?
    };
    let Value::Array(entries) = list else {
        return Err("expected a list of tasks".into());
    };
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let problem = |why: String| format!("task {}: {why}", index + 1);
            let Value::Object(entry) = entry else {
                return Err(problem("not an object of fields".into()));
            };
            let own =
                Raw::read(entry, Dialect::Tasks, base, &[]).map_err(|e| problem(e.to_string()))?;
            task(&own.over(shared)).map_err(|e| problem(e.to_string()))
        })
        .collect()
}

/// The task `raw` asks for; its adapter and prompt must be there.
fn task(raw: &Raw) -> Result<Task, RequestError> {
    let request = RunRequest::from_raw(raw)?;
    let adapter = request
        .adapter
        .clone()
        .ok_or_else(|| missing(Field::Adapter))?;
    if request.prompt.is_none() {
        return Err(missing(Field::Prompt));
    }
    Ok(Task { adapter, request })
}

/// A field every task must have, missing (named as a tasks file does).
fn missing(field: Field) -> RequestError {
    RequestError {
        field: Some(field),
        spelled: Dialect::Tasks.name_of(field),
        problem: moat_launch::request::Problem::Invalid("is missing".into()),
    }
}

fn usage(error: RequestError) -> UsageError {
    UsageError(error.to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};
    use moat_launch::Timeout;

    fn shared() -> RequestFlags<RunFields> {
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

    fn parsed(text: &str, is_toml: bool, base: Option<&Path>) -> Result<Vec<Task>, String> {
        parse(text, is_toml, base, &shared().raw().unwrap())
    }

    #[test]
    fn task_flags_take_an_optional_role_before_the_adapter() {
        let task = from_flag("writer:echo=hello = world", &shared()).unwrap();
        assert_eq!(task.role(), Some("writer"));
        assert_eq!(task.adapter, "echo");
        assert_eq!(task.request.prompt.as_deref(), Some("hello = world"));
        let plain = from_flag("./a.wasm=hi", &shared()).unwrap();
        assert_eq!((plain.role(), plain.adapter.as_str()), (None, "./a.wasm"));
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
        let tasks = parsed(text, false, None).unwrap();
        assert_eq!(
            tasks[0].request.limits.timeout,
            Some(Timeout::After(Duration::from_secs(2)))
        );
        assert_eq!(tasks[0].request.options.allowed_tools, Some(vec![]));
        assert_eq!(
            tasks[0].request.options.model.as_deref(),
            Some("shared-model")
        );
        assert_eq!(tasks[1].request.options.model.as_deref(), Some("own"));
    }

    #[test]
    fn toml_tasks_are_task_tables() {
        let text = "[[task]]\nadapter = \"echo\"\nprompt = \"hi\"\ntrust = \"controlled\"\n";
        let tasks = parsed(text, true, None).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(
            tasks[0].request.trust,
            Some(moat_grants::TrustLevel::Controlled)
        );
    }

    #[test]
    fn extra_is_an_object_from_json_or_a_toml_table() {
        let json = r#"[{"adapter":"openai","prompt":"a","extra":{"tools":[{"type":"function"}]}}]"#;
        let tasks = parsed(json, false, None).unwrap();
        let extra = tasks[0].request.options.extra.clone().unwrap();
        assert_eq!(extra["tools"][0]["type"], "function");

        let toml =
            "[[task]]\nadapter = \"openai\"\nprompt = \"hi\"\n[task.extra]\ntemperature = 0.5\n";
        let tasks = parsed(toml, true, None).unwrap();
        assert_eq!(
            tasks[0].request.options.extra.clone().unwrap()["temperature"],
            0.5
        );

        let error = parsed(
            r#"[{"adapter":"echo","prompt":"a","extra":[1]}]"#,
            false,
            None,
        )
        .unwrap_err();
        assert!(
            error.contains("task 1") && error.contains("extra"),
            "{error}"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_task_and_field() {
        let error = parsed(
            r#"[{"adapter":"echo","prompt":"a","timeout":"soon"}]"#,
            false,
            None,
        )
        .unwrap_err();
        assert!(
            error.starts_with("task 1: timeout: `soon` is not a duration"),
            "{error}"
        );
        let unknown = parsed(
            r#"[{"adapter":"echo","prompt":"a","colour":"red"}]"#,
            false,
            None,
        )
        .unwrap_err();
        assert!(unknown.contains("`colour` is not a field"), "{unknown}");
        let missing = parsed(r#"[{"prompt":"a"}]"#, false, None).unwrap_err();
        assert_eq!(missing, "task 1: adapter: is missing");
    }

    #[test]
    fn task_grants_replace_the_shared_ones_with_paths_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("data")).unwrap();
        let text = r#"[{"adapter":"echo","prompt":"a","allowRead":["data"],"cwd":".",
                        "allowEnv":["KEY"],"allowNet":["api.example.com"],"grantDeclared":true},
                       {"adapter":"echo","prompt":"b"}]"#;
        let tasks = parsed(text, false, Some(&root)).unwrap();
        let own = &tasks[0].request;
        assert_eq!(own.grants.read, Some(vec![root.join("data")]));
        assert_eq!(own.options.cwd.as_deref(), root.to_str());
        assert_eq!(own.grants.env, Some(vec!["KEY".to_owned()]));
        assert!(own.grant_declared);
        assert_eq!(tasks[1].request.grants.read, None);

        let missing = parsed(
            r#"[{"adapter":"echo","prompt":"a","allowWrite":["nope"]}]"#,
            false,
            Some(&root),
        )
        .unwrap_err();
        assert!(
            missing.contains("allowWrite") && missing.contains("no such directory"),
            "{missing}"
        );
    }
}
