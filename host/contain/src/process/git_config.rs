//! The git configuration a contained program gets: the user's identity
//! (`user.name`, `user.email`, as the author and committer variables), so
//! that an agent's commits are the user's as outside, and nothing else of
//! their global git config (credentials, URL rewrites carrying tokens,
//! hooks paths, aliases that run programs), which lies in the home
//! directory the program may not read. Without `GIT_CONFIG_GLOBAL`, git
//! stops at the unreadable `~/.gitconfig` ("unknown error occurred while
//! reading the configuration files"). Variables rather than a file: the
//! run's private directory, its only place to write, starts empty.

use std::sync::OnceLock;

/// The variable that names git's global config file: none, here.
const GLOBAL: (&str, &str) = ("GIT_CONFIG_GLOBAL", "/dev/null");

/// The variables each identity setting goes to.
const IDENTITY: [(&str, [&str; 2]); 2] = [
    ("name", ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"]),
    ("email", ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"]),
];

/// Adds the variables to `env`, each unless the run sets it already.
pub(crate) fn add_to(env: &mut Vec<(String, String)>) {
    let has = |env: &Vec<(String, String)>, name: &str| env.iter().any(|(set, _)| set == name);
    if has(env, GLOBAL.0) {
        return;
    }
    env.push((GLOBAL.0.to_owned(), GLOBAL.1.to_owned()));
    for (name, value) in identity() {
        if !has(env, name) {
            env.push((name.clone(), value.clone()));
        }
    }
}

/// The user's identity as variables, read once per process (none where
/// git or the identity is missing).
fn identity() -> &'static [(String, String)] {
    static FOUND: OnceLock<Vec<(String, String)>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let mut variables = Vec::new();
        for (key, names) in IDENTITY {
            if let Some(value) = user_setting(key) {
                variables.extend(names.iter().map(|name| ((*name).to_owned(), value.clone())));
            }
        }
        variables
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
    (output.status.success() && !value.is_empty() && !value.contains(['\n', '\0']))
        .then(|| value.to_owned())
}
