//! One short line for people per tool call ("Read src/main.rs", "Run
//! `cargo test`", "Edit host/lib.rs (+3 −1)", "Search the web: …"), for
//! `tool_use.description`. One summarizer for every CLI adapter; what
//! differs is only each backend's table of tool names ([`CLAUDE_CODE`],
//! [`CODEX`], [`GEMINI`]) and the input fields it reads.
//!
//! The input is the CLI's, so untrusted: every value is cut to a line of
//! [`MAX_SUMMARY`] characters at most, and a missing field gives a summary
//! without it rather than none.

use moat_guest::json::Value;

/// The longest summary, in characters.
pub const MAX_SUMMARY: usize = 120;

/// What a tool does, as far as a summary cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Reads a file (or several).
    Read,
    /// Writes a whole file.
    Write,
    /// Changes part of a file.
    Edit,
    /// Runs a shell command.
    Shell,
    /// Finds files by a name pattern.
    FindFiles,
    /// Searches file contents.
    SearchText,
    /// Lists a directory.
    List,
    /// Searches the web.
    WebSearch,
    /// Fetches a web page.
    WebFetch,
    /// Updates the agent's to-do list.
    Todo,
    /// Starts a sub-agent.
    SubAgent,
}

/// A backend's tool names and what each does.
pub type ToolTable = &'static [(&'static str, ToolKind)];

/// Claude Code's built-in tools.
pub const CLAUDE_CODE: ToolTable = &[
    ("Read", ToolKind::Read),
    ("Write", ToolKind::Write),
    ("Edit", ToolKind::Edit),
    ("MultiEdit", ToolKind::Edit),
    ("NotebookEdit", ToolKind::Edit),
    ("Bash", ToolKind::Shell),
    ("Glob", ToolKind::FindFiles),
    ("Grep", ToolKind::SearchText),
    ("LS", ToolKind::List),
    ("WebSearch", ToolKind::WebSearch),
    ("WebFetch", ToolKind::WebFetch),
    ("TodoWrite", ToolKind::Todo),
    ("Task", ToolKind::SubAgent),
];

/// Codex's tool calls, as its adapter names them (`shell` for a
/// `command_execution` item).
pub const CODEX: ToolTable = &[("shell", ToolKind::Shell)];

/// Gemini CLI's built-in tools.
pub const GEMINI: ToolTable = &[
    ("read_file", ToolKind::Read),
    ("read_many_files", ToolKind::Read),
    ("write_file", ToolKind::Write),
    ("replace", ToolKind::Edit),
    ("run_shell_command", ToolKind::Shell),
    ("glob", ToolKind::FindFiles),
    ("search_file_content", ToolKind::SearchText),
    ("grep", ToolKind::SearchText),
    ("list_directory", ToolKind::List),
    ("google_web_search", ToolKind::WebSearch),
    ("web_fetch", ToolKind::WebFetch),
    ("write_todos", ToolKind::Todo),
];

/// The summary of a call of `name` with `input`, by the backend's `table`.
/// MCP tools (`mcp__server__tool`) and tools the table does not know get
/// a generic line naming them.
pub fn summarize(table: ToolTable, name: &str, input: &Value) -> String {
    let kind = table
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, k)| *k);
    let text = |fields: &[&str]| {
        fields
            .iter()
            .find_map(|field| match &input[*field] {
                Value::String(text) if !text.trim().is_empty() => Some(text.clone()),
                // Codex gives a command as its argv.
                Value::Array(words) if !words.is_empty() => Some(
                    words
                        .iter()
                        .map(|w| w.as_str().unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                _ => None,
            })
            .map(|text| one_line(&text))
    };
    let path = || text(&["file_path", "absolute_path", "notebook_path", "path"]);
    let summary = match kind {
        Some(ToolKind::Read) => match (path(), input["paths"].as_array()) {
            (Some(path), _) => format!("Read {path}"),
            (None, Some(paths)) => format!("Read {} files", paths.len()),
            (None, None) => "Read a file".to_owned(),
        },
        Some(ToolKind::Write) => {
            let lines = input["content"].as_str().map(count_lines);
            match (path(), lines) {
                (Some(path), Some(lines)) => format!("Write {path} ({lines} lines)"),
                (Some(path), None) => format!("Write {path}"),
                (None, _) => "Write a file".to_owned(),
            }
        }
        Some(ToolKind::Edit) => {
            let target = path().unwrap_or_else(|| "a file".to_owned());
            match edit_counts(input) {
                Some((added, removed)) => format!("Edit {target} (+{added} −{removed})"),
                None => format!("Edit {target}"),
            }
        }
        Some(ToolKind::Shell) => match text(&["command", "cmd"]) {
            Some(command) => format!("Run `{command}`"),
            None => "Run a command".to_owned(),
        },
        Some(ToolKind::FindFiles) => match text(&["pattern"]) {
            Some(pattern) => in_dir(format!("Find files `{pattern}`"), path()),
            None => "Find files".to_owned(),
        },
        Some(ToolKind::SearchText) => match text(&["pattern", "query"]) {
            Some(pattern) => in_dir(format!("Search for `{pattern}`"), path()),
            None => "Search files".to_owned(),
        },
        Some(ToolKind::List) => match path() {
            Some(path) => format!("List {path}"),
            None => "List a directory".to_owned(),
        },
        Some(ToolKind::WebSearch) => match text(&["query"]) {
            Some(query) => format!("Search the web: {query}"),
            None => "Search the web".to_owned(),
        },
        Some(ToolKind::WebFetch) => match text(&["url", "prompt"]) {
            Some(url) => format!("Fetch {url}"),
            None => "Fetch a web page".to_owned(),
        },
        Some(ToolKind::Todo) => "Update the to-do list".to_owned(),
        Some(ToolKind::SubAgent) => match text(&["description", "subagent_type"]) {
            Some(task) => format!("Start a sub-agent: {task}"),
            None => "Start a sub-agent".to_owned(),
        },
        None => match name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
        {
            Some((server, tool)) => format!("Call {} on {}", one_line(tool), one_line(server)),
            None => format!("Use {}", one_line(name)),
        },
    };
    cut(&summary, MAX_SUMMARY)
}

/// Lines added and removed by an edit: `old_string`/`new_string` (Claude
/// Code's `Edit`, Gemini's `replace`) or a list of them (`MultiEdit`).
fn edit_counts(input: &Value) -> Option<(usize, usize)> {
    let pair = |edit: &Value| -> Option<(usize, usize)> {
        let old = edit["old_string"].as_str()?;
        let new = edit["new_string"].as_str()?;
        Some((count_lines(new), count_lines(old)))
    };
    match input["edits"].as_array() {
        Some(edits) => edits
            .iter()
            .map(pair)
            .try_fold((0, 0), |(a, r), edit| edit.map(|(ea, er)| (a + ea, r + er))),
        None => pair(input),
    }
}

fn count_lines(text: &str) -> usize {
    text.lines().count()
}

fn in_dir(summary: String, dir: Option<String>) -> String {
    match dir {
        Some(dir) => format!("{summary} in {dir}"),
        None => summary,
    }
}

/// The first line of `text`, cut short, with control characters dropped.
fn one_line(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or_default();
    let clean: String = first.chars().filter(|c| !c.is_control()).collect();
    let more = text.trim().lines().nth(1).is_some();
    let cut_text = cut(&clean, MAX_SUMMARY / 2);
    if more && cut_text == clean {
        format!("{clean} …")
    } else {
        cut_text
    }
}

/// `text` cut to `max` characters, an ellipsis marking the cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use moat_guest::json::json;

    use super::*;

    #[test]
    fn each_backends_tools_read_as_a_person_would_say_them() {
        let cases = [
            (
                CLAUDE_CODE,
                "Read",
                json!({"file_path": "src/main.rs"}),
                "Read src/main.rs",
            ),
            (
                CLAUDE_CODE,
                "Bash",
                json!({"command": "cargo test", "description": "x"}),
                "Run `cargo test`",
            ),
            (
                CLAUDE_CODE,
                "Edit",
                json!({"file_path": "host/lib.rs", "old_string": "a", "new_string": "a\nb\nc"}),
                "Edit host/lib.rs (+3 −1)",
            ),
            (
                CLAUDE_CODE,
                "MultiEdit",
                json!({"file_path": "x.rs", "edits": [
                    {"old_string": "a", "new_string": "b"},
                    {"old_string": "c\nd", "new_string": ""}]}),
                "Edit x.rs (+1 −3)",
            ),
            (
                CLAUDE_CODE,
                "Write",
                json!({"file_path": "n.md", "content": "1\n2\n"}),
                "Write n.md (2 lines)",
            ),
            (
                CLAUDE_CODE,
                "Grep",
                json!({"pattern": "TODO", "path": "src"}),
                "Search for `TODO` in src",
            ),
            (
                CLAUDE_CODE,
                "Glob",
                json!({"pattern": "**/*.rs"}),
                "Find files `**/*.rs`",
            ),
            (
                CLAUDE_CODE,
                "WebSearch",
                json!({"query": "wasmtime epochs"}),
                "Search the web: wasmtime epochs",
            ),
            (
                CLAUDE_CODE,
                "WebFetch",
                json!({"url": "https://example.com", "prompt": "p"}),
                "Fetch https://example.com",
            ),
            (
                CLAUDE_CODE,
                "Task",
                json!({"description": "Review the diff"}),
                "Start a sub-agent: Review the diff",
            ),
            (
                CLAUDE_CODE,
                "TodoWrite",
                json!({"todos": []}),
                "Update the to-do list",
            ),
            (CODEX, "shell", json!({"command": "ls -la"}), "Run `ls -la`"),
            (
                CODEX,
                "shell",
                json!({"command": ["bash", "-lc", "make"]}),
                "Run `bash -lc make`",
            ),
            (
                CODEX,
                "mcp__github__create_issue",
                json!({}),
                "Call create_issue on github",
            ),
            (
                GEMINI,
                "read_file",
                json!({"absolute_path": "/w/a.txt"}),
                "Read /w/a.txt",
            ),
            (
                GEMINI,
                "run_shell_command",
                json!({"command": "npm test"}),
                "Run `npm test`",
            ),
            (
                GEMINI,
                "replace",
                json!({"file_path": "a", "old_string": "x", "new_string": "y"}),
                "Edit a (+1 −1)",
            ),
            (
                GEMINI,
                "google_web_search",
                json!({"query": "rust"}),
                "Search the web: rust",
            ),
            (
                GEMINI,
                "read_many_files",
                json!({"paths": ["a", "b"]}),
                "Read 2 files",
            ),
            (
                GEMINI,
                "save_memory",
                json!({"fact": "x"}),
                "Use save_memory",
            ),
        ];
        for (table, name, input, expected) in cases {
            assert_eq!(summarize(table, name, &input), expected, "{name} {input}");
        }
    }

    #[test]
    fn hostile_input_gives_a_short_single_line_and_missing_fields_a_plain_one() {
        let long = "x".repeat(10_000);
        let summary = summarize(CLAUDE_CODE, "Bash", &json!({"command": long}));
        assert!(summary.chars().count() <= MAX_SUMMARY, "{summary}");
        let summary = summarize(
            CLAUDE_CODE,
            "Bash",
            &json!({"command": "a\u{1b}[2J\nrm -rf /"}),
        );
        assert_eq!(summary, "Run `a[2J …`");
        assert_eq!(summarize(CLAUDE_CODE, "Read", &json!({})), "Read a file");
        assert_eq!(
            summarize(CLAUDE_CODE, "Edit", &json!({"file_path": 3})),
            "Edit a file"
        );
        assert!(
            summarize(GEMINI, &"n".repeat(500), &json!(null))
                .chars()
                .count()
                <= MAX_SUMMARY
        );
    }
}
