//! Where moat keeps its files on this machine: the run store, the
//! secrets, the workspaces — each under one state directory unless a
//! variable names its own place.

use std::path::PathBuf;

/// A file of moat's state: the path in the variable `override_var` when
/// set, else `file` in moat's state directory (`$XDG_STATE_HOME/moat`, else
/// `~/.local/state/moat`); `None` with neither `XDG_STATE_HOME` nor `HOME`.
pub fn state_file(override_var: &str, file: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Some(PathBuf::from(path));
    }
    Some(state_dir()?.join(file))
}

/// moat's state directory: `$XDG_STATE_HOME/moat`, else
/// `~/.local/state/moat`.
pub fn state_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("XDG_STATE_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(dir.join("moat"))
}
