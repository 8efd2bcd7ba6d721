//! Replaying recorded fixtures (`tests/fixtures/cli/<cli>/<scenario>.jsonl`,
//! written by `scripts/record-cli-fixtures`) through a translator, for the
//! adapters' native unit tests.

use std::path::{Path, PathBuf};

use moat_guest::Event;
use moat_guest::json::Value;

use crate::{Exit, Translator, translate_all};

/// A recorded CLI run.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The stdout lines, in order.
    pub stdout: Vec<String>,
    /// Everything on stderr, one line per recorded line.
    pub stderr: String,
    /// How the CLI ended.
    pub exit: Exit,
}

/// The fixture directory of `cli` in the workspace.
pub fn fixture_dir(cli: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cli")
        .join(cli)
}

impl Fixture {
    /// Loads `<scenario>.jsonl` and its `.meta.json` for `cli`; panics with
    /// the path when they are missing or malformed (a test setup error).
    pub fn load(cli: &str, scenario: &str) -> Fixture {
        let dir = fixture_dir(cli);
        let path = dir.join(format!("{scenario}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
        let mut fixture = Fixture {
            stdout: Vec::new(),
            stderr: String::new(),
            exit: Exit::default(),
        };
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let entry: Value = moat_guest::serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            if let Some(out) = entry["stdout"].as_str() {
                fixture.stdout.push(out.to_owned());
            } else if let Some(err) = entry["stderr"].as_str() {
                fixture.stderr.push_str(err);
                fixture.stderr.push('\n');
            }
        }
        let meta_path = dir.join(format!("{scenario}.meta.json"));
        let meta: Value = moat_guest::serde_json::from_str(
            &std::fs::read_to_string(&meta_path)
                .unwrap_or_else(|error| panic!("read {}: {error}", meta_path.display())),
        )
        .unwrap_or_else(|error| panic!("{}: {error}", meta_path.display()));
        fixture.exit = Exit {
            code: meta["exit_code"]
                .as_i64()
                .and_then(|c| i32::try_from(c).ok()),
            signal: meta["signal"].as_i64().and_then(|s| i32::try_from(s).ok()),
        };
        fixture
    }

    /// The stdout lines parsed, for tests that look at the raw lines.
    pub fn parsed(&self) -> Vec<Value> {
        self.stdout
            .iter()
            .filter_map(|line| moat_guest::serde_json::from_str(line).ok())
            .collect()
    }

    /// Runs every line and the exit through `translator`.
    pub fn translate(&self, translator: &mut impl Translator) -> Vec<Event> {
        translate_all(
            translator,
            self.stdout.iter().map(String::as_str),
            self.exit,
            &self.stderr,
        )
    }
}
