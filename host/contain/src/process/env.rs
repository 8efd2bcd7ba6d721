//! The environment of a run's children: a small fixed base, the variables
//! the run was granted (with the host's values), and values the adapter
//! sets for granted names only — never for a variable that would let it
//! choose code the program runs ([`moat_grants::spawn_env`]).

use std::path::PathBuf;

use moat_engine::{Denial, DeniedRequest, Grant};
use moat_grants::programs::safe_search_path;
use moat_grants::spawn_env::is_denied_to_adapters;

/// What every child gets, whatever the grants: `PATH`, the host's, without
/// relative entries (resolved against the child's own directory), without
/// directories the run may write (where the adapter could put a program of
/// its own for the child to run by name) and without `/`, the home
/// directory and its ancestors (a contained child may read and run what is
/// in its `PATH`'s directories: those would open all of the user's files).
const BASE: &[&str] = &["PATH"];

/// The environment a run's children are started with; the default, of a
/// run that may start none, is empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildEnv {
    /// The base and the granted variables, with the host's values.
    given: Vec<(String, String)>,
    /// The names the run was granted: the only ones an adapter may set.
    granted: Vec<String>,
}

impl ChildEnv {
    /// The environment of a run granted the variables named `names`, of
    /// which `values` are set on the host (read at the start of the run),
    /// and the directories `writable` (canonical).
    pub(crate) fn new(names: &[String], values: &[(String, String)], writable: &[PathBuf]) -> Self {
        let mut given = Vec::new();
        if let Some(path) = std::env::var_os("PATH") {
            let path = safe_search_path(&path, writable);
            let narrow = std::env::split_paths(&path).filter(|dir| {
                let broad = super::landlock::opens_too_much(dir);
                if broad {
                    tracing::debug!(dir = %dir.display(), "left out of the children's PATH: it holds the home directory");
                }
                !broad
            });
            let path = std::env::join_paths(narrow).unwrap_or_default();
            if let Some(path) = path.to_str() {
                given.push(("PATH".to_owned(), path.to_owned()));
            }
        }
        given.extend(
            values
                .iter()
                .filter(|(name, _)| !BASE.contains(&name.as_str()))
                .cloned(),
        );
        Self {
            given,
            granted: names.to_vec(),
        }
    }

    /// The directories of the children's `PATH` (the safe one).
    pub(crate) fn path_dirs(&self) -> Vec<PathBuf> {
        self.given
            .iter()
            .filter(|(name, _)| name == "PATH")
            .flat_map(|(_, value)| std::env::split_paths(value).collect::<Vec<_>>())
            .collect()
    }

    /// The variables for a child of `program` to which the adapter adds
    /// `set`: refused, naming the first variable it may not set.
    pub(crate) fn for_child(
        &self,
        program: &str,
        set: &[(String, String)],
    ) -> Result<Vec<(String, String)>, Denial> {
        let mut env = self.given.clone();
        for (name, value) in set {
            let refuse = |reason: &str, remedy| Denial {
                request: DeniedRequest::ProgramEnv {
                    program: program.to_owned(),
                    name: name.clone(),
                },
                reason: reason.to_owned(),
                remedy,
            };
            if is_denied_to_adapters(name) {
                return Err(refuse(
                    "an adapter may never set it: it would choose code the program runs, \
                     whose certificates it trusts, where its traffic goes or where it finds programs",
                    None,
                ));
            }
            if !self.granted.contains(name) {
                return Err(refuse(
                    "not granted",
                    Some(Grant::Env { name: name.clone() }),
                ));
            }
            env.retain(|(given, _)| given != name);
            env.push((name.clone(), value.clone()));
        }
        Ok(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_adapter_sets_granted_names_only_and_never_a_loader_or_interpreter_hook() {
        let names = [
            "HOME".to_owned(),
            "NODE_OPTIONS".to_owned(),
            "UNSET".to_owned(),
        ];
        let env = ChildEnv::new(
            &names,
            &vars(&[("HOME", "/home/u"), ("NODE_OPTIONS", "")]),
            &[],
        );
        // Granted but not set on the host: the adapter may still set it.
        assert!(env.for_child("sh", &vars(&[("UNSET", "1")])).is_ok());
        let child = env
            .for_child("claude", &vars(&[("HOME", "/tmp/h")]))
            .unwrap();
        assert!(child.contains(&("HOME".into(), "/tmp/h".into())));
        assert!(child.iter().any(|(name, _)| name == "PATH"));

        let denied = env
            .for_child("claude", &vars(&[("NODE_OPTIONS", "--require /tmp/x.js")]))
            .unwrap_err();
        assert_eq!(denied.remedy, None, "no grant lets an adapter set it");
        assert!(denied.to_string().contains("NODE_OPTIONS"), "{denied}");
        for name in ["LD_PRELOAD", "PATH", "BASH_ENV", "GIT_CONFIG_COUNT"] {
            assert!(
                env.for_child("sh", &vars(&[(name, "x")])).is_err(),
                "{name}"
            );
        }
        let not_granted = env.for_child("sh", &vars(&[("SECRET", "x")])).unwrap_err();
        assert_eq!(
            not_granted.remedy,
            Some(Grant::Env {
                name: "SECRET".into()
            })
        );
    }
}
