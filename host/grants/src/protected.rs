//! Files that run code later: the one list of what a run may not change
//! even inside its write grants, with why each is on it.
//!
//! A run that may write a project or its CLI's state could otherwise
//! leave a hook, a start-up file or a server command that the user's
//! next `git status`, shell or plain `claude` runs, unsandboxed, after
//! the run is over. Each entry is anchored at a project (every directory
//! a run may write, and its workspace), at the user's home, or at an
//! absolute place; [`ProtectedPaths::for_run`] turns the list into the
//! paths one run's write grants cover. How they are kept is the launch
//! layer's (`moat_launch::protected`): this module only says which.

use std::path::{Path, PathBuf};

/// Where an entry's path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// At the top of every directory a run may write (a project, a
    /// workspace).
    Project,
    /// At the user's home directory.
    Home,
    /// An absolute path.
    Root,
}

/// What is kept of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One file, kept as it was. A directory made where it was missing is
    /// left (`git init` makes `.git`, whose own entries are kept).
    File,
    /// A directory and everything under it.
    Dir,
    /// A JSON file that holds a program's state beside commands it runs
    /// (Claude Code's `~/.claude.json`): the state the run wrote stays;
    /// the members named here (dotted paths, `*` for any member) are put
    /// back as they were.
    JsonCommands(&'static [&'static str]),
}

/// One entry of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Where `path` starts.
    pub anchor: Anchor,
    /// The path, relative to the anchor (absolute for [`Anchor::Root`]).
    pub path: &'static str,
    /// What is kept of it.
    pub kind: Kind,
    /// Why it is on the list: what runs it, and when.
    pub why: &'static str,
}

const fn entry(anchor: Anchor, path: &'static str, kind: Kind, why: &'static str) -> Entry {
    Entry {
        anchor,
        path,
        kind,
        why,
    }
}

use Anchor::{Home, Project, Root};
use Kind::{Dir, File};

/// Claude Code's members of `~/.claude.json` that name programs it
/// starts: its MCP servers, the user's and each project's.
const CLAUDE_JSON_COMMANDS: &[&str] = &[
    "mcpServers",
    "projects.*.mcpServers",
    "projects.*.enabledMcpjsonServers",
    "hooks",
    "statusLine",
];

/// The list. One home: the docs (docs/security.md) and the tests name
/// these through it.
pub const LIST: &[Entry] = &[
    // A project's repository: run by the user's next git command there.
    entry(
        Project,
        ".git/hooks",
        Dir,
        "git hooks, run by the next git commit, checkout or merge",
    ),
    entry(
        Project,
        ".git/config",
        File,
        "git's configuration: core.fsmonitor, core.hooksPath, diff.external and filter drivers run programs at the next git status",
    ),
    entry(
        Project,
        ".git",
        File,
        "a worktree's link to its repository: pointed elsewhere, the next git command uses a repository the run made",
    ),
    entry(
        Project,
        ".git/info/attributes",
        File,
        "git attributes naming drivers, run by the next git diff or checkout",
    ),
    // A project's tools, run when it is opened or entered.
    entry(
        Project,
        ".envrc",
        File,
        "run by direnv when a shell enters the directory",
    ),
    entry(
        Project,
        ".vscode",
        Dir,
        "VS Code's tasks (run on folder open) and settings naming programs",
    ),
    entry(
        Project,
        ".devcontainer",
        Dir,
        "commands a dev container runs when it is built and started",
    ),
    entry(
        Project,
        ".claude/settings.json",
        File,
        "Claude Code's project hooks and status line, run by the next claude",
    ),
    entry(
        Project,
        ".claude/settings.local.json",
        File,
        "Claude Code's local project hooks, run by the next claude",
    ),
    entry(
        Project,
        ".mcp.json",
        File,
        "MCP server commands Claude Code starts in the project",
    ),
    entry(
        Project,
        ".codex/config.toml",
        File,
        "Codex's project configuration: MCP server commands and notify",
    ),
    entry(
        Project,
        ".gemini/settings.json",
        File,
        "Gemini CLI's project settings: MCP server commands and hooks",
    ),
    // The user's shell and login.
    entry(Home, ".bashrc", File, "run by every new bash"),
    entry(Home, ".bash_profile", File, "run by every login bash"),
    entry(Home, ".bash_login", File, "run by a login bash"),
    entry(Home, ".bash_logout", File, "run when a login bash exits"),
    entry(Home, ".profile", File, "run by every login shell"),
    entry(Home, ".zshrc", File, "run by every new zsh"),
    entry(Home, ".zshenv", File, "run by every zsh"),
    entry(Home, ".zprofile", File, "run by every login zsh"),
    entry(Home, ".zlogin", File, "run by every login zsh"),
    entry(
        Home,
        ".config/fish",
        Dir,
        "fish's configuration and functions, run by every new fish",
    ),
    entry(
        Home,
        ".ssh",
        Dir,
        "ssh's keys, authorized keys and config (ProxyCommand, LocalCommand)",
    ),
    entry(
        Home,
        ".gitconfig",
        File,
        "git's user configuration: hooks, fsmonitor, aliases and drivers for every repository",
    ),
    entry(
        Home,
        ".config/git",
        Dir,
        "git's user configuration and attributes for every repository",
    ),
    entry(
        Home,
        ".npmrc",
        File,
        "npm's configuration: the shell and scripts of every npm command",
    ),
    entry(
        Home,
        ".config/systemd/user",
        Dir,
        "services systemd starts for the user",
    ),
    entry(
        Home,
        ".config/autostart",
        Dir,
        "programs the desktop starts at login",
    ),
    entry(Home, ".local/bin", Dir, "programs on the user's PATH"),
    // The agent CLIs' own configuration: run by the next plain claude,
    // codex or gemini, outside moat. Their sessions, history and caches
    // beside these stay theirs to write.
    entry(
        Home,
        ".claude/settings.json",
        File,
        "Claude Code's hooks, status line and permissions",
    ),
    entry(
        Home,
        ".claude/settings.local.json",
        File,
        "Claude Code's local hooks and permissions",
    ),
    entry(
        Home,
        ".claude/hooks",
        Dir,
        "scripts Claude Code's hooks run",
    ),
    entry(
        Home,
        ".claude/plugins",
        Dir,
        "Claude Code's plugins: hooks, commands and MCP servers",
    ),
    entry(
        Home,
        ".claude.json",
        Kind::JsonCommands(CLAUDE_JSON_COMMANDS),
        "Claude Code's MCP server commands (its state beside them stays the run's to write)",
    ),
    entry(
        Home,
        ".codex/config.toml",
        File,
        "Codex's configuration: notify, MCP server commands",
    ),
    entry(
        Home,
        ".gemini/settings.json",
        File,
        "Gemini CLI's settings: MCP server commands, hooks",
    ),
    entry(
        Home,
        ".gemini/extensions",
        Dir,
        "Gemini CLI's extensions: MCP servers and commands",
    ),
    // The system's schedulers.
    entry(Root, "/var/spool/cron", Dir, "crontabs, run by cron"),
    entry(Root, "/etc/cron.d", Dir, "system crontabs, run by cron"),
];

/// One protected path of a run: absolute, inside one of its write grants
/// (or one of them inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedPath {
    /// The path.
    pub path: PathBuf,
    /// What is kept of it.
    pub kind: Kind,
    /// Why.
    pub why: &'static str,
}

/// The protected paths of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedPaths(pub Vec<ProtectedPath>);

/// What one run may write, as [`ProtectedPaths::for_run`] reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Writable<'a> {
    /// The run's write grants: the entries of a project's are anchored at
    /// each.
    pub projects: &'a [PathBuf],
    /// Everything the run or its programs may write: its write grants,
    /// and its CLI's state directories and files.
    pub paths: &'a [PathBuf],
    /// The user's home.
    pub home: Option<&'a Path>,
    /// Directories of the home kept elsewhere (`CODEX_HOME` for
    /// `.codex`): the home's entries under each are protected at its
    /// place too.
    pub moved: &'a [(PathBuf, &'a str)],
    /// The directories on the user's `PATH`: each one written is
    /// protected whole (a program put there runs by name).
    pub path_dirs: &'a [PathBuf],
    /// What the run may change all the same (`--allow-write-protected`):
    /// the paths equal to or inside one are left out.
    pub allowed: &'a [PathBuf],
}

impl ProtectedPaths {
    /// The paths of the list that `writable.paths` cover. A write grant
    /// inside a protected directory protects the grant itself.
    pub fn for_run(writable: &Writable<'_>) -> Self {
        let Writable {
            projects,
            paths: writable,
            home,
            moved,
            path_dirs,
            allowed,
        } = *writable;
        let mut found: Vec<ProtectedPath> = Vec::new();
        let mut add = |path: PathBuf, kind: Kind, why: &'static str| {
            // A write grant inside a protected directory: the grant is
            // what can be written of it.
            let paths: Vec<PathBuf> = match kind {
                Kind::Dir => writable
                    .iter()
                    .filter(|dir| dir.starts_with(&path) && **dir != path)
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            let covered = writable.iter().any(|dir| path.starts_with(dir));
            for path in paths.into_iter().chain(covered.then_some(path)) {
                let opted_in = allowed.iter().any(|allowed| path.starts_with(allowed));
                if !opted_in && !found.iter().any(|known| known.path == path) {
                    found.push(ProtectedPath { path, kind, why });
                }
            }
        };
        // The home's and the system's first: a path both name (a home
        // granted as a project) is said with their reason.
        let (projects_last, others): (Vec<&Entry>, Vec<&Entry>) = LIST
            .iter()
            .partition(|entry| entry.anchor == Anchor::Project);
        for entry in others.into_iter().chain(projects_last) {
            match entry.anchor {
                Anchor::Project => {
                    for project in projects {
                        add(project.join(entry.path), entry.kind, entry.why);
                    }
                }
                Anchor::Home => {
                    if let Some(home) = home {
                        add(home.join(entry.path), entry.kind, entry.why);
                    }
                    for (place, stands_for) in moved {
                        let inside = Path::new(entry.path).strip_prefix(stands_for);
                        if let Ok(rest) = inside.map(Path::to_path_buf) {
                            add(place.join(rest), entry.kind, entry.why);
                        }
                    }
                }
                Anchor::Root => add(PathBuf::from(entry.path), entry.kind, entry.why),
            }
        }
        for dir in path_dirs.iter().filter(|dir| dir.is_absolute()) {
            add(dir.clone(), Kind::Dir, "a directory on the user's PATH");
        }
        Self(found)
    }

    /// Whether the run has nothing to keep.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every protected path.
    pub fn iter(&self) -> impl Iterator<Item = &ProtectedPath> {
        self.0.iter()
    }
}

/// Why `path` (relative to a project's top, `/`-separated) is protected
/// in a project, when it is: the entry anchored at a project that is it
/// or holds it. Used on a workspace's changes, where the project is the
/// patch's root.
pub fn in_project(path: &str) -> Option<&'static Entry> {
    LIST.iter()
        .filter(|e| e.anchor == Anchor::Project)
        .find(|e| {
            path == e.path
                || e.kind == Kind::Dir
                    && path
                        .strip_prefix(e.path)
                        .is_some_and(|rest| rest.starts_with('/'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn every_entry_stays_where_it_is_anchored() {
        for entry in LIST {
            let absolute = entry.path.starts_with('/');
            assert_eq!(absolute, entry.anchor == Anchor::Root, "{}", entry.path);
            assert!(!entry.path.contains(".."), "{}", entry.path);
            assert!(!entry.why.is_empty(), "{}", entry.path);
        }
    }

    #[test]
    fn docs_security_names_every_entry() {
        let docs = include_str!("../../../docs/security.md");
        for entry in LIST {
            let shown = match entry.anchor {
                Anchor::Home => format!("~/{}", entry.path),
                _ => entry.path.to_owned(),
            };
            assert!(
                docs.contains(&format!("| `{shown}` |")) && docs.contains(entry.why),
                "docs/security.md does not name {shown} ({})",
                entry.why
            );
        }
    }

    #[test]
    fn a_project_grant_protects_its_hooks_and_tools_and_not_its_sources() {
        let grants = paths(&["/p"]);
        let run = ProtectedPaths::for_run(&Writable {
            projects: &grants,
            paths: &grants,
            home: Some(Path::new("/h")),
            ..Writable::default()
        });
        let found: Vec<&Path> = run.iter().map(|p| p.path.as_path()).collect();
        for path in [
            "/p/.git/hooks",
            "/p/.git/config",
            "/p/.envrc",
            "/p/.mcp.json",
        ] {
            assert!(found.contains(&Path::new(path)), "{path}: {found:?}");
        }
        assert!(!found.iter().any(|p| p.starts_with("/h")), "{found:?}");
        assert!(in_project("src/main.rs").is_none());
        assert!(in_project(".git/hooks/pre-commit").is_some());
        assert!(in_project(".git/config").is_some());
        assert!(in_project(".vscode/tasks.json").is_some());
        assert!(in_project(".claude/settings.json").is_some());
        assert!(in_project(".claude/notes.md").is_none());
        assert!(in_project(".envrc.example").is_none());
    }

    #[test]
    fn home_state_grants_protect_the_clis_commands_and_opted_in_paths_are_left() {
        let home = Path::new("/h");
        let grants = paths(&["/h/.claude", "/h/.codex", "/p"]);
        let run = ProtectedPaths::for_run(&Writable {
            projects: &grants,
            paths: &grants,
            home: Some(home),
            path_dirs: &paths(&["/p/bin", "/usr/bin"]),
            allowed: &paths(&["/p/.envrc"]),
            ..Writable::default()
        });
        let found: Vec<&Path> = run.iter().map(|p| p.path.as_path()).collect();
        for path in [
            "/h/.claude/settings.json",
            "/h/.claude/hooks",
            "/h/.codex/config.toml",
            "/p/bin",
        ] {
            assert!(found.contains(&Path::new(path)), "{path}: {found:?}");
        }
        assert!(!found.contains(&Path::new("/p/.envrc")));
        assert!(!found.contains(&Path::new("/usr/bin")));
        assert!(!found.contains(&Path::new("/h/.bashrc")));
    }

    #[test]
    fn a_home_directory_kept_elsewhere_is_protected_there() {
        let moved = [(PathBuf::from("/x/codex-home"), ".codex")];
        let run = ProtectedPaths::for_run(&Writable {
            paths: &paths(&["/x/codex-home"]),
            home: Some(Path::new("/h")),
            moved: &moved,
            ..Writable::default()
        });
        assert!(
            run.iter()
                .any(|p| p.path == Path::new("/x/codex-home/config.toml")),
            "{run:?}"
        );
    }

    #[test]
    fn a_grant_inside_a_protected_directory_is_protected_itself() {
        let grants = paths(&["/h/.ssh/keys"]);
        let writable = Writable {
            projects: &grants,
            paths: &grants,
            home: Some(Path::new("/h")),
            ..Writable::default()
        };
        let run = ProtectedPaths::for_run(&writable);
        assert!(
            run.iter().any(|p| p.path == Path::new("/h/.ssh/keys")),
            "{run:?}"
        );
        let allowed = ProtectedPaths::for_run(&Writable {
            allowed: &paths(&["/h/.ssh"]),
            ..writable
        });
        assert!(
            !allowed.iter().any(|p| p.path.starts_with("/h/.ssh")),
            "{allowed:?}"
        );
    }
}
