//! `moat new NAME --lang …`: a ready adapter project — sources, a build
//! script, one test and a README — that builds and runs with no edits,
//! wherever it is moved or copied. The templates are in
//! `host/cli/templates/<lang>/`.
//!
//! The project depends on moat's guest SDK the way it would on a published
//! package: `moat-guest = "0.1.0"` (Rust), `@moat/adapter` (npm), the Python
//! SDK with its build tools pinned in `requirements.txt`. The SDKs are not
//! published yet, so by default `moat new` puts a copy of the one for the
//! language in the project's `vendor/`, taken from the sources this moat was
//! built from, and the project takes the SDK from there by a path inside
//! itself: a Rust `[patch.crates-io]`, an npm tarball (`npm pack`ed, the
//! contract's WIT inside), a Python source tree the project's own venv
//! (`.venv`) reads. With `--sdk PATH` the project references that SDK where
//! it is instead (its absolute path, for working on the SDK itself), and
//! nothing is copied.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::UsageError;
use crate::args::{Lang, NewArgs};

mod vendor;

use vendor::{
    Workspace, copy_tree, crate_version, npm_version, pack_typescript, read_toml, str_at,
    vendor_crate, vendor_python,
};

/// When a template file is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// Only beside a vendored SDK (`vendor/`), not with `--sdk`.
    Vendored,
}

/// A template file: where it goes in the project, and its text.
struct Template {
    path: &'static str,
    text: &'static str,
    executable: bool,
    when: When,
}

const fn file(path: &'static str, text: &'static str) -> Template {
    Template {
        path,
        text,
        executable: false,
        when: When::Always,
    }
}

const fn script(path: &'static str, text: &'static str) -> Template {
    Template {
        path,
        text,
        executable: true,
        when: When::Always,
    }
}

const fn vendored(path: &'static str, text: &'static str) -> Template {
    Template {
        path,
        text,
        executable: false,
        when: When::Vendored,
    }
}

const RUST: &[Template] = &[
    file(
        "Cargo.toml",
        include_str!("../../../templates/rust/Cargo.toml.tmpl"),
    ),
    file(
        "src/lib.rs",
        include_str!("../../../templates/rust/src/lib.rs.tmpl"),
    ),
    script(
        "build.sh",
        include_str!("../../../templates/rust/build.sh.tmpl"),
    ),
    file(
        "README.md",
        include_str!("../../../templates/rust/README.md.tmpl"),
    ),
    file(
        ".gitignore",
        include_str!("../../../templates/rust/gitignore.tmpl"),
    ),
    vendored(
        "vendor/README.md",
        include_str!("../../../templates/rust/vendor/README.md.tmpl"),
    ),
];

const PYTHON: &[Template] = &[
    file(
        "src/{{crate}}.py",
        include_str!("../../../templates/python/src/adapter.py.tmpl"),
    ),
    file(
        "requirements.txt",
        include_str!("../../../templates/python/requirements.txt.tmpl"),
    ),
    script(
        "build.sh",
        include_str!("../../../templates/python/build.sh.tmpl"),
    ),
    script(
        "test.sh",
        include_str!("../../../templates/python/test.sh.tmpl"),
    ),
    file(
        "README.md",
        include_str!("../../../templates/python/README.md.tmpl"),
    ),
    file(
        ".gitignore",
        include_str!("../../../templates/python/gitignore.tmpl"),
    ),
    vendored(
        "vendor/README.md",
        include_str!("../../../templates/python/vendor/README.md.tmpl"),
    ),
];

const TYPESCRIPT: &[Template] = &[
    file(
        "package.json",
        include_str!("../../../templates/typescript/package.json.tmpl"),
    ),
    file(
        "tsconfig.json",
        include_str!("../../../templates/typescript/tsconfig.json.tmpl"),
    ),
    file(
        "src/adapter.ts",
        include_str!("../../../templates/typescript/src/adapter.ts.tmpl"),
    ),
    script(
        "build.sh",
        include_str!("../../../templates/typescript/build.sh.tmpl"),
    ),
    script(
        "test.sh",
        include_str!("../../../templates/typescript/test.sh.tmpl"),
    ),
    file(
        "README.md",
        include_str!("../../../templates/typescript/README.md.tmpl"),
    ),
    file(
        ".gitignore",
        include_str!("../../../templates/typescript/gitignore.tmpl"),
    ),
    vendored(
        "vendor/README.md",
        include_str!("../../../templates/typescript/vendor/README.md.tmpl"),
    ),
];

/// The parts of templates that depend on where the SDK comes from: the
/// README's paragraph on it and, for Rust, the `[patch.crates-io]` section.
struct Snippets {
    vendored_note: &'static str,
    local_note: &'static str,
    vendored_patch: &'static str,
    local_patch: &'static str,
}

const RUST_SNIPPETS: Snippets = Snippets {
    vendored_note: include_str!("../../../templates/rust/sdk-vendored.md.tmpl"),
    local_note: include_str!("../../../templates/rust/sdk-local.md.tmpl"),
    vendored_patch: include_str!("../../../templates/rust/patch-vendored.toml.tmpl"),
    local_patch: include_str!("../../../templates/rust/patch-local.toml.tmpl"),
};

const PYTHON_SNIPPETS: Snippets = Snippets {
    vendored_note: include_str!("../../../templates/python/sdk-vendored.md.tmpl"),
    local_note: include_str!("../../../templates/python/sdk-local.md.tmpl"),
    vendored_patch: "",
    local_patch: "",
};

const TYPESCRIPT_SNIPPETS: Snippets = Snippets {
    vendored_note: include_str!("../../../templates/typescript/sdk-vendored.md.tmpl"),
    local_note: include_str!("../../../templates/typescript/sdk-local.md.tmpl"),
    vendored_patch: "",
    local_patch: "",
};

/// Where the project's copy of the SDK goes.
const VENDOR: &str = "vendor";

/// moat's sources: the repository this moat was built from, where its
/// guest SDKs and the contract's WIT are.
fn moat_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The SDK for `lang` inside moat's sources (or a checkout given by path).
fn sdk_in(sources: &Path, lang: Lang) -> PathBuf {
    match lang {
        Lang::Rust => sources.join("guest-sdk"),
        Lang::Python => sources.join("guest-sdk/python"),
        Lang::Typescript => sources.join("guest-sdk/typescript"),
    }
}

/// Where the project's SDK comes from.
enum Sdk {
    /// Copied into the project's `vendor/` from moat's sources (this
    /// directory): the project references only itself.
    Vendored(PathBuf),
    /// `--sdk`: referenced where it is, by its absolute path.
    Local(PathBuf),
}

pub fn new(args: &NewArgs) -> anyhow::Result<ExitCode> {
    if !moat_installed::valid_name(&args.name) {
        return Err(UsageError(format!(
            "{:?} cannot name an adapter: use lowercase letters, digits and `-`, starting with a letter",
            args.name
        ))
        .into());
    }
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(UsageError(format!(
            "{} exists and is not empty: pick another name or --dir",
            dir.display()
        ))
        .into());
    }
    let sdk = match &args.sdk {
        Some(path) => Sdk::Local(local_sdk(args.lang, path)?),
        None => Sdk::Vendored(vendor_source(args.lang)?),
    };
    let existed = dir.exists();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if let Err(error) = write_project(&dir, args, &sdk) {
        // Nothing half-made is left behind: the directory was empty or
        // absent, so all that is in it is this attempt's.
        if existed {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let _ = if path.is_dir() && !path.is_symlink() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(error);
    }
    println!(
        "created {} ({:?} adapter {}{})",
        dir.display(),
        args.lang,
        args.name,
        match &sdk {
            Sdk::Vendored(_) => ", moat's SDK copied into vendor/".to_owned(),
            Sdk::Local(path) => format!(", moat's SDK at {}", path.display()),
        }
    );
    println!(
        "  cd {} && ./build.sh && moat run ./{}.wasm \"hi\"",
        dir.display(),
        args.name
    );
    Ok(ExitCode::SUCCESS)
}

/// The SDK `--sdk PATH` names: the language's SDK directory, or a moat
/// checkout holding it (`guest-sdk/`).
fn local_sdk(lang: Lang, path: &Path) -> anyhow::Result<PathBuf> {
    let path = if path.join("guest-sdk").is_dir() {
        sdk_in(path, lang)
    } else {
        path.to_owned()
    };
    let refuse = |why: &str| -> anyhow::Error {
        UsageError(format!(
            "--sdk {}: {why}; give moat's guest SDK for {lang:?} (guest-sdk{} in moat's repository) or the repository itself",
            path.display(),
            match lang {
                Lang::Rust => "",
                Lang::Python => "/python",
                Lang::Typescript => "/typescript",
            }
        ))
        .into()
    };
    let path = path
        .canonicalize()
        .map_err(|e| refuse(&format!("cannot be read ({e})")))?;
    let named = match lang {
        Lang::Rust => read_toml(&path.join("Cargo.toml"))
            .ok()
            .and_then(|m| str_at(&m, &["package", "name"]).map(str::to_owned)),
        Lang::Python => read_toml(&path.join("pyproject.toml"))
            .ok()
            .and_then(|m| str_at(&m, &["project", "name"]).map(str::to_owned)),
        Lang::Typescript => std::fs::read_to_string(path.join("package.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|json| json["name"].as_str().map(str::to_owned)),
    };
    let want = sdk_package(lang);
    match named {
        Some(name) if name == want => Ok(path),
        Some(name) => Err(refuse(&format!("that is the package {name}, not {want}"))),
        None => Err(refuse(&format!("no {want} package there"))),
    }
}

/// The SDK's package name for `lang`.
fn sdk_package(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "moat-guest",
        Lang::Python => "moat-adapter",
        Lang::Typescript => "@moat/adapter",
    }
}

/// moat's sources, checked to hold the SDK for `lang` and the contract's
/// WIT: what the project's `vendor/` is copied from.
fn vendor_source(lang: Lang) -> anyhow::Result<PathBuf> {
    let sources = moat_sources();
    let sdk = sdk_in(&sources, lang);
    if !sdk.is_dir() || !sources.join("wit").is_dir() {
        return Err(UsageError(format!(
            "moat new copies moat's guest SDK into the project from the sources this moat was built from, \
             which are not at {} (any more): pass --sdk with the path of a moat checkout to reference its SDK instead",
            sources.display()
        ))
        .into());
    }
    Ok(sources.canonicalize()?)
}

fn write_project(dir: &Path, args: &NewArgs, sdk: &Sdk) -> anyhow::Result<()> {
    let mut values: HashMap<&str, String> = HashMap::from([
        ("name", args.name.clone()),
        ("crate", args.name.replace('-', "_")),
        ("type", type_name(&args.name)),
        ("moat_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("sdk_package", sdk_package(args.lang).to_owned()),
    ]);
    let vendor = dir.join(VENDOR);
    let (templates, snippets) = match args.lang {
        Lang::Rust => (RUST, &RUST_SNIPPETS),
        Lang::Python => (PYTHON, &PYTHON_SNIPPETS),
        Lang::Typescript => (TYPESCRIPT, &TYPESCRIPT_SNIPPETS),
    };
    match (args.lang, sdk) {
        (Lang::Rust, Sdk::Vendored(sources)) => {
            let workspace = Workspace::read(sources)?;
            let mut crates = Vec::new();
            let version = vendor_crate(&workspace, "moat-guest", &vendor, &mut crates)?;
            copy_tree(&sources.join("wit"), &vendor.join("wit"))?;
            // The versions moat's own build locks, which the SDK is tested
            // with (and, on a machine that built moat, already downloaded):
            // the project's first build trims the lock to what it uses.
            if let Ok(lock) = std::fs::read_to_string(sources.join("Cargo.lock")) {
                std::fs::write(dir.join("Cargo.lock"), lock)?;
            }
            values.insert("sdk_version", version);
            values.insert("patches", patch_lines(&crates));
        }
        (Lang::Rust, Sdk::Local(path)) => {
            // The checkout's lock, as above.
            if let Some(root) = path.ancestors().find(|d| d.join("Cargo.lock").is_file()) {
                std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))?;
            }
            values.insert("sdk_version", crate_version(path)?);
            values.insert(
                "patches",
                patch_lines(&[("moat-guest".to_owned(), path.display().to_string())]),
            );
        }
        (Lang::Typescript, sdk) => {
            let (spec, version) = match sdk {
                Sdk::Vendored(sources) => {
                    let package = sdk_in(sources, Lang::Typescript);
                    let tarball = pack_typescript(&package, &vendor)?;
                    values.insert("tarball", tarball.clone());
                    (format!("file:{VENDOR}/{tarball}"), npm_version(&package)?)
                }
                Sdk::Local(path) => (format!("file:{}", path.display()), npm_version(path)?),
            };
            values.insert("sdk_dependency", serde_json::to_string(&spec)?);
            values.insert("sdk_version", version);
        }
        (Lang::Python, sdk) => {
            let (expression, package) = match sdk {
                Sdk::Vendored(sources) => {
                    let package = sdk_in(sources, Lang::Python);
                    vendor_python(sources, &vendor)?;
                    (format!("\"$here/{VENDOR}/guest-sdk/python\""), package)
                }
                Sdk::Local(path) => (shell_quote(&path.display().to_string()), path.clone()),
            };
            let pyproject = read_toml(&package.join("pyproject.toml"))?;
            let requirements = pyproject
                .get("project")
                .and_then(|p| p.get("dependencies"))
                .and_then(|d| d.as_array())
                .map(|d| d.iter().filter_map(|r| r.as_str()).collect::<Vec<_>>())
                .unwrap_or_default();
            values.insert("sdk_path", expression);
            values.insert("requirements", requirements.join("\n"));
            values.insert(
                "sdk_version",
                str_at(&pyproject, &["project", "version"])
                    .unwrap_or("0.0.0")
                    .to_owned(),
            );
        }
    }
    if let Sdk::Local(path) = sdk {
        values.insert("sdk_dir", path.display().to_string());
    }
    let (note, patch) = match sdk {
        Sdk::Vendored(_) => (snippets.vendored_note, snippets.vendored_patch),
        Sdk::Local(_) => (snippets.local_note, snippets.local_patch),
    };
    let note = render(note, &values)?;
    let patch = render(patch, &values)?;
    values.insert("sdk_note", note.trim_end().to_owned());
    values.insert("sdk_patch", patch);
    for template in templates {
        if template.when == When::Vendored && !matches!(sdk, Sdk::Vendored(_)) {
            continue;
        }
        let path = dir.join(render(template.path, &values)?);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, render(template.text, &values)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if template.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

/// `{{key}}` in `text` replaced by `values[key]`, in one pass (what is put
/// in is not read again); a key with no value is an error.
fn render(text: &str, values: &HashMap<&str, String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            bail!("a template has an unclosed {{{{");
        };
        let key = &after[..end];
        match values.get(key) {
            Some(value) => out.push_str(value),
            None => bail!("a template names {{{{{key}}}}}, which has no value"),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `name = { path = "…" }` lines of a `[patch.crates-io]` section.
fn patch_lines(crates: &[(String, String)]) -> String {
    crates
        .iter()
        .map(|(name, path)| {
            format!(
                "{name} = {{ path = {} }}",
                toml::Value::String(path.clone())
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` as one word for bash.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `hello-agent` → `HelloAgent`.
fn type_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_types() {
        assert_eq!(type_name("hello-agent"), "HelloAgent");
        assert_eq!(type_name("x2"), "X2");
    }

    #[test]
    fn rendering_puts_values_in_once_and_refuses_unknown_keys() {
        let values = HashMap::from([("a", "{{b}}".to_owned()), ("b", "x".to_owned())]);
        assert_eq!(render("<{{a}}|{{b}}>", &values).unwrap(), "<{{b}}|x>");
        assert!(render("{{c}}", &values).is_err());
        assert!(render("{{a", &values).is_err());
    }

    #[test]
    fn every_template_names_only_known_values() {
        let values: HashMap<&str, String> = [
            "name",
            "crate",
            "type",
            "moat_version",
            "sdk_package",
            "sdk_version",
            "sdk_dir",
            "sdk_note",
            "sdk_patch",
            "patches",
            "tarball",
            "sdk_dependency",
            "sdk_path",
            "requirements",
        ]
        .into_iter()
        .map(|k| (k, String::new()))
        .collect();
        let snippets = [&RUST_SNIPPETS, &PYTHON_SNIPPETS, &TYPESCRIPT_SNIPPETS];
        for template in RUST.iter().chain(PYTHON).chain(TYPESCRIPT) {
            render(template.text, &values).unwrap();
            render(template.path, &values).unwrap();
        }
        for s in snippets {
            for text in [
                s.vendored_note,
                s.local_note,
                s.vendored_patch,
                s.local_patch,
            ] {
                render(text, &values).unwrap();
            }
        }
    }

    #[test]
    fn the_vendored_sdk_crate_has_a_manifest_of_its_own() {
        let sources = moat_sources();
        let workspace = Workspace::read(&sources).unwrap();
        let vendor = std::env::temp_dir().join(format!("moat-new-vendor-{}", std::process::id()));
        let mut crates = Vec::new();
        let version = vendor_crate(&workspace, "moat-guest", &vendor, &mut crates).unwrap();
        let manifest = std::fs::read_to_string(vendor.join("guest-sdk/Cargo.toml")).unwrap();
        let _ = std::fs::remove_dir_all(&vendor);
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        let names: Vec<&str> = crates.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["moat-guest", "moat-process-model"]);
        assert_eq!(crates[0].1, "vendor/guest-sdk");
        let parsed: toml::Table = toml::from_str(&manifest).unwrap();
        assert!(
            manifest
                .lines()
                .all(|l| l.starts_with('#') || !l.contains("workspace")),
            "{manifest}"
        );
        assert_eq!(
            str_at(&parsed, &["package", "version"]),
            Some(version.as_str())
        );
        assert_eq!(
            str_at(&parsed, &["dependencies", "moat-process-model", "version"]),
            Some(version.as_str())
        );
        assert!(
            parsed["dependencies"]["wit-bindgen"]
                .get("version")
                .is_some()
        );
        assert!(parsed.get("dev-dependencies").is_none() && parsed.get("lints").is_none());
    }
}
