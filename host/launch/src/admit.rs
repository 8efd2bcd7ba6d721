//! Admission: where a grant becomes a capability, once. A run's request
//! is narrowed by the ceiling of whoever starts it and by its parent —
//! grants, trust and limits alike —, refused when it asks for more, and
//! its granted directories are opened now: the run reaches them through
//! these handles, never through their paths again.

use std::path::PathBuf;
use std::time::Duration;

use moat_engine::{Adapter, McpServers, RunLimits, RunOptions, Setting};
use moat_grants::Confinement;
use moat_grants::{GrantSources, Grants, OpenDirs, TrustLevel, canonical_dir, names};
use moat_runs::{RecordedLimits, RunId, RunRecord};

use crate::limits::{self, AskedLimits, ParentLimits, narrow};
use crate::refusal::{Bound, Refusal};
use crate::request::policy::{Policy, PolicyEntry};
use crate::resolve::Resolved;

/// How many levels of runs may hang below a run nobody nested.
pub const MAX_DEPTH: usize = 4;

/// How many children of one run may be live at once.
pub const MAX_LIVE_CHILDREN: usize = 16;

/// The most any run started under it may get: built once from the flags
/// (or settings) of whoever starts runs — `moat run`'s own flags, a
/// server's, a worker's, a workflow's.
#[derive(Debug, Clone)]
pub struct Ceiling {
    /// Who holds it, as refusals name them ("this server", "the
    /// workflow").
    pub holder: String,
    /// What the `--allow-*` flags grant.
    pub grants: Grants,
    /// A policy file's grants per adapter.
    pub policy: Option<Policy>,
    /// Whether a loaded component gets what it declares.
    pub grant_declared: bool,
    /// Whether the programs a run starts are contained to its grants
    /// (Landlock); off only when the user says so.
    pub contain: bool,
    /// The most trust a run may have; its presets are part of what the
    /// ceiling allows (see [`GrantSources`]).
    pub trust: TrustLevel,
    /// The working directory the trust presets apply to.
    pub cwd: Option<PathBuf>,
    /// The further directories the trust presets apply to.
    pub directories: Vec<PathBuf>,
    /// The most of each limit (a `None` timeout or fuel: no ceiling).
    pub limits: RunLimits,
    /// The most budget a run may have (`--max-budget-usd`, `--max-tokens`
    /// of a server or a worker); unbounded by default.
    pub budget: crate::Budget,
    /// Whether an answer to a run's request may give it more than these
    /// grants: true where whoever answers holds every right of this user
    /// (`moat run`, `moat parallel`: the person who started them), false
    /// where the ceiling bounds runs others start (a server, a worker, a
    /// workflow). A child is bounded by its parent's grants either way.
    pub answers_beyond: bool,
}

impl Ceiling {
    /// A ceiling held by `holder` that grants nothing, at the lowest
    /// trust, with a host's shared limits: set what it allows.
    pub fn new(holder: impl Into<String>) -> Self {
        Self {
            holder: holder.into(),
            grants: Grants::none(),
            policy: None,
            grant_declared: false,
            contain: true,
            trust: TrustLevel::Sandbox,
            cwd: None,
            directories: Vec::new(),
            limits: limits::shared_host(),
            answers_beyond: false,
            budget: crate::Budget::default(),
        }
    }

    /// Where a run of `resolved` gets its grants from here: its declared
    /// needs when it is a built-in, its installed grants, the policy, the
    /// trust presets and the flags (see [`GrantSources`]).
    pub fn sources(&self, resolved: &Resolved) -> Result<GrantSources, Refusal> {
        let policy = self.policy_entry(resolved)?;
        // An installed adapter's accepted grants stand as its own policy.
        let mut policy_grants = policy.grants;
        if let Some(accepted) = &resolved.accepted {
            policy_grants.merge(accepted);
        }
        Ok(GrantSources {
            provenance: resolved.provenance,
            trust: self.trust,
            cwd: self.cwd.clone(),
            directories: self.directories.clone(),
            grant_declared: self.grant_declared || policy.grant_declared,
            policy: policy_grants,
            flags: self.grants.clone(),
        })
    }

    /// What the policy file gives runs of `resolved` (nothing without one).
    pub fn policy_entry(&self, resolved: &Resolved) -> Result<PolicyEntry, Refusal> {
        match &self.policy {
            Some(policy) => policy
                .for_adapter(
                    &resolved.adapter.info().name,
                    resolved.sha256(),
                    matches!(resolved.source, crate::Source::BuiltIn(_)),
                )
                .map_err(|e| Refusal::Needs(e.to_string())),
            None => Ok(Default::default()),
        }
    }

    /// The most a run of `resolved` may be granted here: what `moat run`
    /// with these flags would give it (see [`Ceiling::sources`]).
    pub fn allowance(&self, resolved: &Resolved) -> Result<Grants, Refusal> {
        let mut grants = self
            .sources(resolved)?
            .effective(resolved.adapter.needs())
            .map_err(|e| Refusal::Needs(format!("the adapter's declared needs: {e}")))?;
        // A built-in's vendor key, by reference: granted as its needs are,
        // used when kept (the launcher drops it when not).
        for grant in declared_secrets(resolved) {
            if !grants.secrets.contains(&grant) {
                grants.secrets.push(grant);
            }
        }
        Ok(grants)
    }

    /// How the programs a run of `resolved` starts are contained: to the
    /// run's grants and the places a built-in's programs keep their
    /// state.
    pub fn confinement(&self, resolved: &Resolved) -> Confinement {
        if !self.contain {
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
                    read_only: Vec::new(),
                }
            }
            _ => Confinement::default(),
        }
    }

    /// Admits a run of `resolved` asking `asked` with `options`, under
    /// this ceiling and `parent`: its effective grants, trust and limits,
    /// its directories opened; or why not.
    pub fn admit(
        &self,
        resolved: &Resolved,
        options: &RunOptions,
        asked: &Asked,
        parent: Option<&ParentScope>,
    ) -> Result<Admission, Refusal> {
        let depth = match parent {
            Some(parent) if parent.depth >= MAX_DEPTH => {
                return Err(Refusal::Nesting(format!(
                    "runs nest at most {MAX_DEPTH} deep; {} is at that depth",
                    parent.id
                )));
            }
            Some(parent) => parent.depth + 1,
            None => 0,
        };
        let allowance = self.allowance(resolved)?;
        let grants = match &asked.grants {
            None => match parent {
                Some(parent) => allowance.intersect(&parent.grants),
                None => allowance.clone(),
            },
            Some(wanted) => {
                let wanted = canonical(wanted.clone()).map_err(Refusal::Dir)?;
                refuse_excess(&wanted, &allowance, Bound::Ceiling(self.holder.clone()))?;
                if let Some(parent) = parent {
                    refuse_excess(&wanted, &parent.grants, Bound::Parent(parent.id.clone()))?;
                }
                wanted
            }
        };
        let trust = self.narrow_trust(asked.trust, parent)?;
        // The policy's limits and budget for the adapter narrow the
        // ceiling's.
        let entry = self.policy_entry(resolved)?;
        let limits = narrow(
            &asked.limits,
            resolved.default_timeout(),
            &limits::lowered(&self.limits, &entry.limits),
            &self.holder,
            parent.map(ParentScope::limits).as_ref(),
        )?;
        let asked_budget = crate::Budget {
            usd: options.max_budget_usd,
            tokens: asked.limits.max_tokens,
            calls: asked.limits.max_model_calls,
        };
        let most = self.budget.min(crate::Budget {
            usd: entry.max_budget_usd,
            tokens: entry.limits.max_tokens,
            calls: entry.limits.max_model_calls,
        });
        let budget = crate::spending::narrow(
            asked_budget,
            most,
            &self.holder,
            parent.map(|parent| (&parent.id, parent.budget_left)),
        )?;
        let confinement = self.confinement(resolved);
        refuse_unheld(&asked.limits, &grants, &confinement)?;
        check_mcp_programs(options, &grants)?;
        let dirs = OpenDirs::open(&grants).map_err(Refusal::Dir)?;
        let approvable = match (self.answers_beyond, parent) {
            (true, None) => None,
            (true, Some(parent)) => Some(parent.grants.clone()),
            (false, None) => Some(allowance),
            (false, Some(parent)) => Some(allowance.intersect(&parent.grants)),
        };
        Ok(Admission {
            grants,
            trust,
            limits,
            confinement,
            dirs,
            depth,
            secrets: moat_contain::Secrets::default(),
            approvable,
            budget,
            budget_set_aside: !asked_budget.is_unbounded(),
            ask_tools: entry.ask_tools,
        })
    }

    fn narrow_trust(
        &self,
        asked: Option<TrustLevel>,
        parent: Option<&ParentScope>,
    ) -> Result<TrustLevel, Refusal> {
        let parents = parent.and_then(|p| p.trust.map(|trust| (trust, p.id.clone())));
        let Some(asked) = asked else {
            return Ok(parents.map_or(self.trust, |(trust, _)| trust.min(self.trust)));
        };
        if asked > self.trust {
            return Err(Refusal::Trust {
                asked,
                most: self.trust,
                bound: Bound::Ceiling(self.holder.clone()),
            });
        }
        if let Some((most, id)) = parents
            && asked > most
        {
            return Err(Refusal::Trust {
                asked,
                most,
                bound: Bound::Parent(id),
            });
        }
        Ok(asked)
    }
}

/// What a run asks for; each `None` is "all that is allowed" (grants,
/// trust) or the default (limits).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    /// Its grants; `None`: everything the ceiling and the parent allow.
    pub grants: Option<Grants>,
    /// Its trust level; `None`: the most the ceiling and the parent allow.
    pub trust: Option<TrustLevel>,
    /// Its limits.
    pub limits: AskedLimits,
}

/// What bounds a child: its parent's record.
#[derive(Debug, Clone, PartialEq)]
pub struct ParentScope {
    /// The parent.
    pub id: RunId,
    /// Its grants: a child gets at most these.
    pub grants: Grants,
    /// Its trust: a child's is at most this (`None`: not recorded).
    pub trust: Option<TrustLevel>,
    /// Its limits: a child's are at most these.
    pub limits: Option<RecordedLimits>,
    /// When its time runs out (ms since the Unix epoch).
    pub deadline_ms: Option<u64>,
    /// What is left of its budget for a child.
    pub budget_left: crate::Budget,
    /// How many runs hang above it.
    pub depth: usize,
}

impl ParentScope {
    /// The scope `record` gives its children; `depth`: how many runs hang
    /// above it.
    pub fn of(record: &RunRecord, depth: usize) -> Self {
        Self {
            id: record.id.clone(),
            grants: record.run.grants.clone(),
            trust: record.run.trust,
            limits: record.run.limits.clone(),
            deadline_ms: record.deadline_ms(),
            depth,
            budget_left: crate::Budget::of_record(record.run.limits.as_ref())
                .after(&record.spent.unwrap_or_default()),
        }
    }

    fn limits(&self) -> ParentLimits {
        ParentLimits {
            id: self.id.clone(),
            remaining: self.deadline_ms.map(|deadline| {
                Duration::from_millis(deadline.saturating_sub(moat_engine::now_ms()))
            }),
            limits: self
                .limits
                .clone()
                // A parent that recorded none (a workflow's record) bounds nothing.
                .unwrap_or_else(|| RecordedLimits::of(&limits::unbounded())),
        }
    }
}

/// A run admitted: exactly what it gets.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Its grants.
    pub grants: Grants,
    /// Its trust level.
    pub trust: TrustLevel,
    /// Its limits.
    pub limits: RunLimits,
    /// How the programs it starts are contained.
    pub confinement: Confinement,
    /// Its granted directories, opened.
    pub dirs: OpenDirs,
    /// How many runs hang above it.
    pub depth: usize,
    /// The values of its secret grants: resolved by the launcher that
    /// executes it, from its own secrets file; empty until then (a run
    /// sent to the cluster carries the names only).
    pub secrets: moat_contain::Secrets,
    /// The most an answer to its requests may give it: the ceiling's
    /// allowance and its parent's grants; `None`: anything (see
    /// [`Ceiling::answers_beyond`]).
    pub approvable: Option<Grants>,
    /// What it (with its children) may spend.
    pub budget: crate::Budget,
    /// It named its budget: held for it from its parent's.
    pub budget_set_aside: bool,
    /// The tools the policy file asks about before each call, for its
    /// adapter: the run asks whatever it was started with.
    pub ask_tools: Vec<String>,
}

/// The secret grants a built-in's profile declares (none for a component
/// from a path).
pub fn declared_secrets(resolved: &Resolved) -> Vec<moat_grants::SecretGrant> {
    resolved
        .profile
        .map(|profile| profile.secrets)
        .unwrap_or_default()
        .iter()
        .map(|text| {
            moat_grants::SecretGrant::parse(text).expect("a built-in's secret grant parses")
        })
        .collect()
}

fn refuse_excess(wanted: &Grants, bound: &Grants, whose: Bound) -> Result<(), Refusal> {
    let excess = wanted.excess_over(bound);
    if excess.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Grants {
            excess,
            bound: whose,
        })
    }
}

/// Grants as a caller wrote them, checked as the flags are: directories
/// absolute, existing and canonical; names well formed.
pub fn canonical(mut grants: Grants) -> Result<Grants, moat_grants::GrantError> {
    for dir in grants.read.iter_mut().chain(grants.write.iter_mut()) {
        if !dir.is_absolute() {
            return Err(moat_grants::GrantError::Dir {
                path: dir.clone(),
                reason: "not an absolute path".into(),
            });
        }
        *dir = canonical_dir(dir, None)?;
    }
    for name in &mut grants.env {
        *name = names::env_name(name)?;
    }
    for program in &mut grants.run {
        *program = names::program(program)?;
    }
    Ok(grants)
}

/// Refuses a limit of the programs asked for explicitly that this machine
/// cannot hold for programs contained as `confinement`, rather than run
/// them unlimited; a run that may start no program has none to hold.
fn refuse_unheld(
    asked: &AskedLimits,
    grants: &Grants,
    confinement: &Confinement,
) -> Result<(), Refusal> {
    if grants.run.is_empty() {
        return Ok(());
    }
    let here = moat_contain::program_limits_for(confinement);
    let wanted = asked.programs_asked();
    for (wanted, held, setting) in [
        (wanted.memory, here.memory, Setting::MaxMemory),
        (wanted.processes, here.processes, Setting::MaxProcesses),
        (wanted.cpus, here.cpus, Setting::Cpus),
    ] {
        if wanted && !held {
            return Err(Refusal::Unheld { setting });
        }
    }
    Ok(())
}

/// Refuses MCP servers whose programs the run may not start: a stdio
/// server is a program like any other, granted like one.
fn check_mcp_programs(options: &RunOptions, grants: &Grants) -> Result<(), Refusal> {
    let Some(servers) = &options.mcp_servers else {
        return Ok(());
    };
    let servers = McpServers::from_json(&serde_json::json!({ "mcpServers": servers }).to_string())
        .map_err(|e| Refusal::Needs(format!("options.mcpServers: {e}")))?;
    for (name, command) in servers.programs() {
        if !grants.run.iter().any(|granted| granted == command) {
            return Err(Refusal::McpProgram {
                server: name.to_owned(),
                program: command.to_owned(),
            });
        }
    }
    Ok(())
}
