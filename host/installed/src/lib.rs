//! Adapters installed by name. `moat adapter install` keeps a component in
//! moat's data directory (`adapters/<name>/component.wasm`) beside a
//! manifest (`adapter.toml`): its name, version, SHA-256, where it came
//! from, and the grants the user accepted when installing it. `moat run
//! NAME` then loads it with those grants, after checking its bytes still
//! have the recorded hash: a component changed on disk is refused, never
//! run.
//!
//! This crate only keeps the catalog: loading a component, reading its
//! declared needs and asking the user are the CLI's.

mod catalog;
mod download;
mod manifest;

pub use catalog::{Catalog, InstallError, sha256_hex};
pub use download::{DownloadError, Downloader};
pub use manifest::Manifest;

/// The longest name accepted.
pub const MAX_NAME: usize = 64;

/// Whether `name` can name an installed adapter: lowercase letters,
/// digits and `-`, starting with a letter (it names a directory and is
/// typed on command lines).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
