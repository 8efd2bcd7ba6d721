//! Recorded runs of the agent CLIs (Claude Code, Codex, Gemini CLI).
//!
//! A fixture is two files under `tests/fixtures/cli/<cli>/`:
//!
//! - `<scenario>.jsonl`: one JSON object per line the CLI wrote, in order,
//!   `{"ms": 12, "stdout": "<the line, without its newline>"}` or
//!   `{"ms": 40, "stderr": "…"}`, where `ms` is the time since the CLI
//!   started; `"partial": true` marks a last line the CLI ended without a
//!   newline;
//! - `<scenario>.meta.json`: the CLI, its version, the arguments, the exit
//!   code (or signal) and the requests the loopback backend received
//!   ([`Meta`]).
//!
//! `moat-cli-capture` writes them from a real run (see
//! `scripts/record-cli-fixtures`); `moat-fake-cli` replays one with its
//! recorded timing, standing in for the CLI in end-to-end tests.

pub mod fake;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest fixture file read (a guard against pointing a replay at
/// the wrong file).
pub const MAX_FIXTURE_BYTES: u64 = 16 * 1024 * 1024;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output: the CLI's JSON lines.
    Stdout,
    /// Standard error: diagnostics.
    Stderr,
}

/// One recorded line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// Milliseconds since the CLI started.
    pub ms: u64,
    /// The line on stdout, without its newline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// The line on stderr, without its newline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The CLI ended this line without a newline (its last output).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

impl Line {
    /// A line of `stream` at `ms`.
    pub fn new(ms: u64, stream: Stream, text: String, partial: bool) -> Self {
        let (stdout, stderr) = match stream {
            Stream::Stdout => (Some(text), None),
            Stream::Stderr => (None, Some(text)),
        };
        Line {
            ms,
            stdout,
            stderr,
            partial,
        }
    }

    /// The stream and text of the line (`None` for an entry with neither).
    pub fn output(&self) -> Option<(Stream, &str)> {
        match (&self.stdout, &self.stderr) {
            (Some(text), _) => Some((Stream::Stdout, text)),
            (None, Some(text)) => Some((Stream::Stderr, text)),
            (None, None) => None,
        }
    }
}

/// What a recording was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `claude`, `codex` or `gemini`.
    pub cli: String,
    /// The CLI's `--version` output.
    pub cli_version: String,
    /// The backend stub's scenario.
    pub scenario: String,
    /// The CLI's arguments (program name excluded).
    pub args: Vec<String>,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// How long it ran.
    pub duration_ms: u64,
    /// The requests the backend stub received, one JSON object each.
    #[serde(default)]
    pub requests: Vec<serde_json::Value>,
}

/// A fixture that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read.
    #[error("read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is larger than [`MAX_FIXTURE_BYTES`].
    #[error("{0} is larger than {MAX_FIXTURE_BYTES} bytes")]
    TooLarge(PathBuf),
    /// A line or the metadata is not what the format says.
    #[error("{path}:{line}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The 1-based line number (1 for the metadata).
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// Reads a file of at most [`MAX_FIXTURE_BYTES`].
fn read_bounded(path: &Path) -> Result<String, FixtureError> {
    let io = |source| FixtureError::Io {
        path: path.to_owned(),
        source,
    };
    if fs::metadata(path).map_err(io)?.len() > MAX_FIXTURE_BYTES {
        return Err(FixtureError::TooLarge(path.to_owned()));
    }
    fs::read_to_string(path).map_err(io)
}

/// Reads a `<scenario>.jsonl` fixture.
pub fn read_lines(path: &Path) -> Result<Vec<Line>, FixtureError> {
    read_bounded(path)?
        .lines()
        .enumerate()
        .filter(|(_, text)| !text.trim().is_empty())
        .map(|(index, text)| {
            serde_json::from_str(text).map_err(|source| FixtureError::Format {
                path: path.to_owned(),
                line: index + 1,
                source,
            })
        })
        .collect()
}

/// Reads a `<scenario>.meta.json` file.
pub fn read_meta(path: &Path) -> Result<Meta, FixtureError> {
    serde_json::from_str(&read_bounded(path)?).map_err(|source| FixtureError::Format {
        path: path.to_owned(),
        line: 1,
        source,
    })
}

/// The metadata file that goes with fixture `path` (`x.jsonl` →
/// `x.meta.json`).
pub fn meta_path(fixture: &Path) -> PathBuf {
    fixture.with_extension("meta.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_through_json() {
        let line = Line::new(12, Stream::Stdout, r#"{"type":"x"}"#.into(), false);
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(text, r#"{"ms":12,"stdout":"{\"type\":\"x\"}"}"#);
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), line);
        let partial = Line::new(3, Stream::Stderr, "oops".into(), true);
        let text = serde_json::to_string(&partial).unwrap();
        assert_eq!(text, r#"{"ms":3,"stderr":"oops","partial":true}"#);
        assert_eq!(partial.output(), Some((Stream::Stderr, "oops")));
    }

    #[test]
    fn meta_path_sits_beside_the_fixture() {
        assert_eq!(
            meta_path(Path::new("a/text.jsonl")),
            Path::new("a/text.meta.json")
        );
    }
}
