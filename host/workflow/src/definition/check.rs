//! From the file as written to a [`Workflow`]: every check, every problem
//! collected (not just the first), each at its place in the file.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use moat_grants::{Grants, NetRule, canonical_dir, names};

use super::error::{DefinitionError, Problem};
use super::file::{
    CommandEntry, GrantsEntry, HookEntry, LoopEntry, TASK_KEYS, TaskEntry, WorkflowFile,
};
use super::location::{Location, Locator};
use crate::model::{
    Command, CommandSandbox, DEFAULT_BACKOFF, DEFAULT_CONTEXT_BUDGET, DEFAULT_HOOK_TIMEOUT,
    HookCommand, HookPoint, Loop, MAX_ITERATIONS, MAX_RETRIES, OnMax, Task, Until, Workflow,
};
use crate::template;
use moat_launch::{Dialect, RunRequest};

/// What is known of the file besides its text.
pub struct Source<'a> {
    pub file: &'a Path,
    pub project: &'a Path,
    pub stem: &'a str,
    pub hash: String,
}

/// The longest id, name or adapter accepted.
const MAX_NAME: usize = 128;

/// Collects problems with their places.
struct Problems<'a> {
    locator: &'a Locator,
    found: Vec<Problem>,
}

impl Problems<'_> {
    fn at(&mut self, path: &str, message: impl Into<String>) {
        self.found.push(Problem {
            location: Some(self.locator.at(path)),
            message: message.into(),
        });
    }
}

pub fn check(text: &str, is_json: bool, source: Source<'_>) -> Result<Workflow, DefinitionError> {
    let (parsed, locator) = if is_json {
        (
            serde_json::from_str::<WorkflowFile>(text).map_err(|e| {
                parse_problem(
                    &source,
                    Some((e.line(), e.column())),
                    not_a_workflow(&e.to_string()),
                )
            }),
            Locator::json(),
        )
    } else {
        (
            toml::from_str::<WorkflowFile>(text).map_err(|e| {
                let at = e.span().map(|span| line_col(text, span.start));
                parse_problem(&source, at, not_a_workflow(e.message()))
            }),
            Locator::toml(text),
        )
    };
    let parsed = parsed?;
    let mut problems = Problems {
        locator: &locator,
        found: Vec::new(),
    };
    let workflow = build(parsed, &source, &mut problems);
    if problems.found.is_empty() {
        Ok(workflow)
    } else {
        Err(DefinitionError {
            file: source.file.to_path_buf(),
            problems: problems.found,
        })
    }
}

fn parse_problem(
    source: &Source<'_>,
    at: Option<(usize, usize)>,
    message: String,
) -> DefinitionError {
    DefinitionError {
        file: source.file.to_path_buf(),
        problems: vec![Problem {
            location: at.map(|line_col| Location {
                path: String::new(),
                line_col: Some(line_col),
            }),
            message,
        }],
    }
}

/// A parser's complaint, with the field a mistyped one likely meant
/// ("unknown field `depends`, expected one of `id`, … `depends_on` …").
fn not_a_workflow(complaint: &str) -> String {
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let suggestion = complaint
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .and_then(|(field, expected)| {
            let known = quoted(expected);
            moat_engine::likely_meant(field, known.iter().map(String::as_str)).map(str::to_owned)
        });
    match suggestion {
        Some(meant) => format!("not a workflow: {complaint} (did you mean `{meant}`?)"),
        None => format!("not a workflow: {complaint}"),
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |at| before.len() - at - 1)
        + 1;
    (line, column)
}

fn build(file: WorkflowFile, source: &Source<'_>, problems: &mut Problems<'_>) -> Workflow {
    let name = file.name.clone().unwrap_or_else(|| source.stem.to_owned());
    if let Err(why) = check_name(&name) {
        problems.at("name", format!("the workflow's name {name:?} {why}"));
    }
    let constitution = file
        .constitution
        .into_vec()
        .into_iter()
        .enumerate()
        .filter_map(|(index, path)| {
            let at = format!("constitution[{index}]");
            let resolved = inside_project(&path, source.project)
                .map_err(|why| problems.at(&at, format!("constitution {path:?}: {why}")))
                .ok()?;
            let absolute = source.project.join(&resolved);
            if !absolute.is_file() {
                problems.at(&at, format!("constitution {path:?} does not exist"));
            }
            Some(absolute)
        })
        .collect();
    if file.max_parallel == Some(0) {
        problems.at("max_parallel", "max_parallel must be at least 1");
    }
    let context_budget = match &file.context_budget {
        None => DEFAULT_CONTEXT_BUDGET,
        Some(text) => match text.parse::<bytesize::ByteSize>() {
            Ok(size) if size.as_u64() >= 1024 => size.as_u64().try_into().unwrap_or(usize::MAX),
            Ok(_) => {
                problems.at("context_budget", "context_budget must be at least 1KiB");
                DEFAULT_CONTEXT_BUDGET
            }
            Err(_) => {
                problems.at(
                    "context_budget",
                    format!("context_budget {text:?} is not a size; write e.g. \"256KiB\""),
                );
                DEFAULT_CONTEXT_BUDGET
            }
        },
    };
    let default_workspace = file.workspace.as_deref();
    let tasks: Vec<Task> = file
        .tasks
        .into_iter()
        .enumerate()
        .map(|(index, entry)| task(index, entry, default_workspace, source, problems))
        .collect();
    if tasks.is_empty() {
        problems.at("task", "the workflow has no tasks; add a [[task]] table");
    }
    check_ids(&tasks, problems);
    check_dependencies(&tasks, problems);
    check_inputs(&tasks, source.project, problems);
    let hooks = file
        .hooks
        .into_iter()
        .enumerate()
        .filter_map(|(index, entry)| hook(index, entry, &tasks, source.project, problems))
        .collect();
    Workflow {
        name,
        file: source.file.to_path_buf(),
        project: source.project.to_path_buf(),
        hash: source.hash.clone(),
        constitution,
        max_parallel: file.max_parallel,
        context_budget,
        tasks,
        hooks,
    }
}

/// Names and ids: they name directories and appear in logs and tables.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err("must have 1 to 128 characters");
    }
    if name.starts_with('.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("may have only letters, digits, `-`, `_` and `.`, not starting with `.`");
    }
    Ok(())
}

fn task(
    index: usize,
    entry: TaskEntry,
    default_workspace: Option<&str>,
    source: &Source<'_>,
    problems: &mut Problems<'_>,
) -> Task {
    let at = |field: &str| format!("task[{index}].{field}");
    if let Err(why) = check_name(&entry.id) {
        problems.at(&at("id"), format!("the task id {:?} {why}", entry.id));
    }
    // Its run: a request in the workflow's words, read as every request is.
    // One that does not read is its one problem (what it lacks besides
    // would only repeat it).
    let read = RunRequest::read(
        &entry.request,
        Dialect::Workflow,
        Some(source.project),
        TASK_KEYS,
    );
    let read_well = read.is_ok();
    let mut request = read.unwrap_or_else(|error| {
        problems.at(&at(&error.spelled), error.to_string());
        RunRequest::default()
    });
    if !entry.request.contains_key("workspace")
        && let Some(mode) = default_workspace
    {
        let default = serde_json::Map::from_iter([("workspace".to_owned(), mode.into())]);
        match RunRequest::read(&default, Dialect::Workflow, None, &[]) {
            Ok(default) => request.workspace = default.workspace,
            Err(error) => problems.at("workspace", error.to_string()),
        }
    }
    let adapter = request.adapter.clone().unwrap_or_default();
    if read_well && (adapter.trim().is_empty() || adapter.len() > 4096) {
        problems.at(
            &at("adapter"),
            "adapter must name a built-in adapter or a .wasm file",
        );
    }
    let prompt = request.prompt.clone().unwrap_or_default();
    if request.prompt.is_none() {
        if read_well {
            problems.at(&at("prompt"), "prompt is missing");
        }
    } else if let Err(why) = template::check(&prompt) {
        problems.at(&at("prompt"), why);
    }
    // A component by path is the project's, as every path of the file is.
    let is_path = adapter.contains('/') || adapter.ends_with(".wasm");
    if is_path && let Err(why) = inside_project(&adapter, source.project) {
        problems.at(&at("adapter"), format!("{adapter:?}: {why}"));
    }
    let mut paths = |field: &str, list: Vec<String>| -> Vec<PathBuf> {
        list.into_iter()
            .enumerate()
            .filter_map(|(i, path)| {
                inside_project(&path, source.project)
                    .map_err(|why| {
                        problems.at(&format!("{}[{i}]", at(field)), format!("{path:?}: {why}"))
                    })
                    .ok()
            })
            .collect()
    };
    let inputs = paths("inputs", entry.inputs);
    let outputs = paths("outputs", entry.outputs);
    let save_answer = paths("save_answer", entry.save_answer.into_iter().collect())
        .into_iter()
        .next();
    let backoff = match entry.backoff.as_deref() {
        None => DEFAULT_BACKOFF,
        Some(text) => duration(text)
            .map_err(|why| problems.at(&at("backoff"), format!("backoff {why}")))
            .unwrap_or(DEFAULT_BACKOFF),
    };
    if entry.retries > MAX_RETRIES {
        problems.at(
            &at("retries"),
            format!("retries must be at most {MAX_RETRIES}"),
        );
    }
    let repeat = entry
        .repeat
        .and_then(|entry| repeat(entry, &at("loop"), source.project, problems));
    Task {
        id: entry.id,
        adapter,
        prompt,
        depends_on: entry.depends_on,
        inputs,
        outputs,
        save_answer,
        request,
        retries: entry.retries,
        backoff,
        repeat,
    }
}

/// A relative path inside the project, without `..`: tasks read and
/// produce files of the project only.
fn inside_project(path: &str, project: &Path) -> Result<PathBuf, String> {
    let path = Path::new(path);
    let relative = if path.is_absolute() {
        path.strip_prefix(project)
            .map_err(|_| {
                format!(
                    "is outside the project {}; use a path inside it",
                    project.display()
                )
            })?
            .to_path_buf()
    } else {
        path.to_path_buf()
    };
    if relative.as_os_str().is_empty() {
        return Err("is empty".into());
    }
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err("may not leave the project (`..`); use a path inside it".into());
    }
    Ok(relative.components().collect())
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration ({e}); write e.g. \"30s\" or \"10m\""))
}

fn task_grants(
    entry: GrantsEntry,
    project: &Path,
    at: &str,
    problems: &mut Problems<'_>,
) -> Grants {
    let mut grants = Grants::none();
    for (i, rule) in entry.net.iter().enumerate() {
        match NetRule::parse(rule) {
            Ok(rule) => grants.net.push(rule),
            Err(e) => problems.at(&format!("{at}.net[{i}]"), e.to_string()),
        }
    }
    for (field, list, into) in [
        ("read", &entry.read, &mut grants.read),
        ("write", &entry.write, &mut grants.write),
    ] {
        for (i, dir) in list.iter().enumerate() {
            match canonical_dir(Path::new(dir), Some(project)) {
                Ok(dir) => into.push(dir),
                Err(e) => problems.at(&format!("{at}.{field}[{i}]"), e.to_string()),
            }
        }
    }
    for (i, name) in entry.env.iter().enumerate() {
        match names::env_name(name) {
            Ok(name) => grants.env.push(name),
            Err(e) => problems.at(&format!("{at}.env[{i}]"), e.to_string()),
        }
    }
    for (i, program) in entry.run.iter().enumerate() {
        match names::program(program) {
            Ok(program) => grants.run.push(program),
            Err(e) => problems.at(&format!("{at}.run[{i}]"), e.to_string()),
        }
    }
    grants
}

fn repeat(entry: LoopEntry, at: &str, project: &Path, problems: &mut Problems<'_>) -> Option<Loop> {
    if entry.max_iterations == 0 || entry.max_iterations > MAX_ITERATIONS {
        problems.at(
            &format!("{at}.max_iterations"),
            format!("max_iterations must be 1 to {MAX_ITERATIONS}"),
        );
    }
    let on_max = match entry.on_max.as_deref() {
        None | Some("fail") => OnMax::Fail,
        Some("complete") => OnMax::Complete,
        Some(other) => {
            problems.at(
                &format!("{at}.on_max"),
                format!("on_max {other:?} is neither \"fail\" nor \"complete\""),
            );
            OnMax::Fail
        }
    };
    let until = match (entry.until.command, entry.until.handover) {
        (Some(command), None) => {
            if entry.until.equals.is_some() {
                problems.at(
                    &format!("{at}.until.equals"),
                    "equals goes with handover, not command",
                );
            }
            let sandbox = sandbox(
                entry.until.unsandboxed,
                entry.until.grants,
                project,
                &format!("{at}.until"),
                problems,
            );
            Until::Command(
                self::command(command, &format!("{at}.until.command"), problems)?,
                sandbox,
            )
        }
        (None, Some(field)) => Until::Handover {
            pointer: if field.starts_with('/') {
                field
            } else {
                format!("/{field}")
            },
            equals: entry.until.equals.unwrap_or(serde_json::Value::Bool(true)),
        },
        _ => {
            problems.at(
                &format!("{at}.until"),
                "until needs exactly one of command (ends when it exits 0) or handover (a field, with equals)",
            );
            return None;
        }
    };
    Some(Loop {
        max_iterations: entry.max_iterations,
        until,
        on_max,
    })
}

/// How a hook or check command at `at` runs: contained to `grants`
/// (paths relative to `project`), or with the user's rights when
/// `unsandboxed` (then it has no grants to give).
fn sandbox(
    unsandboxed: bool,
    grants: Option<GrantsEntry>,
    project: &Path,
    at: &str,
    problems: &mut Problems<'_>,
) -> CommandSandbox {
    match (unsandboxed, grants) {
        (true, Some(_)) => {
            problems.at(
                &format!("{at}.grants"),
                "an unsandboxed command has every right already: leave out grants, or unsandboxed",
            );
            CommandSandbox::Unsandboxed
        }
        (true, None) => CommandSandbox::Unsandboxed,
        (false, grants) => CommandSandbox::Contained(Box::new(match grants {
            Some(entry) => task_grants(entry, project, &format!("{at}.grants"), problems),
            None => Grants::none(),
        })),
    }
}

fn command(entry: CommandEntry, at: &str, problems: &mut Problems<'_>) -> Option<Command> {
    let command = match entry {
        CommandEntry::Shell(script) if !script.trim().is_empty() => Command::Shell(script),
        CommandEntry::Argv(argv) if argv.first().is_some_and(|p| !p.is_empty()) => {
            Command::Argv(argv)
        }
        _ => {
            problems.at(at, "the command is empty");
            return None;
        }
    };
    Some(command)
}

fn hook(
    index: usize,
    entry: HookEntry,
    tasks: &[Task],
    project: &Path,
    problems: &mut Problems<'_>,
) -> Option<HookCommand> {
    let at = |field: &str| format!("hook[{index}].{field}");
    let point = HookPoint::parse(&entry.on);
    if point.is_none() {
        problems.at(
            &at("on"),
            format!(
                "on {:?} is not a hook point; use one of {}",
                entry.on,
                HookPoint::ALL.map(|p| p.as_str()).join(", ")
            ),
        );
    }
    if entry.task != "*" && !tasks.iter().any(|task| task.id == entry.task) {
        problems.at(
            &at("task"),
            format!("no task has the id {:?}; use an id or \"*\"", entry.task),
        );
    }
    let timeout = match entry.timeout.as_deref() {
        None => DEFAULT_HOOK_TIMEOUT,
        Some(text) => duration(text)
            .map_err(|why| problems.at(&at("timeout"), format!("timeout {why}")))
            .unwrap_or(DEFAULT_HOOK_TIMEOUT),
    };
    let sandbox = sandbox(
        entry.unsandboxed,
        entry.grants,
        project,
        &format!("hook[{index}]"),
        problems,
    );
    let command = command(entry.command, &at("command"), problems)?;
    Some(HookCommand {
        point: point?,
        task: entry.task,
        command,
        timeout,
        sandbox,
    })
}

fn check_ids(tasks: &[Task], problems: &mut Problems<'_>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, task) in tasks.iter().enumerate() {
        if let Some(first) = seen.insert(&task.id, index) {
            problems.at(
                &format!("task[{index}].id"),
                format!(
                    "the id {:?} is also task[{first}]'s; ids must be unique",
                    task.id
                ),
            );
            seen.insert(&task.id, first);
        }
    }
}

fn check_dependencies(tasks: &[Task], problems: &mut Problems<'_>) {
    let ids: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    for (index, task) in tasks.iter().enumerate() {
        for (i, dependency) in task.depends_on.iter().enumerate() {
            let at = format!("task[{index}].depends_on[{i}]");
            if dependency == &task.id {
                problems.at(&at, format!("task {:?} depends on itself", task.id));
            } else if !ids.contains(dependency.as_str()) {
                problems.at(
                    &at,
                    format!(
                        "task {:?} depends on {dependency:?}, which no task is",
                        task.id
                    ),
                );
            }
        }
    }
    if let Some(cycle) = crate::graph::find_cycle(tasks) {
        let first = &cycle[0];
        let index = tasks.iter().position(|t| &t.id == first).unwrap_or(0);
        let edge = tasks[index]
            .depends_on
            .iter()
            .position(|d| Some(d) == cycle.get(1))
            .unwrap_or(0);
        problems.at(
            &format!("task[{index}].depends_on[{edge}]"),
            format!(
                "the tasks depend on each other in a cycle: {}",
                cycle.join(" → ")
            ),
        );
    }
}

/// An input must exist, or be produced by a task it depends on (directly
/// or not) before it runs.
fn check_inputs(tasks: &[Task], project: &Path, problems: &mut Problems<'_>) {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    for (index, task) in tasks.iter().enumerate() {
        let upstream = crate::graph::ancestors(&task.id, &by_id);
        for (i, input) in task.inputs.iter().enumerate() {
            let produced = upstream
                .iter()
                .filter_map(|id| by_id.get(id.as_str()))
                .any(|t| t.produces().any(|p| p == input));
            if !produced && !project.join(input).is_file() {
                problems.at(
                    &format!("task[{index}].inputs[{i}]"),
                    format!(
                        "input {} does not exist and no task {:?} depends on produces it",
                        input.display(),
                        task.id
                    ),
                );
            }
        }
    }
}
