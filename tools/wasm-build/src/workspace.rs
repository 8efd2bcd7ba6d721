//! Finding the workspace and its packages without a TOML parser: build
//! dependencies stay few, and the manifests in this workspace are simple.

use std::fs;
use std::path::{Path, PathBuf};

/// A package of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The package name, e.g. `testing-spin-next`.
    pub name: String,
    /// The directory holding its `Cargo.toml`.
    pub dir: PathBuf,
}

/// The root of the workspace the running build script belongs to: the
/// nearest ancestor of `CARGO_MANIFEST_DIR` whose `Cargo.toml` has a
/// `[workspace]` table.
///
/// # Panics
///
/// When `CARGO_MANIFEST_DIR` is unset (not run by cargo) or no such
/// ancestor exists.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .expect("CARGO_MANIFEST_DIR is unset: run this from a build script");
    let manifest_dir = PathBuf::from(manifest_dir);
    manifest_dir
        .ancestors()
        .find(|dir| {
            fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|text| text.lines().any(|line| line.trim() == "[workspace]"))
        })
        .unwrap_or_else(|| panic!("no workspace Cargo.toml above {}", manifest_dir.display()))
        .to_path_buf()
}

/// The packages in the immediate subdirectories of `dir` (each with a
/// `Cargo.toml`), sorted by directory name.
///
/// # Panics
///
/// When `dir` cannot be read or a manifest has no package name.
pub fn packages_in(dir: &Path) -> Vec<Package> {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
    let mut dirs: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display())))
        .map(|entry| entry.path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter().map(package_at).collect()
}

/// Every package of the workspace: the members listed in the root
/// manifest, with `dir/*` globs expanded.
pub(crate) fn members(root: &Path) -> Vec<Package> {
    let manifest = read(&root.join("Cargo.toml"));
    let mut packages = Vec::new();
    for member in member_patterns(&manifest) {
        match member.strip_suffix("/*") {
            Some(parent) => packages.extend(packages_in(&root.join(parent))),
            None => packages.push(package_at(root.join(member))),
        }
    }
    packages
}

/// The entries of the `members = [...]` array of a workspace manifest,
/// skipping commented-out lines.
fn member_patterns(manifest: &str) -> Vec<String> {
    // The line that starts the array, not a mention in a comment or
    // `default-members`.
    let mut offset = 0;
    let mut start = None;
    for line in manifest.split_inclusive('\n') {
        if line.trim_start().starts_with("members") && line.contains('=') {
            start = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(start) = start else {
        return Vec::new();
    };
    let after = &manifest[start..];
    let (Some(open), Some(close)) = (after.find('['), after.find(']')) else {
        return Vec::new();
    };
    after[open + 1..close]
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"'))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The package whose manifest is in `dir`.
fn package_at(dir: PathBuf) -> Package {
    let manifest = dir.join("Cargo.toml");
    let name = package_name(&read(&manifest))
        .unwrap_or_else(|| panic!("{} has no `[package]` name", manifest.display()));
    Package { name, dir }
}

/// The `name = "..."` of the `[package]` table.
fn package_name(manifest: &str) -> Option<String> {
    string_key(manifest, "[package]", "name")
}

/// The workspace members that are built-in adapters, each with the name
/// users run it by: the packages whose manifest says so in
/// `[package.metadata.moat]` (`builtin = "echo"`), in the order of the
/// workspace's `members`. The manifests are the one place that lists the
/// built-in adapters.
pub fn builtin_adapters(root: &Path) -> Vec<(String, Package)> {
    members(root)
        .into_iter()
        .filter_map(|package| {
            let manifest = read(&package.dir.join("Cargo.toml"));
            let name = string_key(&manifest, "[package.metadata.moat]", "builtin")?;
            Some((name, package))
        })
        .collect()
}

/// The string value of `key` in the table headed `table`.
fn string_key(manifest: &str, table: &str, key: &str) -> Option<String> {
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == table;
        } else if in_table {
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            if name.trim() == key {
                return Some(value.trim().trim_matches('"').to_owned());
            }
        }
    }
    None
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_members_and_skips_comments() {
        let manifest = r#"
# Build the members below.
[workspace]
default-members = ["x"]
members = [
    "host",
    "tools/wasm-build",
    # "adapters/old/*",
    "adapters/testing/*", "extra",
]
"#;
        assert_eq!(
            member_patterns(manifest),
            ["host", "tools/wasm-build", "adapters/testing/*", "extra"]
        );
    }

    #[test]
    fn reads_the_package_name_only_from_the_package_table() {
        let manifest =
            "[lib]\nname = \"lib_name\"\n\n[package]\nversion = \"1\"\nname = \"pkg-name\"\n";
        assert_eq!(package_name(manifest).as_deref(), Some("pkg-name"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
    }

    #[test]
    fn a_builtin_adapter_is_named_in_its_manifest_metadata() {
        let manifest = "[package]\nname = \"moat-adapter-echo\"\n\n[package.metadata.moat]\nbuiltin = \"echo\"\n\n[dependencies]\nbuiltin = \"1\"\n";
        assert_eq!(
            string_key(manifest, "[package.metadata.moat]", "builtin").as_deref(),
            Some("echo")
        );
        assert_eq!(
            string_key(
                "[package]\nname = \"x\"\n",
                "[package.metadata.moat]",
                "builtin"
            ),
            None
        );
    }
}
