//! `fs/read_text_file` and `fs/write_text_file`, served by the adapter
//! with the component's own file access.
//!
//! The component's directories are exactly the run's grants (WASI
//! preopens: `--allow-read` ones read-only, `--allow-write` ones
//! writable, no escape by `..` or symlink), so the agent reads and writes
//! through moat only what the run may. A refusal is answered with a
//! JSON-RPC error whose message says which grant is missing.

use std::io::ErrorKind;
use std::path::Path;

use moat_guest::json::{Value, json};

use crate::rpc::{INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError};

/// The largest file read for the agent: the content goes into one JSON
/// line through the component's memory.
pub const MAX_READ_BYTES: u64 = 8 * 1024 * 1024;

/// What a file request did, for the run's consumer (`acp:fs` event).
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// `read` or `write`.
    pub op: &'static str,
    /// The path the agent named.
    pub path: String,
    /// Why it was refused, when it was.
    pub error: Option<String>,
}

impl Access {
    /// The `acp:fs` event payload.
    pub fn payload(&self) -> Value {
        match &self.error {
            None => json!({"op": self.op, "path": self.path, "ok": true}),
            Some(error) => json!({"op": self.op, "path": self.path, "ok": false, "error": error}),
        }
    }
}

/// Answers `fs/read_text_file` (`path`, optional 1-based `line` and
/// `limit` in lines).
pub fn read(params: &Value) -> (Result<Value, RpcError>, Access) {
    let path = match absolute_path(params) {
        Ok(path) => path,
        Err(error) => return (Err(error), unknown_access("read")),
    };
    let outcome = read_text(&path, params).map(|content| json!({"content": content}));
    let access = access("read", &path, &outcome);
    (outcome, access)
}

/// Answers `fs/write_text_file` (`path`, `content`): creates the file (and
/// its missing directories) or replaces it.
pub fn write(params: &Value) -> (Result<Value, RpcError>, Access) {
    let path = match absolute_path(params) {
        Ok(path) => path,
        Err(error) => return (Err(error), unknown_access("write")),
    };
    let outcome = match params["content"].as_str() {
        None => Err(RpcError::invalid_params(
            "fs/write_text_file needs a content string",
        )),
        // ACP's WriteTextFileResponse is an object (empty).
        Some(content) => write_text(&path, content).map(|()| json!({})),
    };
    let access = access("write", &path, &outcome);
    (outcome, access)
}

fn unknown_access(op: &'static str) -> Access {
    Access {
        op,
        path: String::new(),
        error: Some("invalid parameters".into()),
    }
}

fn access(op: &'static str, path: &str, outcome: &Result<Value, RpcError>) -> Access {
    Access {
        op,
        path: path.to_owned(),
        error: outcome.as_ref().err().map(|error| error.message.clone()),
    }
}

/// The request's `path`: ACP requires an absolute one.
fn absolute_path(params: &Value) -> Result<String, RpcError> {
    match params["path"].as_str() {
        Some(path) if path.starts_with('/') && !path.contains('\0') && path.len() <= 4096 => {
            Ok(path.to_owned())
        }
        _ => Err(RpcError::invalid_params(
            "the path must be an absolute path (ACP file requests take absolute paths)",
        )),
    }
}

fn read_text(path: &str, params: &Value) -> Result<String, RpcError> {
    let line = optional_count(params, "line")?;
    let limit = optional_count(params, "limit")?;
    // Read through a bound, not after a size check: the file may grow in
    // between.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| {
            std::io::Read::read_to_end(
                &mut std::io::Read::take(file, MAX_READ_BYTES + 1),
                &mut bytes,
            )
        })
        .map_err(|error| refusal("read", path, &error))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(RpcError::new(
            INTERNAL_ERROR,
            format!("{path} is larger than the {MAX_READ_BYTES} bytes moat reads for the agent"),
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| RpcError::new(INTERNAL_ERROR, format!("{path} is not a UTF-8 text file")))?;
    if line.is_none() && limit.is_none() {
        return Ok(text);
    }
    let skip = line.map_or(0, |line| line.saturating_sub(1));
    let take = limit.unwrap_or(usize::MAX);
    Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
}

/// A positive count parameter (`line`, `limit`), when given.
fn optional_count(params: &Value, name: &str) -> Result<Option<usize>, RpcError> {
    match &params[name] {
        Value::Null => Ok(None),
        value => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| RpcError::invalid_params(format!("{name} must be a positive integer"))),
    }
}

fn write_text(path: &str, content: &str) -> Result<(), RpcError> {
    if let Some(parent) = Path::new(path).parent()
        && !parent.exists()
    {
        std::fs::create_dir_all(parent).map_err(|error| refusal("write", path, &error))?;
    }
    std::fs::write(path, content).map_err(|error| refusal("write", path, &error))
}

/// Why `op` on `path` failed, in terms of the run's grants. The error
/// codes WASI gives differ by case and by libc; what the component can
/// reach tells the cases apart instead: a path under no directory it can
/// see is outside the grants, a write under one it can see but not write
/// is under a read-only grant.
fn refusal(op: &str, path: &str, error: &std::io::Error) -> RpcError {
    let reachable = reachable_ancestor(path);
    let message = match (op, reachable, error.kind()) {
        (_, None, _) => format!(
            "moat refused to {op} {path}: it is outside the directories granted to the run \
             (--allow-read, --allow-write)"
        ),
        ("read", Some(_), ErrorKind::NotFound) => {
            // The words of the ACP SDKs' own RequestError.resourceNotFound.
            return RpcError::new(
                RESOURCE_NOT_FOUND,
                format!("Resource not found: {path} does not exist"),
            );
        }
        ("write", Some(dir), ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) => {
            format!(
                "moat refused to write {path}: the run may only read {dir} (grant it with --allow-write)"
            )
        }
        (_, Some(_), _) => format!("could not {op} {path}: {error}"),
    };
    RpcError::new(INTERNAL_ERROR, message)
}

/// The nearest ancestor of `path` (itself included) the component can see.
fn reachable_ancestor(path: &str) -> Option<String> {
    Path::new(path)
        .ancestors()
        .find(|dir| std::fs::metadata(dir).is_ok())
        .map(|dir| dir.display().to_string())
        // Natively every path has `/` above it; in the sandbox `/` is
        // reachable only when granted, which moat refuses.
        .filter(|dir| dir != "/" || cfg!(not(target_arch = "wasm32")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_then_read_whole_or_by_lines() {
        let dir = std::env::temp_dir().join(format!("moat-acp-files-{}", std::process::id()));
        let path = dir.join("sub/notes.txt").display().to_string();
        let (outcome, access) = write(&json!({"path": path, "content": "one\ntwo\nthree\n"}));
        assert_eq!(outcome, Ok(json!({})));
        assert_eq!(access.error, None);
        let (whole, _) = read(&json!({"path": path}));
        assert_eq!(whole.unwrap()["content"], "one\ntwo\nthree\n");
        let (lines, _) = read(&json!({"path": path, "line": 2, "limit": 1}));
        assert_eq!(lines.unwrap()["content"], "two\n");
        let (missing, _) = read(&json!({"path": dir.join("nope").display().to_string()}));
        assert_eq!(missing.unwrap_err().code, RESOURCE_NOT_FOUND);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn relative_paths_and_missing_content_are_invalid_params() {
        let (relative, access) = read(&json!({"path": "notes.txt"}));
        assert_eq!(relative.unwrap_err().code, crate::rpc::INVALID_PARAMS);
        assert!(access.error.is_some());
        let (no_content, _) = write(&json!({"path": "/tmp/x"}));
        assert_eq!(no_content.unwrap_err().code, crate::rpc::INVALID_PARAMS);
    }
}
