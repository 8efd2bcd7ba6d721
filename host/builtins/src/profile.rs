//! What moat knows of each built-in adapter besides its component: facts
//! about the backend it drives that the host needs before the run starts,
//! kept here as data, one entry per built-in.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The host-side facts of one built-in adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The built-in's name, as `moat run NAME` takes it.
    pub name: &'static str,
    /// How long a run may take when the user sets no timeout: about the
    /// longest a task of its backend may reasonably run.
    pub default_timeout: Duration,
    /// Directories where the programs it runs keep their own
    /// configuration and state, relative to the user's home: under
    /// containment they may read and write these outside the run's grants
    /// (made when missing, as the program would on its first run).
    pub state_dirs: &'static [&'static str],
    /// Files of its state directly in the home directory: readable and
    /// writable when they exist.
    pub state_files: &'static [&'static str],
    /// Variables that, when set, name a state directory of the program
    /// elsewhere, each with the directory under the home it stands for
    /// (`CODEX_HOME` for `.codex`).
    pub state_vars: &'static [(&'static str, &'static str)],
    /// The secret grants (`NAME@HOST`) of the vendor key it uses: granted
    /// like its declared needs, and used when the secret is kept (`moat
    /// secret set NAME`), so the run holds a placeholder instead of the
    /// key; when it is not kept, the key's variable works as before.
    pub secrets: &'static [&'static str],
    /// Whether its backend keeps to a budget itself (Claude Code's
    /// `--max-budget-usd`): the run's budget is passed to it in its
    /// options, besides moat keeping it. Otherwise moat alone keeps it,
    /// and the adapter is not told.
    pub own_budget: bool,
    /// `Some` when its backend needs a model named (a model API has no
    /// default): a run without `model` is refused before it is recorded,
    /// suggesting these. The adapter refuses such a run too (its
    /// vendor's `model_examples`), for a host that does not ask first.
    pub model_examples: Option<&'static str>,
}

impl Profile {
    /// The state directories and files of its programs for a user whose
    /// home is `home`, with the variables `var` returns (the host's).
    pub fn state_paths(
        &self,
        home: &Path,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut dirs: Vec<PathBuf> = self.state_dirs.iter().map(|d| home.join(d)).collect();
        dirs.extend(self.moved_state(var).into_iter().map(|(dir, _)| dir));
        let files = self.state_files.iter().map(|f| home.join(f)).collect();
        (dirs, files)
    }

    /// The state directories its variables (as `var` returns them) move
    /// elsewhere: each place, with the directory under the home it stands
    /// for.
    pub fn moved_state(
        &self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Vec<(PathBuf, &'static str)> {
        self.state_vars
            .iter()
            .filter_map(|(name, stands_for)| Some((PathBuf::from(var(name)?), *stands_for)))
            .filter(|(dir, _)| dir.is_absolute())
            .collect()
    }
}

const MINUTE: Duration = Duration::from_secs(60);

/// Every built-in's profile.
const PROFILES: &[Profile] = &[
    Profile {
        name: "echo",
        default_timeout: MINUTE,
        state_dirs: &[],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &[],
        model_examples: None,
    },
    // Waits for its sub-agents, which may be coding agents at work.
    Profile {
        name: "fanout",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        state_dirs: &[],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &[],
        model_examples: None,
    },
    Profile {
        name: "openai",
        default_timeout: Duration::from_secs(10 * 60),
        state_dirs: &[],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &["OPENAI_API_KEY@api.openai.com:443"],
        model_examples: Some("gpt-4o-mini, or llama3.2 for Ollama"),
    },
    Profile {
        name: "anthropic",
        default_timeout: Duration::from_secs(10 * 60),
        state_dirs: &[],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &["ANTHROPIC_API_KEY@api.anthropic.com:443"],
        model_examples: Some("claude-sonnet-4-5"),
    },
    // The agent CLIs work on whole tasks: edits, builds, tests.
    Profile {
        name: "claude-code",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        state_dirs: &[".claude", ".config/claude"],
        state_files: &[".claude.json"],
        state_vars: &[("CLAUDE_CONFIG_DIR", ".claude")],
        own_budget: true,
        secrets: &["ANTHROPIC_API_KEY@api.anthropic.com:443"],
        model_examples: None,
    },
    Profile {
        name: "codex",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        state_dirs: &[".codex"],
        state_files: &[],
        state_vars: &[("CODEX_HOME", ".codex")],
        own_budget: false,
        secrets: &["OPENAI_API_KEY@api.openai.com:443"],
        model_examples: None,
    },
    Profile {
        name: "gemini",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        state_dirs: &[".gemini"],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &["GEMINI_API_KEY@generativelanguage.googleapis.com:443"],
        model_examples: None,
    },
    // Any ACP agent, so no state directory of its own: which agent runs
    // is the user's choice, and so is granting its state (`--allow-write`).
    Profile {
        name: "acp",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        state_dirs: &[],
        state_files: &[],
        state_vars: &[],
        own_budget: false,
        secrets: &[],
        model_examples: None,
    },
];

/// The profile of the built-in adapter `name`.
pub fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|profile| profile.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_built_in_has_a_profile_and_every_profile_a_built_in() {
        let mut profiled: Vec<&str> = super::PROFILES.iter().map(|p| p.name).collect();
        let mut built_in: Vec<&str> = crate::names().collect();
        profiled.sort_unstable();
        built_in.sort_unstable();
        assert_eq!(profiled, built_in);
        for profile in super::PROFILES {
            for path in profile.state_dirs.iter().chain(profile.state_files) {
                assert!(
                    !path.starts_with('/') && !path.contains(".."),
                    "{}: {path} must stay under the home directory",
                    profile.name
                );
            }
        }
    }
}
