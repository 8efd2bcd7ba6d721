//! What a run may reach (docs/security.md): deny by default,
//! grant exactly.
//!
//! Plain data, shared by the layers: the CLI (or an embedding application)
//! decides a run's [`Grants`] from flags, a policy file, the trust
//! preset and the adapter's declared needs ([`GrantSources`]); the engine
//! carries them, untouched, in the run's scope; the sandbox turns them into
//! the run's WASI context. This crate depends on no other moat crate and
//! knows nothing of wasmtime or of the command line.
//!
//! - [`net`]: network rules (`host`, `host:port`, `*.example.com`,
//!   `scheme://host:port`).
//! - [`address`]: which resolved addresses a granted request may reach.
//! - [`names`]: environment variable and program names.
//! - [`dirs`]: directories, canonicalized when granted.
//! - [`programs`]: programs, found on `PATH` when a run starts.
//! - [`sources`]: how the grants of a run are decided.
//! - [`needs`]: what an adapter declares it needs.
//! - [`spawn_env`]: the variables an adapter may never set for a program.
//! - [`trust`]: trust levels, which preset grants.
//! - [`Confinement`]: how the programs a run starts are contained.
//! - [`narrow`]: grants may only narrow: what a request asks beyond a
//!   ceiling ([`Excess`]), and what two grant sets both allow.

pub mod address;
mod confinement;
pub mod dirs;
mod error;
pub mod meter;
pub mod names;
pub mod narrow;
pub mod needs;
pub mod net;
pub mod programs;
pub mod protected;
pub mod secret;
pub mod sources;
pub mod spawn_env;
pub mod trust;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use confinement::Confinement;
pub use dirs::{OpenDir, OpenDirs, canonical_dir, canonical_path, canonical_socket};
pub use error::GrantError;
pub use meter::{MeterRule, Meters};
pub use narrow::Excess;
pub use needs::Needs;
pub use net::{HostPattern, NetRule, Scheme};
pub use protected::{ProtectedPath, ProtectedPaths, Writable};
pub use secret::{SecretGrant, VENDOR_KEYS, VendorKey, vendor_key};
pub use sources::{GrantSources, Provenance};
pub use trust::TrustLevel;

/// The capabilities of one run. Empty by default: everything not listed is
/// refused.
///
/// Build the directory lists with [`canonical_dir`] (the helpers of
/// [`GrantSources`] and a policy file do): the sandbox requires absolute
/// paths, opens each once when the run starts, and shows it to the guest
/// under that same path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Grants {
    /// Network destinations: outgoing HTTP(S) through `wasi:http` to a
    /// matching scheme, host and port, with the resolved address checked
    /// ([`address`]). Raw sockets are never granted.
    pub net: Vec<NetRule>,
    /// Directories the run may read, with everything under them.
    pub read: Vec<PathBuf>,
    /// Directories the run may read and write, with everything under them.
    pub write: Vec<PathBuf>,
    /// Environment variables the run sees, with the host's values; a name
    /// unset on the host is simply absent.
    pub env: Vec<String>,
    /// Programs the process capability may spawn: bare names, found on the
    /// host's `PATH` when the run starts ([`programs`]), or absolute paths.
    pub run: Vec<String>,
    /// Secrets moat adds to the run's requests to a destination, the run
    /// never holding them ([`secret`]).
    pub secrets: Vec<SecretGrant>,
    /// Unix sockets outside the run's write grants its programs may
    /// connect to (a database's, a container runtime's): absolute paths,
    /// each a socket itself ([`canonical_socket`]). Spelled as the
    /// protocol's request spells it.
    #[serde(rename = "unixSocket")]
    pub unix_sockets: Vec<PathBuf>,
    /// Paths of the list of files that run code later ([`protected`])
    /// the run may change all the same: absolute ([`canonical_path`]).
    #[serde(rename = "writeProtected")]
    pub write_protected: Vec<PathBuf>,
    /// Destinations whose answers are read as a model API's
    /// ([`meter`]): they only add reading, never a destination.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub meter: Vec<MeterRule>,
    /// Under a budget in tokens or dollars, it may still make model calls
    /// moat cannot read (a tunnel to a model API's host, TLS end to end).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unmetered: bool,
}

/// One directory as the sandbox preopens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The directory on the host (absolute).
    pub host: PathBuf,
    /// Its path inside the guest: the same absolute path, so an adapter
    /// uses the paths the user typed, resolved.
    pub guest: String,
    /// Read-write (`--allow-write`) or read-only (`--allow-read`).
    pub writable: bool,
}

impl Grants {
    /// Nothing at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether nothing is granted (a meter rule grants nothing).
    pub fn is_empty(&self) -> bool {
        self.net.is_empty()
            && self.read.is_empty()
            && self.write.is_empty()
            && self.env.is_empty()
            && self.run.is_empty()
            && self.secrets.is_empty()
            && self.unix_sockets.is_empty()
            && self.write_protected.is_empty()
            && !self.unmetered
    }

    /// Adds everything `other` grants (a union; order kept, duplicates
    /// dropped).
    pub fn merge(&mut self, other: &Grants) {
        fn union<T: PartialEq + Clone>(into: &mut Vec<T>, from: &[T]) {
            for item in from {
                if !into.contains(item) {
                    into.push(item.clone());
                }
            }
        }
        union(&mut self.net, &other.net);
        union(&mut self.read, &other.read);
        union(&mut self.write, &other.write);
        union(&mut self.env, &other.env);
        union(&mut self.run, &other.run);
        union(&mut self.secrets, &other.secrets);
        union(&mut self.unix_sockets, &other.unix_sockets);
        union(&mut self.write_protected, &other.write_protected);
        union(&mut self.meter, &other.meter);
        self.unmetered |= other.unmetered;
    }

    /// Exactly what an adapter declares it needs: its hosts, environment
    /// names and programs (no directories: an adapter cannot declare those).
    pub fn from_needs(needs: &Needs) -> Result<Self, GrantError> {
        Ok(Self {
            net: needs
                .hosts
                .iter()
                .map(|host| NetRule::parse(host))
                .collect::<Result<_, _>>()?,
            env: needs
                .env
                .iter()
                .map(|name| names::env_name(name))
                .collect::<Result<_, _>>()?,
            run: needs
                .programs
                .iter()
                .map(|program| names::program(program))
                .collect::<Result<_, _>>()?,
            ..Self::default()
        })
    }

    /// The directories to preopen, each once: a directory granted for both
    /// reading and writing is writable.
    pub fn preopens(&self) -> Vec<Preopen> {
        let mut preopens: Vec<Preopen> = Vec::new();
        let all = self.read.iter().chain(&self.write);
        for dir in all {
            if preopens.iter().any(|p| p.host == *dir) {
                continue;
            }
            preopens.push(Preopen {
                host: dir.clone(),
                guest: dir.to_string_lossy().into_owned(),
                writable: self.write.contains(dir),
            });
        }
        preopens
    }

    /// Checks what a caller could have put in the public fields by hand:
    /// absolute UTF-8 directories, valid names. The sandbox refuses a run
    /// whose grants fail this.
    pub fn validate(&self) -> Result<(), GrantError> {
        for dir in self.read.iter().chain(&self.write) {
            check_absolute(dir)?;
        }
        for path in self.unix_sockets.iter().chain(&self.write_protected) {
            check_absolute(path)?;
        }
        for name in &self.env {
            names::env_name(name)?;
        }
        for program in &self.run {
            names::program(program)?;
        }
        Ok(())
    }
}

fn check_absolute(dir: &Path) -> Result<(), GrantError> {
    let refuse = |reason: &str| GrantError::Dir {
        path: dir.to_path_buf(),
        reason: reason.into(),
    };
    if !dir.is_absolute() {
        return Err(refuse(
            "a granted directory must be an absolute path (see grants::canonical_dir)",
        ));
    }
    if dir
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(refuse(
            "a granted directory must be resolved, without `..` (see grants::canonical_dir)",
        ));
    }
    if dir.to_str().is_none() {
        return Err(refuse("the path is not valid UTF-8"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn merging_is_a_union_in_order_without_duplicates() {
        let mut grants = Grants {
            env: vec!["A".into(), "B".into()],
            read: paths(&["/a"]),
            ..Grants::none()
        };
        grants.merge(&Grants {
            env: vec!["B".into(), "C".into()],
            read: paths(&["/a", "/b"]),
            net: vec![NetRule::parse("x.example").unwrap()],
            ..Grants::none()
        });
        assert_eq!(grants.env, ["A", "B", "C"]);
        assert_eq!(grants.read, paths(&["/a", "/b"]));
        assert_eq!(grants.net.len(), 1);
        assert!(!grants.is_empty());
        assert!(Grants::none().is_empty());
    }

    #[test]
    fn a_directory_granted_twice_is_preopened_once_writable_if_either_says_so() {
        let grants = Grants {
            read: paths(&["/data", "/both"]),
            write: paths(&["/both", "/out"]),
            ..Grants::none()
        };
        let preopens: Vec<(String, bool)> = grants
            .preopens()
            .into_iter()
            .map(|p| (p.guest, p.writable))
            .collect();
        assert_eq!(
            preopens,
            [
                ("/data".to_string(), false),
                ("/both".to_string(), true),
                ("/out".to_string(), true)
            ]
        );
    }

    #[test]
    fn declared_needs_become_exactly_those_grants() {
        let needs = Needs {
            hosts: vec!["api.example.com:443".into()],
            env: vec!["EXAMPLE_KEY".into()],
            programs: vec!["example".into()],
        };
        let grants = Grants::from_needs(&needs).unwrap();
        assert_eq!(grants.net[0].to_string(), "api.example.com:443");
        assert_eq!(grants.env, ["EXAMPLE_KEY"]);
        assert_eq!(grants.run, ["example"]);
        assert!(grants.read.is_empty() && grants.write.is_empty());

        let bad = Needs {
            hosts: vec!["*".into()],
            ..Needs::default()
        };
        assert!(Grants::from_needs(&bad).is_err());
    }

    #[test]
    fn hand_made_grants_are_validated() {
        let relative = Grants {
            read: paths(&["docs"]),
            ..Grants::none()
        };
        assert!(
            relative
                .validate()
                .unwrap_err()
                .to_string()
                .contains("absolute")
        );
        let bad_env = Grants {
            env: vec!["A=B".into()],
            ..Grants::none()
        };
        assert!(bad_env.validate().is_err());
        assert!(Grants::none().validate().is_ok());
    }

    #[test]
    fn grants_serialize_as_plain_lists() {
        let grants = Grants {
            net: vec![NetRule::parse("https://x.example").unwrap()],
            env: vec!["K".into()],
            ..Grants::none()
        };
        let json = serde_json::to_value(&grants).unwrap();
        assert_eq!(json["net"][0], "https://x.example");
        assert_eq!(json["env"][0], "K");
        let back: Grants = serde_json::from_value(json).unwrap();
        assert_eq!(back, grants);
    }
}
