//! What moat knows of each built-in adapter besides its component: facts
//! about the backend it drives that the host needs before the run starts,
//! kept here as data, one entry per built-in.

use std::time::Duration;

/// The host-side facts of one built-in adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The built-in's name, as `moat run NAME` takes it.
    pub name: &'static str,
    /// How long a run may take when the user sets no timeout: about the
    /// longest a task of its backend may reasonably run.
    pub default_timeout: Duration,
    /// Where the programs it runs keep their own configuration and state,
    /// relative to the user's home: under containment they may read and
    /// write these (and only these) outside the run's grants.
    pub program_state: &'static [&'static str],
}

const MINUTE: Duration = Duration::from_secs(60);

/// Every built-in's profile.
const PROFILES: &[Profile] = &[
    Profile {
        name: "echo",
        default_timeout: MINUTE,
        program_state: &[],
    },
    Profile {
        name: "openai",
        default_timeout: Duration::from_secs(10 * 60),
        program_state: &[],
    },
    Profile {
        name: "anthropic",
        default_timeout: Duration::from_secs(10 * 60),
        program_state: &[],
    },
    // The agent CLIs work on whole tasks: edits, builds, tests.
    Profile {
        name: "claude-code",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        program_state: &[".claude", ".claude.json", ".config/claude"],
    },
    Profile {
        name: "codex",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        program_state: &[".codex"],
    },
    Profile {
        name: "gemini",
        default_timeout: Duration::from_secs(2 * 60 * 60),
        program_state: &[".gemini"],
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
            for path in profile.program_state {
                assert!(
                    !path.starts_with('/') && !path.contains(".."),
                    "{}: {path} must stay under the home directory",
                    profile.name
                );
            }
        }
    }
}
