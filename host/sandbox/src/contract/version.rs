//! [`ContractVersion`]: the version of the `moat:adapter` package a
//! component is built against, and which versions run which.
//!
//! It depends on nothing else of the sandbox, so the load errors that name
//! versions and the contract modules that read theirs can both use it.

use std::fmt;

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
    }

    #[test]
    fn zero_major_versions_need_the_same_minor() {
        assert!(v(0, 1, 7).is_compatible_with(v(0, 1, 0)));
        assert!(!v(0, 2, 0).is_compatible_with(v(0, 1, 0)));
        assert!(v(1, 3, 0).is_compatible_with(v(1, 0, 0)));
    }
}
