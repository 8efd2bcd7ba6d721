//! `moat inspect`: what a component is, what it asks for, and what a run
//! of it would be granted.

use std::process::ExitCode;

use bytesize::ByteSize;
use serde_json::json;

use moat_contain::NetworkContainment;
use moat_engine::Adapter;
use moat_grants::Confinement;
use moat_grants::programs::GrantedPrograms;
use moat_grants::{GrantSources, Grants, Provenance};
use moat_launch::Resolver;
use moat_sandbox::{CacheOutcome, Sandbox};

use crate::args::InspectArgs;
use crate::wiring;

/// What the `refused` line says: what no grant gives.
const REFUSED_NOTE: &str =
    "raw sockets and name lookups, always: the network is HTTP(S) to granted hosts only";

pub async fn inspect(sandbox: &Sandbox, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let resolved = Resolver::new(sandbox.clone())
        .resolve(&args.adapter)
        .await
        .map_err(wiring::resolve_error)?;
    // What `moat run` with the same flags would give it.
    let request = args.request.request().map_err(wiring::request_error)?;
    let ceiling = request.own_ceiling("moat run");
    let sources = ceiling
        .sources(&resolved)
        .map_err(|e| crate::UsageError(e.to_string()))?;
    let needs = resolved.adapter.needs();
    // What a run would get: the allowance (a built-in's vendor key by
    // reference among it), as `moat run` computes it.
    let grants = ceiling
        .allowance(&resolved)
        .map_err(|e| crate::UsageError(e.to_string()))?;
    let declares_needs = !Grants::from_needs(needs)?.is_empty();
    let origins = grant_origins(
        &sources,
        declares_needs,
        request.policy.as_ref().map(|p| p.path()),
    );
    let adapter = &resolved.adapter;
    let info = adapter.info();
    let details = adapter.details();
    let cache = match &details.cache {
        CacheOutcome::Hit => "hit".to_string(),
        CacheOutcome::Miss => "miss (compiled and stored)".to_string(),
        CacheOutcome::Replaced(reason) => format!("replaced ({reason})"),
        CacheOutcome::Uncached(reason) => format!("not cached ({reason})"),
    };
    let timeout = humantime::format_duration(resolved.default_timeout()).to_string();
    let confinement = ceiling.confinement(&resolved);
    if args.json {
        let value = json!({
            "name": info.name,
            "version": info.version,
            "description": info.description,
            "origin": details.origin,
            "builtIn": resolved.provenance == Provenance::BuiltIn,
            "contract": format!("moat:adapter@{}", details.contract),
            "sizeBytes": details.size_bytes,
            "sha256": details.sha256,
            "needs": needs,
            "grants": grants,
            "grantsFrom": origins,
            "programs": programs_json(&grants),
            "alwaysRefused": ["sockets"],
            "toolPatterns": info.tool_patterns,
            "defaultTimeout": timeout,
            "containment": containment_json(&confinement),
            "imports": details.imports,
            "cache": {
                "hit": details.cache == CacheOutcome::Hit,
                "state": cache,
                "path": details.cache_path,
            },
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("name         {}", info.name);
    println!("version      {}", info.version);
    println!("description  {}", info.description);
    println!("origin       {}", details.origin);
    println!("contract     moat:adapter@{}", details.contract);
    println!(
        "size         {}",
        ByteSize::b(details.size_bytes).display().iec()
    );
    println!("sha256       {}", details.sha256);
    println!("needs hosts  {}", list(&needs.hosts));
    println!("needs env    {}", list(&needs.env));
    println!("needs run    {}", list(&needs.programs));
    print_grants(&grants, &origins);
    let whose = if resolved.profile.is_some() {
        "the adapter's"
    } else {
        "moat's"
    };
    println!("timeout      {timeout} ({whose} default; --timeout sets another or none)");
    println!("contain      {}", containment_shown(&confinement));
    println!("network      {}", network_shown(&confinement));
    println!("imports      {}", list(&details.imports));
    match &details.cache_path {
        Some(path) => println!("cache        {cache} ({})", path.display()),
        None => println!("cache        {cache}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// What the programs a run starts may reach, in one line.
fn containment_shown(confinement: &Confinement) -> String {
    match confinement {
        Confinement::Off => "off (--no-contain): programs run with all of your rights".into(),
        Confinement::Contained {
            state_dirs,
            state_files,
            ..
        } => {
            let state: Vec<String> = state_dirs
                .iter()
                .chain(state_files)
                .map(|p| p.display().to_string())
                .collect();
            let kernel = if moat_contain::landlock_available() {
                ""
            } else {
                " — NOT ENFORCED: this kernel has no Landlock"
            };
            format!(
                "programs see the grants above, the system's programs and libraries (read), their install tree (read), a private temp dir, and their own state: {}{kernel}",
                list(&state)
            )
        }
    }
}

/// How the programs' network is held to the grants, in one line.
fn network_shown(confinement: &Confinement) -> String {
    match confinement {
        Confinement::Off => {
            "off (--no-contain): programs reach whatever your machine reaches".into()
        }
        Confinement::Contained { .. } => {
            let how = NetworkContainment::detect();
            format!(
                "only through moat's proxy, under the net grants above — {}",
                how.describe()
            )
        }
    }
}

fn containment_json(confinement: &Confinement) -> serde_json::Value {
    match confinement {
        Confinement::Off => json!({"contained": false, "network": "off"}),
        Confinement::Contained {
            state_dirs,
            state_files,
            ..
        } => json!({
            "contained": true,
            "enforced": moat_contain::landlock_available(),
            "network": NetworkContainment::detect().name(),
            "ownLoopback": NetworkContainment::detect().own_loopback(),
            "stateDirs": state_dirs,
            "stateFiles": state_files,
        }),
    }
}

fn print_grants(grants: &Grants, origins: &[String]) {
    let shown = |items: Vec<String>| list(&items);
    let dirs =
        |dirs: &[std::path::PathBuf]| shown(dirs.iter().map(|d| d.display().to_string()).collect());
    println!("grants from  {}", list(origins));
    println!(
        "grant net    {}",
        shown(grants.net.iter().map(ToString::to_string).collect())
    );
    println!("grant read   {}", dirs(&grants.read));
    println!("grant write  {}", dirs(&grants.write));
    println!("grant env    {}", list(&grants.env));
    println!("grant run    {}", list(&programs_shown(grants)));
    println!(
        "secrets      {}",
        shown(grants.secrets.iter().map(ToString::to_string).collect())
    );
    println!("unix sockets {}", dirs(&grants.unix_sockets));
    println!("protected    {}", dirs(&grants.write_protected));
    println!(
        "meter        {}",
        shown(grants.meter.iter().map(ToString::to_string).collect())
    );
    if grants.unmetered {
        println!("unmetered    model calls moat cannot read allowed under a budget");
    }
    println!("refused      {REFUSED_NOTE}");
}

/// Each granted program and where it would run from, found on PATH now as
/// a run would find it.
fn programs_json(grants: &Grants) -> serde_json::Value {
    let path = std::env::var_os("PATH");
    let programs = GrantedPrograms::resolve(&grants.run, path.as_deref(), &grants.write);
    programs
        .resolved()
        .map(|(grant, found)| json!({ "grant": grant, "path": found }))
        .collect()
}

/// Each granted program, with where it was found or that it was not.
fn programs_shown(grants: &Grants) -> Vec<String> {
    let path = std::env::var_os("PATH");
    let programs = GrantedPrograms::resolve(&grants.run, path.as_deref(), &grants.write);
    programs
        .resolved()
        .map(|(grant, found)| match found {
            Some(path) if path.as_os_str() != grant => format!("{grant} ({})", path.display()),
            Some(_) => grant.to_string(),
            None => format!("{grant} (not found)"),
        })
        .collect()
}

/// Which sources contribute to the grants, in merge order, for people.
fn grant_origins(
    sources: &GrantSources,
    declares_needs: bool,
    policy: Option<&std::path::Path>,
) -> Vec<String> {
    let mut origins = Vec::new();
    if declares_needs && sources.grants_declared_needs() {
        let why = if sources.provenance == Provenance::BuiltIn {
            "built-in"
        } else if sources.grant_declared {
            "grant-declared"
        } else {
            "trust unrestricted"
        };
        origins.push(format!("declared needs ({why})"));
    }
    if !sources.trust_preset().is_empty() {
        origins.push(format!("trust {} (--cwd)", sources.trust));
    }
    if let Some(path) = policy {
        origins.push(format!("policy {}", path.display()));
    }
    if !sources.flags.is_empty() {
        origins.push("--allow-* flags".into());
    }
    if origins.is_empty() {
        origins.push("nothing: deny by default".into());
    }
    origins
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
