//! What a request lacks or gets wrong that no bound decides: the
//! caller's to fix before anything starts (a usage error on the command
//! line, `INVALID_REQUEST` in the protocol), worded in the caller's words
//! ([`SettingNames`]) only when shown.

use std::fmt;
use std::path::{Path, PathBuf};

use moat_engine::{FieldNames, RunOptions, Setting, SettingNames};

use crate::resolve::Resolved;

/// Why a request cannot be run as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Its adapter needs a model named and none was.
    NeedsModel {
        /// The adapter's name.
        adapter: String,
        /// Models to suggest.
        examples: &'static str,
    },
    /// It asks for a workspace of a project it may not see: a workspace
    /// is a copy of the project, only for a run granted it.
    ProjectNotGranted {
        /// The project, canonical.
        project: PathBuf,
    },
}

impl Invalid {
    /// The problem in `names`' words, with what to do.
    pub fn message(&self, names: &dyn SettingNames) -> String {
        match self {
            Invalid::NeedsModel { adapter, examples } => format!(
                "the {adapter} adapter needs a model: pass {} (e.g. {examples})",
                names.setting(Setting::Model)
            ),
            Invalid::ProjectNotGranted { project } => {
                let dir = project.to_string_lossy();
                format!(
                    "a workspace is a copy of {dir}, which this run is not granted: add {} (or {} to only read it)",
                    names.assignment(Setting::AllowWrite, &dir),
                    names.assignment(Setting::AllowRead, &dir)
                )
            }
        }
    }

    /// A workspace of `project` asked by a run that may not see it.
    pub(crate) fn project_not_granted(project: &Path) -> Self {
        Invalid::ProjectNotGranted {
            project: project.to_path_buf(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&FieldNames))
    }
}

impl std::error::Error for Invalid {}

/// Refuses a run of `resolved` with `options` that its adapter could only
/// refuse once started: a built-in whose backend needs a model, given
/// none.
pub fn check_complete(resolved: &Resolved, options: &RunOptions) -> Result<(), Invalid> {
    let named = options
        .model
        .as_deref()
        .is_some_and(|m| !m.trim().is_empty());
    match resolved.profile.and_then(|profile| profile.model_examples) {
        Some(examples) if !named => Err(Invalid::NeedsModel {
            adapter: resolved.name().to_owned(),
            examples,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_is_named_in_the_callers_words() {
        let needs = Invalid::NeedsModel {
            adapter: "openai".into(),
            examples: "gpt-4o-mini",
        };
        assert_eq!(
            needs.message(&FieldNames),
            "the openai adapter needs a model: pass `options.model` (e.g. gpt-4o-mini)"
        );
        let project = Invalid::project_not_granted(Path::new("/tmp/repo"));
        assert_eq!(
            project.message(&FieldNames),
            "a workspace is a copy of /tmp/repo, which this run is not granted: add `grants.write` /tmp/repo (or `grants.read` /tmp/repo to only read it)"
        );
    }
}
