//! `moat inspect`: what a component is and what it asks for.

use std::process::ExitCode;

use bytesize::ByteSize;
use serde_json::json;

use moat::engine::Adapter;
use moat::sandbox::{CacheOutcome, Sandbox};

use crate::cli::args::InspectArgs;
use crate::cli::resolve;

pub async fn inspect(sandbox: &Sandbox, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let adapter = resolve::adapter(sandbox, &args.adapter).await?;
    let info = adapter.info();
    let details = adapter.details();
    let cache = match &details.cache {
        CacheOutcome::Hit => "hit".to_string(),
        CacheOutcome::Miss => "miss (compiled and stored)".to_string(),
        CacheOutcome::Replaced(reason) => format!("replaced ({reason})"),
        CacheOutcome::Uncached(reason) => format!("not cached ({reason})"),
    };
    if args.json {
        let value = json!({
            "name": info.name,
            "version": info.version,
            "description": info.description,
            "origin": details.origin,
            "contract": format!("moat:adapter@{}", details.contract),
            "sizeBytes": details.size_bytes,
            "needs": info.needs,
            "toolPatterns": info.tool_patterns,
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
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    println!("name         {}", info.name);
    println!("version      {}", info.version);
    println!("description  {}", info.description);
    println!("origin       {}", details.origin);
    println!("contract     moat:adapter@{}", details.contract);
    println!(
        "size         {}",
        ByteSize::b(details.size_bytes).display().iec()
    );
    println!("needs hosts  {}", list(&info.needs.hosts));
    println!("needs env    {}", list(&info.needs.env));
    println!("needs run    {}", list(&info.needs.programs));
    println!("imports      {}", list(&details.imports));
    match &details.cache_path {
        Some(path) => println!("cache        {cache} ({})", path.display()),
        None => println!("cache        {cache}"),
    }
    Ok(ExitCode::SUCCESS)
}
