//! From what the user typed to a loaded adapter and its grants.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use moat_builtins as builtin;
use moat_engine::{Adapter, McpServers, RunLimits, SettingNames};
use moat_grants::{GrantSources, Grants, Provenance, TrustLevel};
use moat_installed::Catalog;
use moat_sandbox::{
    Confinement, Containment, LoadError, MAX_MEMORY_CEILING, RunScope, Sandbox, SandboxConfig,
    WasmAdapter,
};

use super::UsageError;
use super::args::{Cli, Command, GrantFlags};
use super::names::FlagNames;

/// A loaded adapter and where it came from.
#[derive(Clone)]
pub struct Resolved {
    pub adapter: WasmAdapter,
    pub provenance: Provenance,
    /// What moat knows of it when it is a built-in.
    pub profile: Option<&'static builtin::Profile>,
    /// The grants the user accepted when installing it, when it is an
    /// installed adapter (`moat adapter install`).
    pub accepted: Option<Grants>,
}

impl Resolved {
    /// How long its runs may take when the user sets no `--timeout`.
    pub fn default_timeout(&self) -> Duration {
        self.profile.map_or(RunLimits::DEFAULT_TIMEOUT, |profile| {
            profile.default_timeout
        })
    }
}

/// How many sessions a command other than `serve` runs at once at most:
/// its pool's size.
pub const COMMAND_SESSIONS: usize = 64;

/// The pool of a `moat run`: its run, the instance that reads the
/// adapter's `info()` first, and room for the fresh session of a resume
/// fallback while the first one closes.
const RUN_SESSIONS: u32 = 4;

/// The process's sandbox, with the cache settings from the flags.
pub fn sandbox(cli: &Cli) -> anyhow::Result<Sandbox> {
    let mut config = SandboxConfig::default();
    if cli.no_cache {
        config.cache_dir = None;
    } else if let Some(dir) = &cli.cache_dir {
        config.cache_dir = Some(dir.clone());
    }
    // `info()` runs under the cap of the runs: a `moat run` gets its
    // `--max-memory`; `parallel` tasks may each set theirs and `inspect`
    // only describes, so they get the ceiling.
    config.info_max_memory_bytes = match &cli.command {
        Command::Run(args) => args.run.max_memory,
        _ => MAX_MEMORY_CEILING,
    };
    // One command runs a handful of sessions at most; a server as many as
    // its clients start (the library's default pool).
    config.pool_sessions = match &cli.command {
        Command::Serve(_) => config.pool_sessions,
        // One run, and the instance its `info()` is read from: a pool
        // for 64 would cost every `moat run` the mappings of 64.
        Command::Run(_) => RUN_SESSIONS,
        // Each of its runs, and the instance each job's adapter is loaded
        // through.
        Command::Worker(args) => u32::from(args.max_runs).saturating_mul(2),
        _ => COMMAND_SESSIONS as _,
    };
    // This process starts no children but runs': orphans it adopts are
    // theirs. An operator's switch (docs/security.md), `MOAT_RUN_CGROUPS=0`,
    // keeps runs out of cgroups of their own.
    config.containment = Containment {
        cgroups: std::env::var_os("MOAT_RUN_CGROUPS").is_none_or(|v| v != "0"),
        adopt_orphans: true,
    };
    Sandbox::new(config).context("cannot start the sandbox")
}

/// Loads a built-in adapter by name, or a component by path. A name that
/// is neither gets a message listing what exists.
pub async fn adapter(sandbox: &Sandbox, name_or_path: &str) -> anyhow::Result<Resolved> {
    if let Some(bytes) = builtin::component(name_or_path) {
        let adapter = sandbox
            .load_bytes("built-in".into(), bytes.to_vec())
            .await
            .with_context(|| format!("the built-in adapter `{name_or_path}` failed to load"))?;
        return Ok(Resolved {
            adapter,
            provenance: Provenance::BuiltIn,
            profile: builtin::profile(name_or_path),
            accepted: None,
        });
    }
    if let Some(resolved) = installed(sandbox, name_or_path).await? {
        return Ok(resolved);
    }
    let path = Path::new(name_or_path);
    let looks_like_path =
        name_or_path.contains('/') || name_or_path.ends_with(".wasm") || path.exists();
    if !looks_like_path {
        let known: Vec<_> = builtin::names().collect();
        return Err(UsageError(format!(
            "unknown adapter `{name_or_path}`: not a built-in ({}), not installed (`moat adapter list`) and not a file; pass a path to a .wasm component",
            known.join(", ")
        ))
        .into());
    }
    let adapter = sandbox.load_file(path).await.map_err(|error| {
        let hint = match &error {
            LoadError::Info {
                limit: Some(limit), ..
            } => format!("; raise it with {}", FlagNames.setting(*limit)),
            _ => String::new(),
        };
        UsageError(format!("cannot load {name_or_path}: {error}{hint}"))
    })?;
    Ok(Resolved {
        adapter,
        provenance: Provenance::Loaded,
        profile: None,
        accepted: None,
    })
}

/// The bytes of the component `name_or_path` names, found as
/// [`adapter`] finds it: `None` for a built-in (moat carries those).
pub fn component_bytes(name_or_path: &str) -> anyhow::Result<Option<Vec<u8>>> {
    if builtin::component(name_or_path).is_some() {
        return Ok(None);
    }
    if moat_installed::valid_name(name_or_path)
        && let Ok(catalog) = catalog()
        && let Some((_, bytes)) = catalog
            .load(name_or_path)
            .map_err(|e| UsageError(e.to_string()))?
    {
        return Ok(Some(bytes));
    }
    let bytes = std::fs::read(name_or_path)
        .map_err(|e| UsageError(format!("cannot read {name_or_path}: {e}")))?;
    Ok(Some(bytes))
}

/// The installed adapters' catalog (`MOAT_DATA_DIR`, else the user's data
/// directory).
pub fn catalog() -> anyhow::Result<Catalog> {
    Catalog::default_dir().map(Catalog::new).ok_or_else(|| {
        UsageError("no home directory for installed adapters: set MOAT_DATA_DIR".into()).into()
    })
}

/// The installed adapter `name`, loaded after its bytes are checked
/// against the hash recorded when it was installed.
async fn installed(sandbox: &Sandbox, name: &str) -> anyhow::Result<Option<Resolved>> {
    if !moat_installed::valid_name(name) {
        return Ok(None);
    }
    let Ok(catalog) = catalog() else {
        return Ok(None);
    };
    let Some((manifest, bytes)) = catalog.load(name).map_err(|e| UsageError(e.to_string()))? else {
        return Ok(None);
    };
    let adapter = sandbox
        .load_bytes(format!("installed:{name}"), bytes)
        .await
        .map_err(|error| {
            UsageError(format!("cannot load the installed adapter {name}: {error}"))
        })?;
    Ok(Some(Resolved {
        adapter,
        provenance: Provenance::Loaded,
        profile: None,
        accepted: Some(manifest.grants),
    }))
}

/// Where a run's grants come from, for `resolved` under `trust` with the
/// working directory `cwd` (already canonical) and the grant flags.
pub fn grant_sources(
    resolved: &Resolved,
    trust: TrustLevel,
    cwd: Option<&str>,
    directories: &[String],
    flags: &GrantFlags,
) -> anyhow::Result<GrantSources> {
    let info = resolved.adapter.info();
    let policy = match &flags.policy {
        Some(policy) => policy
            .for_adapter(&info.name, &resolved.adapter.details().sha256)
            .map_err(|e| UsageError(e.to_string()))?,
        None => Default::default(),
    };
    // An installed adapter's accepted grants stand as its own policy.
    let mut policy_grants = policy.grants;
    if let Some(accepted) = &resolved.accepted {
        policy_grants.merge(accepted);
    }
    Ok(GrantSources {
        provenance: resolved.provenance,
        trust,
        cwd: cwd.map(PathBuf::from),
        directories: directories.iter().map(PathBuf::from).collect(),
        grant_declared: flags.grant_declared || policy.grant_declared,
        policy: policy_grants,
        flags: flags.grants(),
    })
}

/// The grants of a run (see [`grant_sources`]).
pub fn grants(
    resolved: &Resolved,
    trust: TrustLevel,
    cwd: Option<&str>,
    directories: &[String],
    flags: &GrantFlags,
) -> anyhow::Result<Grants> {
    let sources = grant_sources(resolved, trust, cwd, directories, flags)?;
    let grants = sources
        .effective(resolved.adapter.needs())
        .map_err(|e| UsageError(format!("the adapter's declared needs: {e}")))?;
    Ok(grants)
}

/// The scope of a run of `resolved`: its grants (see [`grants`]) and its
/// trust level.
pub fn scope(
    resolved: &Resolved,
    trust: TrustLevel,
    cwd: Option<&str>,
    directories: &[String],
    flags: &GrantFlags,
) -> anyhow::Result<RunScope> {
    let grants = grants(resolved, trust, cwd, directories, flags)?;
    let confinement = confinement(resolved, flags);
    if !grants.run.is_empty()
        && confinement != Confinement::Off
        && !moat_sandbox::landlock_available()
    {
        eprintln!(
            "moat: warning: this kernel has no Landlock: the programs the run starts have all of your rights (docs/security.md)"
        );
    }
    Ok(RunScope {
        grants,
        trust,
        confinement,
        // Nested runs are `moat serve`'s (docs/protocol.md).
        children: None,
    })
}

/// The scope of a `moat run` of `resolved` with `flags` (see [`scope`]),
/// its MCP servers' programs checked against it.
pub fn run_scope(resolved: &Resolved, flags: &crate::args::RunFlags) -> anyhow::Result<RunScope> {
    let scope = scope(
        resolved,
        flags.trust,
        flags.cwd.as_deref(),
        &flags.add_dirs,
        &flags.grants,
    )?;
    check_mcp_programs(flags.mcp_config.as_ref(), &scope.grants)?;
    Ok(scope)
}

/// Refuses MCP servers whose programs the run may not start: a stdio
/// server is a program like any other, granted by `--allow-run`.
pub fn check_mcp_programs(servers: Option<&McpServers>, grants: &Grants) -> anyhow::Result<()> {
    for (name, command) in servers.into_iter().flat_map(McpServers::programs) {
        if !grants.run.iter().any(|granted| granted == command) {
            return Err(UsageError(format!(
                "the MCP server {name} runs {command}, which this run may not start: add --allow-run {command}"
            ))
            .into());
        }
    }
    Ok(())
}

/// How the programs a run of `resolved` starts are contained: to the run's
/// grants and the places a built-in's programs keep their state, unless
/// `--no-contain`.
pub fn confinement(resolved: &Resolved, flags: &GrantFlags) -> Confinement {
    if flags.no_contain {
        return Confinement::Off;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (resolved.profile, home) {
        (Some(profile), Some(home)) => {
            let (state_dirs, state_files) =
                profile.state_paths(&home, |name| std::env::var_os(name));
            Confinement::Contained {
                state_dirs,
                state_files,
            }
        }
        _ => Confinement::default(),
    }
}

/// The run store the flags name (or the default one), opened: its runs of
/// moat processes that are gone are failed now.
pub fn store(cli_store: Option<&Path>) -> anyhow::Result<std::sync::Arc<moat_store::Store>> {
    let path = match cli_store {
        Some(path) => path.to_path_buf(),
        None => moat_store::Store::default_path().ok_or_else(|| {
            UsageError("no home directory for the run store: pass --store PATH".into())
        })?,
    };
    let store = moat_store::Store::open(&path)
        .map_err(|error| anyhow::anyhow!("{error}; --store PATH uses another, --no-store none"))?;
    Ok(std::sync::Arc::new(store))
}
