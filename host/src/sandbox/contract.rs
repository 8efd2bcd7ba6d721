//! Which files are moat adapter components, and of which contract version.

use std::fmt;

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::error::LoadError;

/// The WIT package every adapter exports its interface from.
pub const CONTRACT_PACKAGE: &str = "moat:adapter";
/// The interface an adapter component must export.
pub const ADAPTER_INTERFACE: &str = "moat:adapter/adapter";
/// The contract version this host implements.
pub const HOST_CONTRACT: ContractVersion = ContractVersion {
    major: 0,
    minor: 2,
    patch: 0,
};

const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// Version and layer fields of a core module's preamble.
const CORE_MODULE_PREAMBLE: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
/// Layer field that marks a component (the version field varies by draft).
const COMPONENT_LAYER: [u8; 2] = [0x01, 0x00];

/// A semantic version of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ContractVersion {
    pub major: u64,
    pub minor: u64,
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

    /// Whether a component built against `self` runs on a host that
    /// implements `host`: same major version, and while 0.x the same minor
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

/// Refuses, before compiling, bytes that are not a WebAssembly component.
pub fn check_binary_kind(bytes: &[u8]) -> Result<(), LoadError> {
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

/// Checks a compiled component exports the adapter interface of a
/// compatible contract version, and nothing else.
pub fn check_exports(engine: &Engine, component: &Component) -> Result<ContractVersion, LoadError> {
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
    if !version.is_compatible_with(HOST_CONTRACT) {
        return Err(LoadError::IncompatibleContract {
            component: version,
            host: HOST_CONTRACT,
        });
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            ContractVersion::parse("0.1.2"),
            Some(ContractVersion {
                major: 0,
                minor: 1,
                patch: 2
            })
        );
        assert_eq!(ContractVersion::parse("0.1"), None);
        assert_eq!(ContractVersion::parse("0.1.2.3"), None);
        assert_eq!(ContractVersion::parse("0.1.x"), None);
    }

    #[test]
    fn zero_major_versions_need_the_same_minor() {
        let v = |minor, patch| ContractVersion {
            major: 0,
            minor,
            patch,
        };
        assert!(v(1, 7).is_compatible_with(v(1, 0)));
        assert!(!v(2, 0).is_compatible_with(v(1, 0)));
        let one = |minor| ContractVersion {
            major: 1,
            minor,
            patch: 0,
        };
        assert!(one(3).is_compatible_with(one(0)));
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
