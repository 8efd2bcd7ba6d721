//! `moat new NAME --lang …`: a ready adapter project — sources, a build
//! script, one test and a README — that builds and runs with no edits.
//! The templates are in `host/cli/templates/<lang>/`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::UsageError;
use crate::args::{Lang, NewArgs};

/// A template file: where it goes in the project, and its text.
struct Template {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

const RUST: &[Template] = &[
    Template {
        path: "Cargo.toml",
        text: include_str!("../../templates/rust/Cargo.toml.tmpl"),
        executable: false,
    },
    Template {
        path: "src/lib.rs",
        text: include_str!("../../templates/rust/src/lib.rs.tmpl"),
        executable: false,
    },
    Template {
        path: "build.sh",
        text: include_str!("../../templates/rust/build.sh.tmpl"),
        executable: true,
    },
    Template {
        path: "README.md",
        text: include_str!("../../templates/rust/README.md.tmpl"),
        executable: false,
    },
    Template {
        path: ".gitignore",
        text: include_str!("../../templates/rust/gitignore.tmpl"),
        executable: false,
    },
];

const PYTHON: &[Template] = &[
    Template {
        path: "{{crate}}.py",
        text: include_str!("../../templates/python/adapter.py.tmpl"),
        executable: false,
    },
    Template {
        path: "build.sh",
        text: include_str!("../../templates/python/build.sh.tmpl"),
        executable: true,
    },
    Template {
        path: "test.sh",
        text: include_str!("../../templates/python/test.sh.tmpl"),
        executable: true,
    },
    Template {
        path: "README.md",
        text: include_str!("../../templates/python/README.md.tmpl"),
        executable: false,
    },
    Template {
        path: ".gitignore",
        text: include_str!("../../templates/python/gitignore.tmpl"),
        executable: false,
    },
];

const TYPESCRIPT: &[Template] = &[
    Template {
        path: "package.json",
        text: include_str!("../../templates/typescript/package.json.tmpl"),
        executable: false,
    },
    Template {
        path: "tsconfig.json",
        text: include_str!("../../templates/typescript/tsconfig.json.tmpl"),
        executable: false,
    },
    Template {
        path: "src/adapter.ts",
        text: include_str!("../../templates/typescript/src/adapter.ts.tmpl"),
        executable: false,
    },
    Template {
        path: "build.sh",
        text: include_str!("../../templates/typescript/build.sh.tmpl"),
        executable: true,
    },
    Template {
        path: "test.sh",
        text: include_str!("../../templates/typescript/test.sh.tmpl"),
        executable: true,
    },
    Template {
        path: "README.md",
        text: include_str!("../../templates/typescript/README.md.tmpl"),
        executable: false,
    },
    Template {
        path: ".gitignore",
        text: include_str!("../../templates/typescript/gitignore.tmpl"),
        executable: false,
    },
];

/// Where this moat's own guest SDKs are, when it runs from its repository
/// (or a copy of it kept beside the binary's sources).
fn bundled_sdk(lang: Lang) -> PathBuf {
    let sdk = match lang {
        Lang::Rust => "guest-sdk",
        Lang::Python => "guest-sdk/python",
        Lang::Typescript => "guest-sdk/typescript",
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(sdk)
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
        Some(sdk) => sdk.clone(),
        None => bundled_sdk(args.lang),
    };
    let sdk = sdk.canonicalize().map_err(|_| {
        UsageError(format!(
            "moat's guest SDK is not at {}: pass --sdk with its path (guest-sdk/ in moat's repository)",
            sdk.display()
        ))
    })?;
    let values = Values {
        name: &args.name,
        crate_name: &args.name.replace('-', "_"),
        type_name: &type_name(&args.name),
        sdk: &sdk.display().to_string(),
    };
    let templates = match args.lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Typescript => TYPESCRIPT,
    };
    for template in templates {
        let path = dir.join(values.render(template.path));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, values.render(template.text))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        if template.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    println!(
        "created {} ({:?} adapter {})",
        dir.display(),
        args.lang,
        args.name
    );
    println!(
        "  cd {} && ./build.sh && moat run ./{}.wasm \"hi\"",
        dir.display(),
        args.name
    );
    Ok(ExitCode::SUCCESS)
}

/// What the templates' `{{…}}` stand for.
struct Values<'a> {
    name: &'a str,
    crate_name: &'a str,
    type_name: &'a str,
    sdk: &'a str,
}

impl Values<'_> {
    fn render(&self, text: &str) -> String {
        text.replace("{{name}}", self.name)
            .replace("{{crate}}", self.crate_name)
            .replace("{{type}}", self.type_name)
            .replace("{{sdk}}", self.sdk)
    }
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
}
