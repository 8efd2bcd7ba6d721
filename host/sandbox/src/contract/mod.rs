//! The `moat:adapter` contract, every version this host runs, side by side.
//!
//! Each version of the WIT package lives in its own folder of `wit/`
//! (`wit/v0.2.0`, `wit/v0.3.0`) and has its own module here (`v0_2_0`,
//! `v0_3_0`), generated from
//! that folder, which implements [`Contract`]: how the sandbox instantiates
//! a component of that version, calls its exports and answers its imports.
//! [`SUPPORTED`] lists them; a component is run by the module of the
//! version it exports, so a new version never breaks components built
//! against an older one that is still listed. Adding a version is: add its
//! folder to `wit/`, add its module here, add its line to [`SUPPORTED`]
//! (docs/contract-versions.md says for how long a version stays).

mod v0_2_0;
mod v0_3_0;

use std::fmt;
use std::future::Future;

use moat_engine::{AdapterEvent, AdapterInfo, ErrorInfo, RunOptions};
use moat_grants::{Needs, TrustLevel};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker, ResourceAny};
use wasmtime::{Engine, Store};

use crate::error::LoadError;
use crate::state::RunState;

/// The WIT package every adapter exports its interface from.
pub const CONTRACT_PACKAGE: &str = "moat:adapter";
/// The interface an adapter component must export.
pub const ADAPTER_INTERFACE: &str = "moat:adapter/adapter";

/// Every contract version this host runs, oldest first: a component is run
/// by the entry of the version it was built against.
pub(crate) const SUPPORTED: &[Supported] = &[
    Supported::of::<v0_2_0::Contract>(),
    Supported::of::<v0_3_0::Contract>(),
];

/// The newest contract version this host runs: the one the guest SDK of
/// this workspace builds against.
pub const LATEST: ContractVersion = SUPPORTED[SUPPORTED.len() - 1].version;

/// The contract versions this host runs, oldest first.
pub fn supported_versions() -> impl Iterator<Item = ContractVersion> {
    SUPPORTED.iter().map(|supported| supported.version)
}

/// One version of the contract as the host runs it: its generated bindings
/// behind the few operations the sandbox needs. Implemented once per
/// version module.
pub(crate) trait Contract: 'static {
    /// The version, read from the package line of its WIT.
    const VERSION: ContractVersion;
    /// A component linked against this version's imports, ready to
    /// instantiate.
    type Pre: Clone + Send + Sync + 'static;
    /// A live instance of such a component.
    type Instance: Send + Sync + 'static;

    /// Adds this version's imports (the host services) to the linker.
    fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()>;

    /// Checks the component's exports against this version's and keeps
    /// what instantiating it needs.
    fn pre(pre: InstancePre<RunState>) -> wasmtime::Result<Self::Pre>;

    /// Instantiates the component in `store`.
    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<RunState>,
    ) -> impl Future<Output = wasmtime::Result<Self::Instance>> + Send;

    /// Calls `info()`.
    fn info(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
    ) -> impl Future<Output = wasmtime::Result<(AdapterInfo, Needs)>> + Send;

    /// Calls `run(prompt, options)`: the session resource, or the
    /// adapter's refusal.
    fn run(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        prompt: &str,
        options: &RunOptions,
        trust: TrustLevel,
    ) -> impl Future<Output = wasmtime::Result<Result<ResourceAny, ErrorInfo>>> + Send;

    /// Pulls at most `max` events from the session: `next-batch(max)` from
    /// 0.3.0 on, one `next()` before. An empty list: the stream is over.
    /// The list is the guest's: its length is not checked here.
    fn next_batch(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        session: ResourceAny,
        max: u32,
    ) -> impl Future<Output = wasmtime::Result<Vec<AdapterEvent>>> + Send;
}

/// An entry of [`SUPPORTED`]: a version and its module's entry points.
pub(crate) struct Supported {
    /// The version.
    pub(crate) version: ContractVersion,
    /// Adds the version's imports to the linker.
    pub(crate) add_to_linker: fn(&mut Linker<RunState>) -> wasmtime::Result<()>,
    /// Links a compiled component of this version (see
    /// [`crate::adapter::link`]).
    pub(crate) link: crate::adapter::LinkFn,
}

impl Supported {
    const fn of<C: Contract>() -> Self {
        Self {
            version: C::VERSION,
            add_to_linker: C::add_to_linker,
            link: crate::adapter::link::<C>,
        }
    }
}

/// Adds the imports of every supported version to `linker`: their names
/// carry the version, so they live side by side.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    for supported in SUPPORTED {
        (supported.add_to_linker)(linker)?;
    }
    Ok(())
}

/// A semantic version of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContractVersion {
    /// The major version.
    pub major: u64,
    /// The minor version.
    pub minor: u64,
    /// The patch version.
    pub patch: u64,
}

impl ContractVersion {
    /// Parses "x.y.z" (pre-release and build suffixes are not accepted).
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
        let version = Self {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(version)
    }

    /// The version in the `package moat:adapter@x.y.z;` line of a WIT
    /// source, at compile time: each version module reads its own from the
    /// WIT it is generated from, so the version is written only there.
    /// Fails the build when the line is missing or malformed.
    pub(crate) const fn of_wit(wit: &str) -> Self {
        const PREFIX: &[u8] = b"package moat:adapter@";
        let bytes = wit.as_bytes();
        let mut start = 0;
        while start + PREFIX.len() <= bytes.len() {
            let mut matched = true;
            let mut i = 0;
            while i < PREFIX.len() {
                if bytes[start + i] != PREFIX[i] {
                    matched = false;
                    break;
                }
                i += 1;
            }
            if matched && (start == 0 || bytes[start - 1] == b'\n') {
                return Self::parse_const(bytes, start + PREFIX.len());
            }
            start += 1;
        }
        panic!("the WIT has no `package moat:adapter@x.y.z;` line");
    }

    /// Reads "x.y.z;" from `bytes` at `at`.
    const fn parse_const(bytes: &[u8], mut at: usize) -> Self {
        let mut parts = [0u64; 3];
        let mut part = 0;
        let mut digits = 0;
        while at < bytes.len() && bytes[at] != b';' {
            match bytes[at] {
                b'0'..=b'9' => {
                    parts[part] = parts[part] * 10 + (bytes[at] - b'0') as u64;
                    digits += 1;
                }
                b'.' if digits > 0 && part < 2 => {
                    part += 1;
                    digits = 0;
                }
                _ => panic!("the WIT package version is not x.y.z"),
            }
            at += 1;
        }
        if part != 2 || digits == 0 || at == bytes.len() {
            panic!("the WIT package version is not x.y.z");
        }
        Self {
            major: parts[0],
            minor: parts[1],
            patch: parts[2],
        }
    }

    /// Whether a component built against `self` is run by the host's
    /// `host` version: same major version, and while 0.x the same minor
    /// version (semver treats 0.x minor bumps as breaking).
    pub fn is_compatible_with(self, host: ContractVersion) -> bool {
        self.major == host.major && (host.major != 0 || self.minor == host.minor)
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// Version and layer fields of a core module's preamble.
const CORE_MODULE_PREAMBLE: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
/// Layer field that marks a component (the version field varies by draft).
const COMPONENT_LAYER: [u8; 2] = [0x01, 0x00];

/// Refuses, before compiling, bytes that are not a WebAssembly component.
pub(crate) fn check_binary_kind(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.is_empty() {
        return Err(LoadError::Empty);
    }
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotWasm);
    }
    if bytes[4..8] == CORE_MODULE_PREAMBLE {
        return Err(LoadError::CoreModule);
    }
    if bytes[6..8] != COMPONENT_LAYER {
        return Err(LoadError::NotWasm);
    }
    Ok(())
}

/// The supported version that runs a compiled component: it must export
/// the adapter interface of a supported version, and nothing else.
pub(crate) fn version_of(
    engine: &Engine,
    component: &Component,
) -> Result<&'static Supported, LoadError> {
    let ty = component.component_type();
    let mut found = None;
    for (name, item) in ty.exports(engine) {
        match name.split_once('@') {
            Some((ADAPTER_INTERFACE, version))
                if matches!(item.ty, ComponentItem::ComponentInstance(_)) =>
            {
                let version =
                    ContractVersion::parse(version).ok_or_else(|| LoadError::BadVersion {
                        version: version.to_string(),
                    })?;
                found = Some(version);
            }
            _ => {
                return Err(LoadError::UnexpectedExport {
                    name: name.to_string(),
                });
            }
        }
    }
    let version = found.ok_or(LoadError::NotAnAdapter)?;
    runner_of(version)
}

/// The supported entry that runs components of `version`.
fn runner_of(version: ContractVersion) -> Result<&'static Supported, LoadError> {
    SUPPORTED
        .iter()
        .rev()
        .find(|supported| version.is_compatible_with(supported.version))
        .ok_or_else(|| LoadError::IncompatibleContract {
            component: version,
            supported: supported_versions().collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u64, minor: u64, patch: u64) -> ContractVersion {
        ContractVersion {
            major,
            minor,
            patch,
        }
    }

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(ContractVersion::parse("0.1.2"), Some(v(0, 1, 2)));
        assert_eq!(ContractVersion::parse("0.1"), None);
        assert_eq!(ContractVersion::parse("0.1.2.3"), None);
        assert_eq!(ContractVersion::parse("0.1.x"), None);
    }

    #[test]
    fn the_version_is_read_from_the_wit_package_line() {
        let wit = "/// doc\n/// package moat:adapter@9.9.9;\npackage moat:adapter@0.12.3;\n";
        assert_eq!(ContractVersion::of_wit(wit), v(0, 12, 3));
        // Each module's version is its WIT's.
        for supported in SUPPORTED {
            let folder = format!(
                "{}/../../wit/v{}/adapter.wit",
                env!("CARGO_MANIFEST_DIR"),
                supported.version
            );
            let wit = std::fs::read_to_string(&folder).unwrap();
            let line = format!("package moat:adapter@{};", supported.version);
            assert!(wit.lines().any(|l| l == line), "{folder}: {line}");
        }
    }

    #[test]
    fn zero_major_versions_need_the_same_minor() {
        assert!(v(0, 1, 7).is_compatible_with(v(0, 1, 0)));
        assert!(!v(0, 2, 0).is_compatible_with(v(0, 1, 0)));
        assert!(v(1, 3, 0).is_compatible_with(v(1, 0, 0)));
    }

    #[test]
    fn a_version_is_run_by_its_entry_or_refused_naming_what_is_supported() {
        assert_eq!(runner_of(LATEST).unwrap().version, LATEST);
        let future = v(0, 99, 0);
        let error = runner_of(future).err().unwrap();
        let message = error.to_string();
        assert!(message.contains("0.99.0"), "{message}");
        assert!(message.contains(&LATEST.to_string()), "{message}");
    }

    #[test]
    fn binary_kinds_are_told_apart() {
        assert!(matches!(check_binary_kind(b""), Err(LoadError::Empty)));
        assert!(matches!(
            check_binary_kind(b"hello, world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_binary_kind(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_binary_kind(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
