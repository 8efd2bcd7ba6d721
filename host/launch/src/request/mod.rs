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
mod launching;
pub mod policy;
mod value;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moat_engine::{PriceTable, RunOptions};
use moat_grants::{Grants, NetRule, SecretGrant, TrustLevel};

pub use dialect::{Dialect, Given, Raw};
pub use error::{Problem, RequestError};
pub use field::{Field, Group, Shape};
pub use policy::{Policy, PolicyEntry, PolicyError};
pub use value::parse_duration;

use crate::limits::{AskedLimits, Timeout};
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
    /// Unix sockets.
    pub unix_sockets: Option<Vec<PathBuf>>,
    /// Protected paths it may write.
    pub write_protected: Option<Vec<PathBuf>>,
    /// Destinations read as model APIs.
    pub meter: Option<Vec<moat_grants::MeterRule>>,
    /// Unmetered model calls under a budget.
    pub unmetered: Option<bool>,
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
            || self.unix_sockets.is_some()
            || self.write_protected.is_some()
            || self.meter.is_some()
            || self.unmetered.is_some()
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
            unix_sockets: self.unix_sockets.clone().unwrap_or_default(),
            write_protected: self.write_protected.clone().unwrap_or_default(),
            meter: self.meter.clone().unwrap_or_default(),
            unmetered: self.unmetered.unwrap_or_default(),
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
            Field::UnixSocket => grants.unix_sockets = Some(value.sockets()?),
            Field::WriteProtected => grants.write_protected = Some(value.paths()?),
            Field::Meter => grants.meter = Some(value.meter_rules()?),
            Field::Unmetered => grants.unmetered = Some(value.bool()?),
            Field::Timeout => limits.timeout = Some(value.timeout()?),
            Field::Fuel => limits.fuel = Some(value.fuel()?),
            Field::MaxMemory => limits.max_memory_bytes = Some(value.memory()?),
            Field::MaxEventSize => limits.max_event_bytes = Some(value.event_size()?),
            Field::MaxConnections => limits.max_connections = Some(value.count()?),
            Field::MaxOpenFiles => limits.max_open_files = Some(value.count()?),
            Field::MaxProcesses => limits.max_processes = Some(value.processes()?),
            Field::Cpus => limits.milli_cpus = Some(value.cpus()?),
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
