//! `moat adapters`: what is built in.

use std::process::ExitCode;

use moat::builtin;
use moat::engine::Adapter;
use moat::sandbox::Sandbox;

use crate::cli::resolve;

pub async fn adapters(sandbox: &Sandbox) -> anyhow::Result<ExitCode> {
    for name in builtin::names() {
        let adapter = resolve::adapter(sandbox, name).await?.adapter;
        let info = adapter.info();
        println!("{:<14} {:<9} {}", info.name, info.version, info.description);
    }
    println!("\nAny other adapter: moat run ./path/to/adapter.wasm \"prompt\"");
    Ok(ExitCode::SUCCESS)
}
