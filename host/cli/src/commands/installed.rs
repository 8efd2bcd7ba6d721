//! `moat adapter install|list|remove|inspect`: adapters installed by name,
//! each with the grants its installer accepted (the catalog is
//! `moat-installed`'s).

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use moat_engine::Adapter;
use moat_grants::Grants;
use moat_installed::{Downloader, Manifest, sha256_hex, valid_name};
use moat_sandbox::Sandbox;

use crate::args::{AdapterCommand, InstallArgs};
use crate::{UsageError, render};

/// The largest component accepted for installing.
const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;
/// The most a download may take.
const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The subcommands that need no sandbox: `Some` when it was one of them.
pub fn without_sandbox(command: &AdapterCommand) -> Option<anyhow::Result<ExitCode>> {
    match command {
        AdapterCommand::Remove(args) => Some(remove(&args.name)),
        AdapterCommand::Inspect(args) => Some(inspect(&args.name)),
        AdapterCommand::Install(_) | AdapterCommand::List(_) => None,
    }
}

/// `moat adapter install` and `list` (the built-ins' `info()` is read
/// from their components).
pub async fn adapter(sandbox: &Sandbox, command: AdapterCommand) -> anyhow::Result<ExitCode> {
    match command {
        AdapterCommand::Install(args) => install(sandbox, *args).await,
        AdapterCommand::List(args) => super::adapters(sandbox, &args).await,
        other => without_sandbox(&other).unwrap_or_else(|| unreachable!("handled above")),
    }
}

async fn install(sandbox: &Sandbox, args: InstallArgs) -> anyhow::Result<ExitCode> {
    let shown = args.source.clone();
    let bytes = if shown.contains("://") {
        // Bounded while it arrives; checked below before anything reads
        // it or anything is written.
        Downloader::new(MAX_COMPONENT_BYTES, DOWNLOAD_TIMEOUT)
            .fetch(&shown)
            .await
            .map_err(|e| UsageError(e.to_string()))?
    } else {
        let size = std::fs::metadata(&shown)
            .map_err(|e| UsageError(format!("cannot read {shown}: {e}")))?
            .len();
        if size > MAX_COMPONENT_BYTES {
            return Err(UsageError(format!(
                "{shown} has {size} bytes; a component may have at most {MAX_COMPONENT_BYTES}"
            ))
            .into());
        }
        std::fs::read(&shown).map_err(|e| UsageError(format!("cannot read {shown}: {e}")))?
    };
    // Checked before anything else reads it, and before anything is written.
    let actual = sha256_hex(&bytes);
    if actual != args.sha256 {
        return Err(UsageError(format!(
            "{shown} has the SHA-256 {actual}, not {}: nothing was installed",
            args.sha256
        ))
        .into());
    }
    let adapter = sandbox
        .load_bytes(shown.clone(), bytes.clone())
        .await
        .map_err(|e| UsageError(format!("{shown} is not an adapter moat can run: {e}")))?;
    let info = adapter.info().clone();
    let name = args.name.clone().unwrap_or_else(|| info.name.clone());
    if !valid_name(&name) {
        return Err(UsageError(format!(
            "{name:?} cannot name an installed adapter: pass --name with lowercase letters, digits and `-`, starting with a letter"
        ))
        .into());
    }
    if moat_builtins::component(&name).is_some() {
        return Err(UsageError(format!(
            "{name} is a built-in adapter's name: pass --name with another"
        ))
        .into());
    }
    let declared = Grants::from_needs(adapter.needs())
        .map_err(|e| UsageError(format!("{shown} declares needs moat cannot grant: {e}")))?;
    let request = args
        .grants
        .request()
        .map_err(crate::wiring::request_error)?;
    let mut grants = request.grants.all();
    if args.yes {
        if request.grant_declared {
            grants.merge(&declared);
        }
    } else {
        println!(
            "{name} {} — {}",
            info.version,
            render::safe::text(&info.description)
        );
        println!("it asks for:");
        print_grants(&declared);
        if !grants.is_empty() {
            println!("and you grant it, with the flags:");
            print_grants(&grants);
        }
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(
                "accept these grants with --yes (it then gets exactly the --allow-* flags, and what it declares with --grant-declared)".into(),
            )
            .into());
        }
        print!("install it with these grants? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not installed");
            return Ok(ExitCode::FAILURE);
        }
        grants.merge(&declared);
    }
    let manifest = Manifest {
        name: name.clone(),
        version: info.version.clone(),
        description: info.description.clone(),
        sha256: actual,
        source: if shown.contains("://") {
            shown.clone()
        } else {
            std::path::absolute(&shown).map_or_else(|_| shown.clone(), |p| p.display().to_string())
        },
        installed_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        grants,
    };
    let catalog = catalog()?;
    let previous = catalog
        .install(&manifest, &bytes)
        .with_context(|| format!("cannot install {name}"))?;
    match previous {
        Some(old) => println!(
            "updated {name}: {} → {} ({})",
            old.version, manifest.version, manifest.sha256
        ),
        None => println!(
            "installed {name} {} ({})",
            manifest.version, manifest.sha256
        ),
    }
    println!("its runs get:");
    print_grants(&manifest.grants);
    Ok(ExitCode::SUCCESS)
}

fn remove(name: &str) -> anyhow::Result<ExitCode> {
    let removed = catalog()?
        .remove(name)
        .map_err(|e| UsageError(e.to_string()))?;
    if removed {
        println!("removed {name}");
        Ok(ExitCode::SUCCESS)
    } else {
        Err(UsageError(format!(
            "no adapter {name} is installed (`moat adapter list`)"
        ))
        .into())
    }
}

fn inspect(name: &str) -> anyhow::Result<ExitCode> {
    let catalog = catalog()?;
    let manifest = catalog
        .get(name)
        .map_err(|e| UsageError(e.to_string()))?
        .ok_or_else(|| {
            UsageError(format!(
                "no adapter {name} is installed (`moat adapter list`)"
            ))
        })?;
    println!("name         {}", manifest.name);
    println!("version      {}", manifest.version);
    println!("description  {}", render::safe::text(&manifest.description));
    println!("sha256       {}", manifest.sha256);
    println!("source       {}", render::safe::text(&manifest.source));
    println!("installed    {}", manifest.installed_at);
    print_grants(&manifest.grants);
    // The bytes are checked as every run checks them.
    match catalog.load(name) {
        Ok(_) => println!("bytes        match the recorded SHA-256"),
        Err(error) => {
            println!("bytes        CHANGED: {error}");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_grants(grants: &Grants) {
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    let dirs =
        |dirs: &[std::path::PathBuf]| list(dirs.iter().map(|d| d.display().to_string()).collect());
    println!(
        "  net    {}",
        list(grants.net.iter().map(ToString::to_string).collect())
    );
    println!("  read   {}", dirs(&grants.read));
    println!("  write  {}", dirs(&grants.write));
    println!("  env    {}", list(grants.env.clone()));
    println!("  run    {}", list(grants.run.clone()));
}

/// The installed adapters' catalog, or why there is none (exit 2).
fn catalog() -> anyhow::Result<moat_installed::Catalog> {
    moat_launch::catalog().map_err(|e| UsageError(e.to_string()).into())
}
