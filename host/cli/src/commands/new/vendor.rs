//! The SDK copied into a new project's `vendor/`, as a published package
//! would arrive: the Rust crates with manifests of their own (what `cargo
//! package` would write), the TypeScript SDK `npm pack`ed with its WIT
//! inside, the Python SDK's sources.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::{VENDOR, sdk_in};
use crate::UsageError;
use crate::args::Lang;

pub(super) fn read_toml(path: &Path) -> anyhow::Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))
}

pub(super) fn str_at<'a>(table: &'a toml::Table, keys: &[&str]) -> Option<&'a str> {
    let (last, path) = keys.split_last()?;
    let mut table = table;
    for key in path {
        table = table.get(*key)?.as_table()?;
    }
    table.get(*last)?.as_str()
}

fn is_workspace(value: &toml::Value) -> bool {
    value
        .as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(toml::Value::as_bool)
        == Some(true)
}

/// The version of the crate at `dir`: its own, or its workspace's.
pub(super) fn crate_version(dir: &Path) -> anyhow::Result<String> {
    let manifest = read_toml(&dir.join("Cargo.toml"))?;
    let version = manifest
        .get("package")
        .and_then(|p| p.get("version"))
        .context("the SDK's Cargo.toml has no version")?;
    if let Some(version) = version.as_str() {
        return Ok(version.to_owned());
    }
    for root in dir.ancestors().skip(1) {
        if let Ok(workspace) = read_toml(&root.join("Cargo.toml"))
            && let Some(version) = str_at(&workspace, &["workspace", "package", "version"])
        {
            return Ok(version.to_owned());
        }
    }
    bail!(
        "the SDK at {} takes its version from a workspace that cannot be found",
        dir.display()
    )
}

pub(super) fn npm_version(package: &Path) -> anyhow::Result<String> {
    let path = package.join("package.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    Ok(json["version"]
        .as_str()
        .context("the SDK's package.json has no version")?
        .to_owned())
}

/// moat's workspace: where its crates are and the settings they inherit.
pub(super) struct Workspace {
    root: PathBuf,
    package: toml::Table,
    dependencies: toml::Table,
}

impl Workspace {
    pub(super) fn read(root: &Path) -> anyhow::Result<Self> {
        let manifest = read_toml(&root.join("Cargo.toml"))?;
        let workspace = manifest
            .get("workspace")
            .and_then(toml::Value::as_table)
            .context("moat's Cargo.toml has no [workspace]")?;
        let table = |key: &str| {
            workspace
                .get(key)
                .and_then(toml::Value::as_table)
                .cloned()
                .unwrap_or_default()
        };
        Ok(Self {
            root: root.to_owned(),
            package: table("package"),
            dependencies: table("dependencies"),
        })
    }
}

/// Copies the workspace crate `name` into `vendor/` at its path in the
/// workspace (so the paths it reaches outside itself, like the SDK's
/// `../wit`, lead to their copies), with a manifest of its own — what
/// `cargo package` makes: the workspace's settings written out, and
/// moat's other crates it uses (vendored too) by version. `crates` gets
/// each crate's name and path in the project; returns its version.
pub(super) fn vendor_crate(
    workspace: &Workspace,
    name: &str,
    vendor: &Path,
    crates: &mut Vec<(String, String)>,
) -> anyhow::Result<String> {
    let path = workspace
        .dependencies
        .get(name)
        .and_then(|d| d.get("path"))
        .and_then(toml::Value::as_str)
        .with_context(|| format!("{name} is not a crate of moat's workspace"))?
        .to_owned();
    let from = workspace.root.join(&path);
    let manifest = read_toml(&from.join("Cargo.toml"))?;
    let mut package = manifest
        .get("package")
        .and_then(toml::Value::as_table)
        .cloned()
        .with_context(|| format!("{name}'s Cargo.toml has no [package]"))?;
    for (key, value) in package.iter_mut() {
        if is_workspace(value) {
            *value = workspace
                .package
                .get(key)
                .cloned()
                .with_context(|| format!("{name} inherits {key}, which the workspace lacks"))?;
        }
    }
    let version = package
        .get("version")
        .and_then(toml::Value::as_str)
        .with_context(|| format!("{name} has no version"))?
        .to_owned();
    let project_path = format!("{VENDOR}/{path}");
    if crates.iter().any(|(n, _)| n == name) {
        return Ok(version);
    }
    crates.push((name.to_owned(), project_path));

    let mut sections: Vec<(&str, toml::Value)> = vec![("package", package.into())];
    for key in ["lib", "features"] {
        if let Some(value) = manifest.get(key) {
            sections.push((key, value.clone()));
        }
    }
    for key in ["dependencies", "build-dependencies"] {
        if let Some(deps) = manifest.get(key).and_then(toml::Value::as_table) {
            let deps = standalone_dependencies(workspace, deps, vendor, crates)?;
            sections.push((key, deps.into()));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        let mut out = toml::Table::new();
        for (cfg, kinds) in targets {
            let mut kept = toml::Table::new();
            for key in ["dependencies", "build-dependencies"] {
                if let Some(deps) = kinds.get(key).and_then(toml::Value::as_table) {
                    let deps = standalone_dependencies(workspace, deps, vendor, crates)?;
                    kept.insert(key.to_owned(), deps.into());
                }
            }
            if !kept.is_empty() {
                out.insert(cfg.clone(), kept.into());
            }
        }
        if !out.is_empty() {
            sections.push(("target", out.into()));
        }
    }
    // Tests, benches, dev-dependencies and the workspace's lints stay in
    // moat's repository.
    let mut text = format!(
        "# {name} {version}, copied from moat {} by `moat new`: its manifest as\n\
         # `cargo package` writes it (the workspace's settings written out).\n",
        env!("CARGO_PKG_VERSION")
    );
    for (key, value) in sections {
        text.push('\n');
        if let ("package", toml::Value::Table(package)) = (key, &value) {
            // Its name and version first, as a reader looks for them.
            text.push_str("[package]\n");
            let first = ["name", "version"];
            let keys = first
                .into_iter()
                .filter(|k| package.contains_key(*k))
                .chain(
                    package
                        .keys()
                        .map(String::as_str)
                        .filter(|k| !first.contains(k)),
                );
            for key in keys {
                let key_text = toml::Table::from_iter([(key.to_owned(), package[key].clone())]);
                text.push_str(&toml::to_string(&key_text)?);
            }
            continue;
        }
        let section = toml::Table::from_iter([(key.to_owned(), value)]);
        text.push_str(&toml::to_string(&section)?);
    }
    let to = vendor.join(&path);
    std::fs::create_dir_all(&to)?;
    std::fs::write(to.join("Cargo.toml"), text)?;
    copy_tree(&from.join("src"), &to.join("src"))?;
    for extra in ["build.rs", "README.md"] {
        if from.join(extra).is_file() {
            std::fs::copy(from.join(extra), to.join(extra))?;
        }
    }
    Ok(version)
}

/// A vendored crate's dependencies with nothing taken from the workspace:
/// inherited ones written out, moat's own crates by version (and vendored).
fn standalone_dependencies(
    workspace: &Workspace,
    deps: &toml::Table,
    vendor: &Path,
    crates: &mut Vec<(String, String)>,
) -> anyhow::Result<toml::Table> {
    let mut out = toml::Table::new();
    for (name, spec) in deps {
        let resolved = if is_workspace(spec) {
            let mut base = match workspace.dependencies.get(name) {
                Some(toml::Value::String(version)) => {
                    toml::Table::from_iter([("version".to_owned(), version.clone().into())])
                }
                Some(toml::Value::Table(table)) => table.clone(),
                _ => bail!("{name} is inherited from the workspace, which does not name it"),
            };
            if base.remove("path").is_some() {
                let version = vendor_crate(workspace, name, vendor, crates)?;
                base.insert("version".to_owned(), version.into());
            }
            for (key, value) in spec.as_table().into_iter().flatten() {
                match (key.as_str(), base.get_mut("features")) {
                    ("workspace", _) => {}
                    ("features", Some(toml::Value::Array(features))) => {
                        features.extend(value.as_array().cloned().unwrap_or_default());
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
            base.into()
        } else if spec.get("path").is_some() {
            bail!(
                "{name} is a path dependency outside moat's workspace settings: it cannot be vendored"
            )
        } else {
            spec.clone()
        };
        out.insert(name.clone(), resolved);
    }
    Ok(out)
}

/// The Python SDK and the contract's WIT, at their paths in moat's
/// repository (the SDK finds the contract at `../../wit` from itself).
pub(super) fn vendor_python(sources: &Path, vendor: &Path) -> anyhow::Result<()> {
    let from = sdk_in(sources, Lang::Python);
    let to = vendor.join("guest-sdk/python");
    std::fs::create_dir_all(&to)?;
    std::fs::copy(from.join("pyproject.toml"), to.join("pyproject.toml"))?;
    copy_tree(&from.join("src"), &to.join("src"))?;
    copy_tree(&from.join("wit"), &to.join("wit"))?;
    copy_tree(&sources.join("wit"), &vendor.join("wit"))?;
    Ok(())
}

/// `npm pack` of the TypeScript SDK into `vendor/`: the package as npm
/// would publish it. It is packed from a copy with its links followed, so
/// the contract's WIT (a link to `wit/` in moat's repository) is inside.
/// Returns the tarball's file name.
pub(super) fn pack_typescript(package: &Path, vendor: &Path) -> anyhow::Result<String> {
    let vendor = &std::path::absolute(vendor)?;
    let staging = vendor.join(".moat-adapter-package");
    copy_tree(package, &staging)?;
    let packed = Command::new("npm")
        .args(["pack", "--ignore-scripts", "--json", "--pack-destination"])
        .arg(vendor)
        .current_dir(&staging)
        .output();
    let _ = std::fs::remove_dir_all(&staging);
    let packed = packed.map_err(|e| {
        UsageError(format!(
            "a TypeScript project needs npm, which cannot be run ({e}): install Node.js 20 and npm"
        ))
    })?;
    if !packed.status.success() {
        bail!(
            "`npm pack` of moat's TypeScript SDK failed: {}",
            String::from_utf8_lossy(&packed.stderr).trim()
        );
    }
    let json: serde_json::Value =
        serde_json::from_slice(&packed.stdout).context("`npm pack --json` printed no JSON")?;
    let name = json[0]["filename"]
        .as_str()
        .context("`npm pack --json` named no file")?;
    // npm names a scoped package's tarball without its `@`.
    let name = name.trim_start_matches('@').replace('/', "-");
    if !vendor.join(&name).is_file() {
        bail!("`npm pack` wrote no {}", vendor.join(&name).display());
    }
    Ok(name)
}

/// Copies `from` to `to`, links followed (the copy has none), leaving out
/// what builds and installs leave in a source tree.
pub(super) fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    const LEFT_OUT: &[&str] = &[
        "node_modules",
        "target",
        "__pycache__",
        ".venv",
        "package-lock.json",
    ];
    std::fs::create_dir_all(to)?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if LEFT_OUT.contains(&text.as_ref())
            || text.ends_with(".egg-info")
            || text.ends_with(".pyc")
        {
            continue;
        }
        let source = entry.path();
        // `metadata` follows links: a linked folder is copied as a folder.
        let metadata = std::fs::metadata(&source)
            .with_context(|| format!("cannot read {}", source.display()))?;
        if metadata.is_dir() {
            copy_tree(&source, &to.join(&name))?;
        } else {
            std::fs::copy(&source, to.join(&name))
                .with_context(|| format!("cannot copy {}", source.display()))?;
        }
    }
    Ok(())
}
