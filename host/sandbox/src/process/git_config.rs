//! The git configuration a contained program gets: the user's identity
//! (`user.name`, `user.email`), so that an agent's commits are the
//! user's as outside, and nothing else of their global git config
//! (credentials, URL rewrites carrying tokens, hooks paths, aliases that
//! run programs), which lies in the home directory the program may not
//! read. Without a global config of its own, git stops at the unreadable
//! `~/.gitconfig` ("unknown error occurred while reading the
//! configuration files").

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The variable that names git's global config file.
pub(crate) const VARIABLE: &str = "GIT_CONFIG_GLOBAL";

/// The file's name in the run's private directory.
const FILE: &str = ".gitconfig";

/// The run's git config in `private_dir`, written at its first program.
pub(crate) fn in_private_dir(private_dir: &Path) -> std::io::Result<PathBuf> {
    let path = private_dir.join(FILE);
    if !path.exists() {
        std::fs::write(&path, identity())?;
    }
    Ok(path)
}

/// The user's identity as a git config, read once per process (empty
/// where git or the identity is missing).
fn identity() -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let mut config = String::new();
        for key in ["name", "email"] {
            if let Some(value) = user_setting(key) {
                if config.is_empty() {
                    config.push_str("[user]\n");
                }
                config.push_str(&format!("\t{key} = {}\n", quoted(&value)));
            }
        }
        config
    })
}

/// `git config --global user.KEY`, when set.
fn user_setting(key: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["config", "--global", "--get", &format!("user.{key}")])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let value = String::from_utf8(output.stdout).ok()?;
    let value = value.trim_end_matches('\n');
    (output.status.success() && !value.is_empty() && !value.contains('\n'))
        .then(|| value.to_owned())
}

/// `value` as a git config value: quoted, `\` and `"` escaped.
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_quoted_as_git_reads_it() {
        assert_eq!(quoted(r#"A "B" \C"#), r#""A \"B\" \\C""#);
    }
}
