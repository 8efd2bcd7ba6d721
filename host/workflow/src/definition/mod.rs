//! A workflow as defined in its file, checked before anything runs: the
//! file's shape ([`file`]), then its meaning (`check`) — ids,
//! dependencies, cycles, inputs, paths, templates, grants, loops and
//! hooks — every problem reported with its place in the file
//! ([`Location`]). What a checked [`Workflow`] is made of is plain data
//! of its own (`crate::model`), named here.

mod check;
mod error;
mod file;
mod location;

use std::path::Path;

use sha2::{Digest, Sha256};

pub use crate::model::{
    Command, CommandSandbox, DEFAULT_BACKOFF, DEFAULT_CONTEXT_BUDGET, DEFAULT_HOOK_TIMEOUT,
    HookCommand, Loop, MAX_ITERATIONS, MAX_RETRIES, OnMax, Task, Until, Workflow,
};
pub use error::{DefinitionError, Problem};
pub use location::Location;

/// Reads and checks the workflow file at `path`: JSON when its name ends in
/// `.json`, else TOML.
pub fn load(path: &Path) -> Result<Workflow, DefinitionError> {
    let fail = |message: String| DefinitionError {
        file: path.to_path_buf(),
        problems: vec![Problem {
            location: None,
            message,
        }],
    };
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let text = String::from_utf8(bytes.clone()).map_err(|_| fail("it is not UTF-8 text".into()))?;
    let absolute =
        std::path::absolute(path).map_err(|e| fail(format!("cannot resolve it: {e}")))?;
    let project = absolute
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| fail("it has no directory".into()))?;
    let project = project
        .canonicalize()
        .map_err(|e| fail(format!("cannot resolve its directory: {e}")))?;
    let is_json = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hash = format!("{:x}", Sha256::digest(&bytes));
    let source = check::Source {
        file: path,
        project: &project,
        stem: &stem,
        hash,
    };
    check::check(&text, is_json, source)
}
