//! What is wrong with a workflow file: every problem found, each at its
//! place in the file.

use std::path::{Path, PathBuf};

use super::location::Location;

/// A workflow file that cannot run: every problem found, each with its
/// place in the file.
#[derive(Debug, thiserror::Error)]
#[error("{}", render(file, problems))]
pub struct DefinitionError {
    /// The file.
    pub file: PathBuf,
    /// What is wrong, in file order as far as known.
    pub problems: Vec<Problem>,
}

/// One thing wrong with a workflow file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, when known.
    pub location: Option<Location>,
    /// What, and what to do about it.
    pub message: String,
}

fn render(file: &Path, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|problem| match &problem.location {
            Some(location) => format!("{}:{location}: {}", file.display(), problem.message),
            None => format!("{}: {}", file.display(), problem.message),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
