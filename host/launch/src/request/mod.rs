//! One way to ask for a run: [`RunRequest`], whatever it was written in —
//! the command line's flags, a policy file's entries, a `moat parallel`
//! tasks file, a workflow file's tasks or the protocol's `run`. Each
//! dialect is read into a [`Raw`] by the one table of fields
//! ([`field`]), its values by one reader each ([`value`]) with one set of
//! checks, so the same mistake is the same typed [`RequestError`]
//! everywhere, naming the field as that dialect spells it. The library's
//! types a launch needs (options, what it asks, its ceiling, how it asks,
//! its workspace) are made from the request here and nowhere else.

pub mod dialect;
pub mod error;
pub mod field;
pub mod policy;
mod value;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moat_engine::{PriceTable, RunOptions, SettingNames};
use moat_grants::{Grants, NetRule, SecretGrant, TrustLevel};

pub use dialect::{Dialect, Given, Raw};
pub use error::{Problem, RequestError};
pub use field::{Field, Group, Shape};
pub use policy::{Policy, PolicyEntry, PolicyError};
pub use value::parse_duration;

use crate::admit::{Asked, Ceiling};
use crate::limits::{AskedLimits, Timeout};
use crate::spec::{AdapterRef, LaunchSpec};
use value::Reader;

/// Everything a run may be asked with. Each field is what the request
/// gave, `None` (or `false`) where it gave nothing: the adapter's, the
/// ceiling's or the parent's then decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRequest {
    /// The adapter: a built-in's name, an installed adapter's, or a path.
    pub adapter: Option<String>,
    /// What it is asked.
    pub prompt: Option<String>,
    /// The part it plays among its siblings.
    pub role: Option<String>,
    /// Its trust level.
    pub trust: Option<TrustLevel>,
    /// The live run it is a child of: an id, or a prefix naming one.
    pub parent: Option<String>,
    /// Its adapter's options (the budget in dollars among them).
    pub options: RunOptions,
    /// End the run rather than start afresh when its session is gone.
    pub no_resume_fallback: bool,
    /// Prices for a backend that reports tokens but no cost.
    pub price_table: Option<Arc<PriceTable>>,
    /// How long an interrupted adapter may take to wind down.
    pub drain: Option<Duration>,
    /// The grants it names.
    pub grants: GrantsAsked,
    /// A component loaded from a path gets what it declares.
    pub grant_declared: bool,
    /// Its limits (and token budget).
    pub limits: AskedLimits,
    /// It asks for what its grants lack.
    pub ask: bool,
    /// Tools whose every call it asks about first.
    pub ask_tools: Option<Vec<String>>,
    /// How long a request of its waits for an answer.
    pub approval_timeout: Option<Timeout>,
    /// A workspace of its own.
    pub workspace: Option<moat_workspace::Mode>,
    /// What a worktree starts from.
    pub base: Option<String>,
    /// Carry the project's uncommitted changes into a worktree.
    pub include_dirty: bool,
    /// A policy file.
    pub policy: Option<Policy>,
    /// Its programs run with all of the user's rights.
    pub no_contain: bool,
    /// On a cluster, run it again elsewhere when its worker is lost.
    pub retry_on_worker_loss: bool,
}

/// The grants a request names, each kind `None` when it named none of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrantsAsked {
    /// Hosts.
    pub net: Option<Vec<NetRule>>,
    /// Directories to read.
    pub read: Option<Vec<PathBuf>>,
    /// Directories to read and write.
    pub write: Option<Vec<PathBuf>>,
    /// Environment variables.
    pub env: Option<Vec<String>>,
    /// Programs.
    pub run: Option<Vec<String>>,
    /// Secrets.
    pub secrets: Option<Vec<SecretGrant>>,
    /// Whether grants were named as a group, maybe none of them (an
    /// empty `grants` object asks for no grant).
    pub named: bool,
}

impl GrantsAsked {
    /// Whether it names any grant.
    pub fn any(&self) -> bool {
        self.named
            || self.net.is_some()
            || self.read.is_some()
            || self.write.is_some()
            || self.env.is_some()
            || self.run.is_some()
            || self.secrets.is_some()
    }

    /// The grants it names (a kind it names none of: none of that kind).
    pub fn all(&self) -> Grants {
        Grants {
            net: self.net.clone().unwrap_or_default(),
            read: self.read.clone().unwrap_or_default(),
            write: self.write.clone().unwrap_or_default(),
            env: self.env.clone().unwrap_or_default(),
            run: self.run.clone().unwrap_or_default(),
            secrets: self.secrets.clone().unwrap_or_default(),
        }
    }

    /// What a run asks for by these: exactly them when it names any,
    /// else all that is allowed (`None`).
    pub fn asked(&self) -> Option<Grants> {
        self.any().then(|| self.all())
    }
}

impl RunRequest {
    /// The request `raw` gives, every value checked: the first field that
    /// cannot be taken is refused, naming it as it was written.
    pub fn from_raw(raw: &Raw) -> Result<RunRequest, RequestError> {
        let mut request = RunRequest::default();
        request.grants.named = raw.grants_named;
        for (field, given) in &raw.fields {
            request.take(Reader {
                field: *field,
                given,
            })?;
        }
        request.check(raw)?;
        Ok(request)
    }

    /// Reads `request` written in `dialect` (see [`Raw::read`]).
    pub fn read(
        request: &serde_json::Map<String, serde_json::Value>,
        dialect: Dialect,
        base: Option<&Path>,
        own: &[&str],
    ) -> Result<RunRequest, RequestError> {
        Self::from_raw(&Raw::read(request, dialect, base, own)?)
    }

    /// Takes one field's value.
    fn take(&mut self, value: Reader<'_>) -> Result<(), RequestError> {
        let options = &mut self.options;
        let grants = &mut self.grants;
        let limits = &mut self.limits;
        match value.field {
            Field::Adapter => self.adapter = Some(value.name()?),
            Field::Prompt => self.prompt = Some(value.text()?),
            Field::Role => self.role = Some(value.name()?),
            Field::Trust => self.trust = Some(value.trust()?),
            Field::Parent => self.parent = Some(value.name()?),
            Field::GrantDeclared => self.grant_declared = value.bool()?,
            Field::Policy => self.policy = Some(value.policy()?),
            Field::NoContain => self.no_contain = value.bool()?,
            Field::RetryOnWorkerLoss => self.retry_on_worker_loss = value.bool()?,
            Field::Model => options.model = Some(value.name()?),
            Field::Cwd => options.cwd = Some(value.dir()?.to_string_lossy().into_owned()),
            Field::Directories => {
                options.directories = value
                    .dirs()?
                    .into_iter()
                    .map(|dir| dir.to_string_lossy().into_owned())
                    .collect();
            }
            Field::Agents => options.agents = Some(value.agents()?),
            Field::McpServers => options.mcp_servers = Some(value.mcp_servers()?.to_value()),
            Field::Resume => options.resume = Some(value.name()?),
            Field::NoResumeFallback => self.no_resume_fallback = value.bool()?,
            Field::MaxTurns => options.max_turns = Some(value.turns()?),
            Field::System => options.system_prompt = Some(value.text()?),
            Field::Effort => options.effort = Some(value.name()?),
            Field::AllowedTools => options.allowed_tools = Some(value.tools()?),
            Field::DisallowedTools => options.disallowed_tools = value.tools()?,
            Field::Extra => options.extra = Some(value.object()?),
            Field::PriceTable => self.price_table = Some(value.price_table()?),
            Field::Drain => self.drain = Some(value.duration()?),
            Field::Net => grants.net = Some(value.net_rules()?),
            Field::Read => grants.read = Some(value.dirs()?),
            Field::Write => grants.write = Some(value.dirs()?),
            Field::Env => grants.env = Some(value.env_names()?),
            Field::Run => grants.run = Some(value.programs()?),
            Field::Secrets => grants.secrets = Some(value.secrets()?),
            Field::Timeout => limits.timeout = Some(value.timeout()?),
            Field::Fuel => limits.fuel = Some(value.fuel()?),
            Field::MaxMemory => limits.max_memory_bytes = Some(value.memory()?),
            Field::MaxEventSize => limits.max_event_bytes = Some(value.event_size()?),
            Field::MaxConnections => limits.max_connections = Some(value.count()?),
            Field::MaxOpenFiles => limits.max_open_files = Some(value.count()?),
            Field::MaxBudgetUsd => options.max_budget_usd = Some(value.usd()?),
            Field::MaxTokens => limits.max_tokens = Some(value.tokens()?),
            Field::MaxModelCalls => limits.max_model_calls = Some(value.calls()?),
            Field::Ask => self.ask = value.bool()?,
            Field::AskTools => self.ask_tools = Some(value.tools()?),
            Field::ApprovalTimeout => self.approval_timeout = Some(value.timeout()?),
            Field::Workspace => self.workspace = value.workspace_mode()?,
            Field::Base => self.base = Some(value.name()?),
            Field::IncludeDirty => self.include_dirty = value.bool()?,
        }
        Ok(())
    }

    /// What no one field says: how fields go together.
    fn check(&self, raw: &Raw) -> Result<(), RequestError> {
        if let Some(given) = raw.fields.get(&Field::ApprovalTimeout)
            && !self.asks()
        {
            let why = format!(
                "is for a run that asks: add {}",
                given.dialect.name_of(Field::Ask)
            );
            return Err(RequestError::new(
                Field::ApprovalTimeout,
                &given.spelled,
                Problem::Invalid(why),
            ));
        }
        Ok(())
    }

    /// Whether it asks for what its grants lack (asking, or asking about
    /// tools).
    pub fn asks(&self) -> bool {
        self.ask || self.ask_tools.is_some()
    }

    /// How it asks; `None`: it does not.
    pub fn how_it_asks(&self) -> Option<crate::Ask> {
        self.asks().then(|| crate::Ask {
            timeout: match self.approval_timeout {
                None => Some(crate::Ask::DEFAULT_TIMEOUT),
                Some(Timeout::After(after)) => Some(after),
                Some(Timeout::Never) => None,
            },
            tools: self.ask_tools.clone().unwrap_or_default(),
        })
    }

    /// What it asks for: the grants it names (all allowed when none), its
    /// trust, its limits.
    pub fn asked(&self) -> Asked {
        Asked {
            grants: self.grants.asked(),
            trust: self.trust,
            limits: self.limits.clone(),
        }
    }

    /// Its workspace, made under `root`: of its working directory, else
    /// of `here`; `None` without one.
    pub fn workspace_request(&self, root: &Path, here: &Path) -> Option<moat_workspace::Request> {
        let mode = self.workspace?;
        let project = self
            .options
            .cwd
            .as_deref()
            .map_or_else(|| here.to_path_buf(), PathBuf::from);
        Some(moat_workspace::Request {
            mode,
            project,
            base: self.base.clone(),
            include_dirty: self.include_dirty,
            root: root.to_path_buf(),
            seeds: Vec::new(),
        })
    }

    /// The ceiling its grants, trust and limits set, held by `holder`:
    /// what whoever starts runs with this request as their flags (a
    /// server, a worker, a workflow) allows each run. Its trust presets
    /// apply to its working directory and directories; a limit it leaves
    /// out is the host's shared default.
    pub fn ceiling(&self, holder: &str) -> Ceiling {
        let host = crate::limits::shared_host();
        let limits = &self.limits;
        Ceiling {
            holder: holder.to_owned(),
            grants: self.grants.all(),
            policy: self.policy.clone(),
            grant_declared: self.grant_declared,
            contain: !self.no_contain,
            trust: self.trust.unwrap_or_default(),
            cwd: self.options.cwd.as_deref().map(PathBuf::from),
            directories: self.options.directories.iter().map(PathBuf::from).collect(),
            limits: moat_engine::RunLimits {
                timeout: match limits.timeout {
                    Some(Timeout::After(after)) => Some(after),
                    _ => None,
                },
                fuel: limits.fuel,
                max_memory_bytes: limits.max_memory_bytes.unwrap_or(host.max_memory_bytes),
                max_event_bytes: limits.max_event_bytes.unwrap_or(host.max_event_bytes),
                max_connections: limits.max_connections.unwrap_or(host.max_connections),
                max_open_files: limits.max_open_files.unwrap_or(host.max_open_files),
            },
            answers_beyond: false,
            budget: crate::Budget {
                usd: self.options.max_budget_usd,
                tokens: limits.max_tokens,
                calls: limits.max_model_calls,
            },
        }
    }

    /// The ceiling of a run this request starts by hand (`moat run`'s
    /// flags are its own ceiling, and the person who gave them answers its
    /// requests): its grants, trust and presets, and no limit of a host's.
    pub fn own_ceiling(&self, holder: &str) -> Ceiling {
        Ceiling {
            answers_beyond: true,
            limits: crate::limits::unbounded(),
            budget: crate::Budget::default(),
            ..self.ceiling(holder)
        }
    }

    /// What a run this request starts by hand asks for under its own
    /// ceiling ([`RunRequest::own_ceiling`]): all that ceiling allows (its
    /// grants are the ceiling, not a request), at its trust, with its
    /// limits. Under a parent the grants the ceiling gives it are asked
    /// for by name, as its trust is: left unnamed they would be narrowed
    /// to the parent's without a word (a variable it was given, quietly
    /// not granted under a parent without it); named, more than the
    /// parent holds is refused, saying what.
    pub fn asked_by_hand(
        &self,
        ceiling: &Ceiling,
        resolved: &crate::Resolved,
        under_parent: bool,
    ) -> Result<Asked, crate::Refusal> {
        let mut asked = Asked {
            grants: None,
            trust: self.trust,
            limits: self.limits.clone(),
        };
        if under_parent {
            let mut grants = ceiling.allowance(resolved)?;
            // A built-in's own key by reference is used when it can be,
            // not asked for: under a parent without it, the run goes as a
            // run whose key is not kept does.
            let named = self.grants.secrets.clone().unwrap_or_default();
            grants.secrets.retain(|grant| named.contains(grant));
            asked.grants = Some(grants);
        }
        Ok(asked)
    }

    /// The launch of `adapter` this request asks for, asking `asked`
    /// under `ceiling`, in `names`' words: everything but what the caller
    /// resolves itself (the parent's id, the workspace's root).
    pub fn launch_spec(
        &self,
        adapter: AdapterRef,
        ceiling: Arc<Ceiling>,
        asked: Asked,
        names: Arc<dyn SettingNames>,
    ) -> LaunchSpec {
        let defaults = LaunchSpec::new(adapter, self.prompt.clone().unwrap_or_default(), ceiling);
        LaunchSpec {
            options: self.options.clone(),
            asked,
            drain: self.drain.unwrap_or(defaults.drain),
            price_table: self.price_table.clone(),
            resume_fallback: !self.no_resume_fallback,
            role: self.role.clone(),
            names,
            retry_on_worker_loss: self.retry_on_worker_loss,
            ask: self.how_it_asks(),
            ..defaults
        }
    }
}

/// Every field and how each dialect spells it, as a Markdown table (the
/// one in docs/requests.md, checked to be this).
pub fn reference() -> String {
    let dialects = [
        Dialect::Flags,
        Dialect::Policy,
        Dialect::Tasks,
        Dialect::Workflow,
        Dialect::Protocol,
    ];
    let mut table = String::from(
        "| field | flag | policy file | tasks file | workflow task | protocol `run` | what |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for field in Field::all() {
        let cells: Vec<String> = dialects
            .iter()
            .map(|dialect| {
                let spelled = dialect.spellings(field);
                match spelled.is_empty() {
                    true => "—".to_owned(),
                    false => spelled
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })
            .collect();
        table.push_str(&format!(
            "| {} | {} | {} |\n",
            field.name(),
            cells.join(" | "),
            field.doc().replace('|', "\\|")
        ));
    }
    table
}

#[cfg(test)]
mod tests;
