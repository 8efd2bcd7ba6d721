//! How the grants of a run are decided: declared needs, the trust preset,
//! the policy file and the flags, merged as a union (docs/security.md).
//!
//! | source | gives |
//! |---|---|
//! | declared needs | a built-in adapter: exactly what its `info()` declares; a loaded component: nothing, unless `--grant-declared` (or `grant-declared` in the policy) or trust `unrestricted` |
//! | trust `sandbox` | nothing |
//! | trust `controlled` | read and write of `--cwd` and every `--add-dir`, when given |
//! | trust `unrestricted` | read and write of `--cwd` and every `--add-dir`, when given, and the declared needs |
//! | policy | the file's top-level grants and its `[adapters.NAME]` entry |
//! | flags | `--allow-net`, `--allow-read`, `--allow-write`, `--allow-env`, `--allow-run` |
//!
//! Every source only adds; nothing narrows another. A grant wider than the
//! declaration therefore comes only from the user's own flags or policy.

use std::path::PathBuf;

use super::{GrantError, Grants, Needs, TrustLevel};

/// Where an adapter came from, which decides whether it receives its
/// declared needs by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Provenance {
    /// Embedded in moat and reviewed with it: receives exactly what it
    /// declares.
    BuiltIn,
    /// Loaded from a path: untrusted, receives nothing until granted.
    #[default]
    Loaded,
}

/// Everything that decides one run's grants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrantSources {
    /// Where the adapter came from.
    pub provenance: Provenance,
    /// The run's trust level.
    pub trust: TrustLevel,
    /// The run's working directory (`--cwd`), already canonical (see
    /// [`canonical_dir`](super::canonical_dir)).
    pub cwd: Option<PathBuf>,
    /// The directories the backend may use besides it (`--add-dir`),
    /// canonical too: the trust preset treats them as it treats `cwd`.
    pub directories: Vec<PathBuf>,
    /// Grant a loaded component what it declares.
    pub grant_declared: bool,
    /// What the policy file grants this adapter.
    pub policy: Grants,
    /// What the command line grants (`--allow-*`).
    pub flags: Grants,
}

impl GrantSources {
    /// Whether the adapter receives what it declares.
    pub fn grants_declared_needs(&self) -> bool {
        self.provenance == Provenance::BuiltIn
            || self.grant_declared
            || self.trust == TrustLevel::Unrestricted
    }

    /// What the trust level gives on its own.
    pub fn trust_preset(&self) -> Grants {
        match self.trust {
            TrustLevel::Controlled | TrustLevel::Unrestricted => {
                let dirs: Vec<PathBuf> =
                    self.cwd.iter().chain(&self.directories).cloned().collect();
                Grants {
                    read: dirs.clone(),
                    write: dirs,
                    ..Grants::none()
                }
            }
            TrustLevel::Sandbox => Grants::none(),
        }
    }

    /// The run's grants: the union of every source, in the order of the
    /// table above. Fails only when declared needs do not parse as grants
    /// (components are checked when loaded; native adapters are not).
    ///
    /// Declared needs never grant a variable an adapter may not set for a
    /// program ([`spawn_env`](crate::spawn_env)): only the user's own
    /// policy or flags, naming it, do.
    pub fn effective(&self, needs: &Needs) -> Result<Grants, GrantError> {
        let mut grants = if self.grants_declared_needs() {
            Grants::from_needs(needs)?
        } else {
            Grants::none()
        };
        grants
            .env
            .retain(|name| !crate::spawn_env::is_denied_to_adapters(name));
        grants.merge(&self.trust_preset());
        grants.merge(&self.policy);
        grants.merge(&self.flags);
        Ok(grants)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetRule;

    fn needs() -> Needs {
        Needs {
            hosts: vec!["api.example.com".into()],
            env: vec!["EXAMPLE_KEY".into()],
            programs: vec!["example".into()],
        }
    }

    fn sources(provenance: Provenance, trust: TrustLevel) -> GrantSources {
        GrantSources {
            provenance,
            trust,
            cwd: Some("/work".into()),
            ..GrantSources::default()
        }
    }

    #[test]
    fn a_built_in_gets_exactly_its_declared_needs_by_default() {
        let grants = sources(Provenance::BuiltIn, TrustLevel::Sandbox)
            .effective(&needs())
            .unwrap();
        assert_eq!(grants, Grants::from_needs(&needs()).unwrap());
    }

    #[test]
    fn a_loaded_component_gets_nothing_until_granted() {
        let loaded = sources(Provenance::Loaded, TrustLevel::Sandbox);
        assert!(loaded.effective(&needs()).unwrap().is_empty());
        let declared = GrantSources {
            grant_declared: true,
            ..loaded
        };
        assert_eq!(
            declared.effective(&needs()).unwrap(),
            Grants::from_needs(&needs()).unwrap()
        );
    }

    #[test]
    fn trust_presets_follow_the_table() {
        let cwd = vec![PathBuf::from("/work")];
        let controlled = sources(Provenance::Loaded, TrustLevel::Controlled)
            .effective(&needs())
            .unwrap();
        assert_eq!((&controlled.read, &controlled.write), (&cwd, &cwd));
        assert!(controlled.env.is_empty() && controlled.net.is_empty());

        let unrestricted = sources(Provenance::Loaded, TrustLevel::Unrestricted)
            .effective(&needs())
            .unwrap();
        assert_eq!(unrestricted.write, cwd);
        assert_eq!(unrestricted.env, ["EXAMPLE_KEY"]);

        let no_cwd = GrantSources {
            cwd: None,
            ..sources(Provenance::Loaded, TrustLevel::Controlled)
        };
        assert!(no_cwd.effective(&needs()).unwrap().is_empty());
    }

    #[test]
    fn policy_and_flags_add_to_the_declaration() {
        let grants = GrantSources {
            policy: Grants {
                env: vec!["FROM_POLICY".into()],
                ..Grants::none()
            },
            flags: Grants {
                net: vec![NetRule::parse("other.example").unwrap()],
                env: vec!["EXAMPLE_KEY".into()],
                ..Grants::none()
            },
            ..sources(Provenance::BuiltIn, TrustLevel::Sandbox)
        }
        .effective(&needs())
        .unwrap();
        assert_eq!(grants.env, ["EXAMPLE_KEY", "FROM_POLICY"]);
        let hosts: Vec<String> = grants.net.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["api.example.com", "other.example"]);
    }
}
