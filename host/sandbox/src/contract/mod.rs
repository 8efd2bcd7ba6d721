//! The `moat:adapter` contract, every version this host runs, side by side.
//!
//! Each version of the WIT package lives in its own folder of `wit/`
//! (`wit/v0.2.0`, `wit/v0.3.0`, `wit/v0.4.0`) and has its own module here
//! (`v0_2_0`, `v0_3_0`, `v0_4_0`), generated from that folder, which implements [`Contract`]:
//! how the sandbox instantiates a component of that version, calls its
//! exports and answers its imports. The newest version's module holds the
//! host side of every import and the conversions to the sandbox's own
//! types; an older one maps what did not change since onto the newest's
//! bindings (bindgen's `with`) and converts only what did.
//! [`SUPPORTED`] lists them; a component is run by the module of the
//! version it exports, so a new version never breaks components built
//! against an older one that is still listed. Adding a version is: add its
//! folder to `wit/`, add its module here, add its line to [`SUPPORTED`]
//! (docs/contract-versions.md says for how long a version stays).
//!
//! This module sits above the adapter it links: [`SUPPORTED`] names
//! [`crate::adapter::link`] for each version. What the adapter needs of a
//! version ([`bindings::Contract`], [`ContractVersion`]) lives below, in
//! modules of their own.

pub(crate) mod bindings;
mod v0_2_0;
mod v0_3_0;
mod v0_4_0;
pub(crate) mod version;

use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

use crate::adapter::{LinkFn, link};
use crate::error::LoadError;
use crate::state::RunState;
use bindings::Contract;
pub use version::ContractVersion;

/// The WIT package every adapter exports its interface from.
pub const CONTRACT_PACKAGE: &str = "moat:adapter";
/// The interface an adapter component must export.
pub const ADAPTER_INTERFACE: &str = "moat:adapter/adapter";

/// Every contract version this host runs, oldest first: a component is run
/// by the entry of the version it was built against.
pub(crate) const SUPPORTED: &[Supported] = &[
    Supported::of::<v0_2_0::Contract>(),
    Supported::of::<v0_3_0::Contract>(),
    Supported::of::<v0_4_0::Contract>(),
];

/// The newest contract version this host runs: the one the guest SDK of
/// this workspace builds against.
pub const LATEST: ContractVersion = SUPPORTED[SUPPORTED.len() - 1].version;

/// The contract versions this host runs, oldest first.
pub fn supported_versions() -> impl Iterator<Item = ContractVersion> {
    SUPPORTED.iter().map(|supported| supported.version)
}

/// An entry of [`SUPPORTED`]: a version and its module's entry points.
pub(crate) struct Supported {
    /// The version.
    pub(crate) version: ContractVersion,
    /// Adds the version's imports to the linker.
    pub(crate) add_to_linker: fn(&mut Linker<RunState>) -> wasmtime::Result<()>,
    /// Links a compiled component of this version (see [`link`]).
    pub(crate) link: LinkFn,
}

impl Supported {
    const fn of<C: Contract>() -> Self {
        Self {
            version: C::VERSION,
            add_to_linker: C::add_to_linker,
            link: link::<C>,
        }
    }
}

/// The linker's instance for the interface `name` of contract `version`
/// (`moat:adapter/NAME@VERSION`): where an older version's module adds
/// the newest's host side under its own names.
pub(crate) fn interface_instance<'a>(
    linker: &'a mut Linker<RunState>,
    version: ContractVersion,
    name: &str,
) -> wasmtime::Result<wasmtime::component::LinkerInstance<'a, RunState>> {
    linker.instance(&format!("{CONTRACT_PACKAGE}/{name}@{version}"))
}

/// Adds the imports of every supported version to `linker`: their names
/// carry the version, so they live side by side.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    for supported in SUPPORTED {
        (supported.add_to_linker)(linker)?;
    }
    Ok(())
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

    #[test]
    fn each_module_runs_the_version_of_its_wit() {
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
    fn a_version_is_run_by_its_entry_or_refused_naming_what_is_supported() {
        assert_eq!(runner_of(LATEST).unwrap().version, LATEST);
        let future = ContractVersion {
            major: 0,
            minor: 99,
            patch: 0,
        };
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
