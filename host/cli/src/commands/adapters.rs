//! `moat adapters`: what is built in (and whether the programs the
//! built-in CLI adapters run are installed), then what the user installed.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use moat_builtins as builtin;
use moat_engine::Adapter;
use moat_launch::Resolver;
use moat_sandbox::Sandbox;

use crate::args::{AdapterListArgs, ListFormat};
use crate::wiring;

/// How long a program's `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest version line shown.
const MAX_VERSION: usize = 120;

/// `moat adapters` (and `moat adapter list`): every adapter a run may
/// name, built-in then installed.
pub async fn adapters(sandbox: &Sandbox, args: &AdapterListArgs) -> anyhow::Result<ExitCode> {
    let path = std::env::var_os("PATH");
    let resolver = Resolver::new(sandbox.clone());
    let mut builtins = Vec::new();
    for name in builtin::names() {
        let adapter = resolver
            .resolve(name)
            .await
            .map_err(wiring::resolve_error)?
            .adapter;
        let programs: Vec<String> = adapter.needs().programs.clone();
        builtins.push((adapter.info().clone(), programs));
    }
    // Installed adapters: from their manifests (`moat adapter inspect`
    // checks their bytes).
    let installed = moat_launch::catalog()
        .map_err(anyhow::Error::from)
        .and_then(|catalog| Ok(catalog.list()?));
    if args.output == ListFormat::Json {
        let mut listed: Vec<serde_json::Value> = builtins
            .iter()
            .map(|(info, programs)| {
                serde_json::json!({
                    "name": info.name,
                    "version": info.version,
                    "description": info.description,
                    "builtIn": true,
                    "programs": programs,
                })
            })
            .collect();
        for manifest in installed? {
            let mut entry = serde_json::to_value(&manifest)?;
            entry["builtIn"] = false.into();
            listed.push(entry);
        }
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (info, programs) in &builtins {
        println!("{:<14} {:<9} {}", info.name, info.version, info.description);
        for program in programs {
            println!("{:<24} {}", "", availability(program, path.as_deref()));
        }
    }
    match installed {
        Ok(installed) if !installed.is_empty() => {
            println!("\ninstalled (moat adapter install|inspect|remove):");
            for manifest in installed {
                println!(
                    "{:<14} {:<9} {}  {}",
                    manifest.name,
                    manifest.version,
                    &manifest.sha256[..12.min(manifest.sha256.len())],
                    crate::render::safe::text(&manifest.description)
                );
            }
        }
        Ok(_) => println!(
            "\nnone installed; `moat adapter install FILE.wasm --sha256 H` installs one by name"
        ),
        Err(error) => println!("\ninstalled adapters: cannot list them ({error:#})"),
    }
    println!("\nAny other adapter: moat run ./path/to/adapter.wasm \"prompt\"");
    Ok(ExitCode::SUCCESS)
}

/// "claude: /usr/bin/claude (2.1.197 (Claude Code))", or where to get a
/// program that is not on PATH.
pub(crate) fn availability(program: &str, path: Option<&OsStr>) -> String {
    match moat_grants::programs::locate(program, path) {
        Some(found) => match version(&found) {
            Some(version) => format!("{program}: {} ({version})", found.display()),
            None => format!("{program}: {} (version unknown)", found.display()),
        },
        None => match builtin::install_hint(program) {
            Some(hint) => format!("{program}: not installed (not on PATH); install: {hint}"),
            None => format!("{program}: not installed (not on PATH)"),
        },
    }
}

/// The first line `program --version` prints, within [`VERSION_TIMEOUT`].
fn version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // A program that hangs on --version is reported as unknown.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut output = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut output).ok()?;
    let line = output
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    Some(line.chars().take(MAX_VERSION).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn an_installed_program_shows_its_path_and_version() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "claude", "echo '2.1.197 (Claude Code)'");
        let line = availability("claude", Some(dir.path().as_os_str()));
        assert_eq!(
            line,
            format!(
                "claude: {} (2.1.197 (Claude Code))",
                dir.path().join("claude").display()
            )
        );
    }

    #[test]
    fn a_missing_program_says_how_to_install_it() {
        let dir = tempfile::tempdir().unwrap();
        // Not executable: not a program.
        std::fs::write(dir.path().join("codex"), "").unwrap();
        let line = availability("codex", Some(dir.path().as_os_str()));
        assert_eq!(
            line,
            "codex: not installed (not on PATH); install: npm install -g @openai/codex"
        );
        assert!(availability("nothing-here", None).ends_with("(not on PATH)"));
    }
}
