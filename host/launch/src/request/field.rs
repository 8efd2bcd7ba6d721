//! Every field a run may be asked with, once: its canonical name, the
//! group it belongs to, and the dialects that take it (what its values
//! are is its arm in the request's reader, `RunRequest::take`). How each dialect spells a field is derived from its canonical name
//! and group (`Dialect::spellings`); the few spellings kept from before
//! the names were one are beside it (`dialect::RENAMES`). Adding a field is adding one row
//! to [`FIELDS`] (and its arm in the request's reader): its flag, policy
//! key, tasks key, workflow key and protocol key follow.

/// One field of a run request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The adapter: a built-in's name, an installed adapter's, or a path.
    Adapter,
    /// What it is asked.
    Prompt,
    /// The part it plays among its siblings (a parallel task's role).
    Role,
    /// How much its backend may do on its own.
    Trust,
    /// The live run it is a child of.
    Parent,
    /// A component loaded from a path gets what it declares.
    GrantDeclared,
    /// A policy file: grants and limits per adapter.
    Policy,
    /// Its programs run with all of the user's rights.
    NoContain,
    /// On a cluster, run it again elsewhere when its worker is lost.
    RetryOnWorkerLoss,
    /// The backend's model.
    Model,
    /// Its working directory.
    Cwd,
    /// Directories its backend may use besides the working directory.
    Directories,
    /// Sub-agents, for backends that have them.
    Agents,
    /// MCP servers for its backend.
    McpServers,
    /// A session to resume.
    Resume,
    /// End the run rather than start afresh when the session is gone.
    NoResumeFallback,
    /// The most agent turns.
    MaxTurns,
    /// The system prompt.
    System,
    /// How hard the backend thinks.
    Effort,
    /// The only tools the agent may use.
    AllowedTools,
    /// Tools the agent must not use.
    DisallowedTools,
    /// Adapter-specific options.
    Extra,
    /// Prices per model for a backend that reports tokens but no cost.
    PriceTable,
    /// How long an interrupted adapter may take to wind down.
    Drain,
    /// Hosts it may reach.
    Net,
    /// Directories it may read.
    Read,
    /// Directories it may read and write.
    Write,
    /// Environment variables it may see.
    Env,
    /// Programs it may start.
    Run,
    /// Secrets its requests carry, added by the host.
    Secrets,
    /// Unix sockets outside its write grants its programs may reach.
    UnixSocket,
    /// Files that run code later it may change all the same.
    WriteProtected,
    /// Destinations whose answers are read as a model API's.
    Meter,
    /// Model calls moat cannot read, under a budget in tokens or dollars.
    Unmetered,
    /// Its wall-clock limit.
    Timeout,
    /// Its CPU budget.
    Fuel,
    /// Its memory cap.
    MaxMemory,
    /// Its largest event.
    MaxEventSize,
    /// Its most open connections.
    MaxConnections,
    /// Its most open files.
    MaxOpenFiles,
    /// Its programs' most processes.
    MaxProcesses,
    /// The CPUs its programs may use.
    Cpus,
    /// The most it (with its children) may spend, in US dollars.
    MaxBudgetUsd,
    /// The most tokens it (with its children) may use.
    MaxTokens,
    /// The most model calls it (with its children) may make.
    MaxModelCalls,
    /// It asks for what its grants lack instead of being refused.
    Ask,
    /// Tools whose every call is asked about first.
    AskTools,
    /// How long a request waits for an answer.
    ApprovalTimeout,
    /// A workspace of its own: `worktree`, `copy` or `none`.
    Workspace,
    /// What a worktree starts from.
    Base,
    /// Carry the project's uncommitted changes into a worktree.
    IncludeDirty,
}

/// Where a field sits: dialects that nest put it under its group's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// At the top.
    Run,
    /// The adapter's options (`options`).
    Options,
    /// What it may reach (`grants`).
    Grants,
    /// Its limits and budget (`limits`).
    Limits,
    /// How it asks (`ask`).
    Ask,
    /// Its workspace (`workspace`).
    Workspace,
}

impl Group {
    /// Its key in a dialect that nests.
    pub fn key(self) -> Option<&'static str> {
        match self {
            Group::Run => None,
            Group::Options => Some("options"),
            Group::Grants => Some("grants"),
            Group::Limits => Some("limits"),
            Group::Ask => Some("ask"),
            Group::Workspace => Some("workspace"),
        }
    }
}

/// The dialects that take a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dialects(u8);

impl Dialects {
    pub(crate) const FLAGS: u8 = 1;
    pub(crate) const POLICY: u8 = 2;
    pub(crate) const TASKS: u8 = 4;
    pub(crate) const WORKFLOW: u8 = 8;
    pub(crate) const PROTOCOL: u8 = 16;

    /// Whether the dialect whose bit is `bit` is one of them.
    pub(crate) fn has_bit(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// Every dialect.
const ALL: Dialects = Dialects(31);
/// What a run is asked with wherever runs are asked for: all but a
/// policy's standing entries.
const RUNS: Dialects =
    Dialects(Dialects::FLAGS | Dialects::TASKS | Dialects::WORKFLOW | Dialects::PROTOCOL);
/// A run started by hand: the command line and a tasks file.
const BY_HAND: Dialects = Dialects(Dialects::FLAGS | Dialects::TASKS);
/// Those, and a client's request.
const REQUESTED: Dialects = Dialects(Dialects::FLAGS | Dialects::TASKS | Dialects::PROTOCOL);
/// The command line alone: what only whoever starts moat decides.
const FLAGS_ONLY: Dialects = Dialects(Dialects::FLAGS);
/// Standing grants: a policy too.
const STANDING: Dialects = Dialects(Dialects::FLAGS | Dialects::POLICY | Dialects::TASKS);

/// One field's row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    /// The field.
    pub(crate) field: Field,
    /// Its group.
    pub(crate) group: Group,
    /// Its canonical name, snake_case.
    pub(crate) name: &'static str,
    /// The dialects that take it.
    pub(crate) dialects: Dialects,
    /// How many values it takes.
    pub(crate) shape: Shape,
    /// How its value is written, for a person (`DURATION|none`); empty
    /// for a switch.
    pub(crate) value: &'static str,
    /// What it does, in words true in every dialect.
    pub(crate) doc: &'static str,
}

/// How many values a field takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// None: it is given (`true`) or not.
    Switch,
    /// One.
    One,
    /// A list.
    List,
}

#[allow(clippy::too_many_arguments)]
const fn spec(
    field: Field,
    group: Group,
    name: &'static str,
    dialects: Dialects,
    shape: Shape,
    value: &'static str,
    doc: &'static str,
) -> Spec {
    Spec {
        field,
        group,
        name,
        dialects,
        shape,
        value,
        doc,
    }
}

use Shape::{List, One, Switch};

/// Every field, in the order help and errors list them.
pub(crate) const FIELDS: &[Spec] = &[
    spec(
        Field::Adapter,
        Group::Run,
        "adapter",
        RUNS,
        One,
        "ADAPTER",
        "A built-in adapter's name (see `moat adapters`), an installed adapter's, or a path to a .wasm component.",
    ),
    spec(
        Field::Prompt,
        Group::Run,
        "prompt",
        RUNS,
        One,
        "PROMPT",
        "What the run is asked.",
    ),
    spec(
        Field::Role,
        Group::Run,
        "role",
        REQUESTED,
        One,
        "ROLE",
        "The part the run plays among its siblings: on every event, to tell runs apart in a merged stream.",
    ),
    spec(
        Field::Trust,
        Group::Run,
        "trust",
        REQUESTED,
        One,
        "LEVEL",
        "How much the backend may do on its own (sandbox, controlled, unrestricted); also presets grants (docs/security.md) [default: sandbox].",
    ),
    spec(
        Field::Parent,
        Group::Run,
        "parent",
        REQUESTED,
        One,
        "RUN",
        "Record the run as a child of the live run RUN (an id or a prefix): within its grants, trust and limits; when RUN ends, this run is stopped and ends `parent ended`.",
    ),
    spec(
        Field::GrantDeclared,
        Group::Run,
        "grant_declared",
        STANDING,
        Switch,
        "",
        "Grant a component loaded from a path what it declares (see `moat inspect`). Built-in adapters always get their declared needs.",
    ),
    spec(
        Field::Policy,
        Group::Run,
        "policy",
        FLAGS_ONLY,
        One,
        "FILE",
        "A policy file (TOML) with grants and limits per adapter; its grants add to the flags, its limits narrow them.",
    ),
    spec(
        Field::NoContain,
        Group::Run,
        "no_contain",
        FLAGS_ONLY,
        Switch,
        "",
        "Run the programs the adapter starts with all of your rights instead of contained to the run's grants (docs/security.md).",
    ),
    spec(
        Field::RetryOnWorkerLoss,
        Group::Run,
        "retry_on_worker_loss",
        FLAGS_ONLY,
        Switch,
        "",
        "With --nats: when the worker running it is lost, run it again on another worker from the start (off: a coding agent may have changed files already).",
    ),
    spec(
        Field::Model,
        Group::Options,
        "model",
        RUNS,
        One,
        "MODEL",
        "Model for the backend.",
    ),
    spec(
        Field::Cwd,
        Group::Options,
        "cwd",
        REQUESTED,
        One,
        "DIR",
        "Working directory for the backend (an existing directory; the adapter receives its absolute path). Trust `controlled` and `unrestricted` grant it read-write.",
    ),
    spec(
        Field::Directories,
        Group::Options,
        "directories",
        REQUESTED,
        List,
        "DIR",
        "Directories the backend may use besides the working directory (existing ones). They reach the backend through its own switch, and trust `controlled` and `unrestricted` grant them read-write, as they do the working directory.",
    ),
    spec(
        Field::Agents,
        Group::Options,
        "agents",
        REQUESTED,
        One,
        "FILE",
        "Sub-agents for backends that have them (Claude Code): {\"NAME\": {\"description\": …, \"prompt\": …, \"tools\"?: […], \"model\"?: …}} (a flag names a JSON file). Adapters whose backend has none refuse the run.",
    ),
    spec(
        Field::McpServers,
        Group::Options,
        "mcp_servers",
        REQUESTED,
        One,
        "FILE",
        "MCP servers for the backend: {\"mcpServers\": {\"NAME\": {\"command\": …, \"args\": […]} or {\"url\": …}}} (a flag names a JSON file). A stdio server's command must be granted like any program.",
    ),
    spec(
        Field::Resume,
        Group::Options,
        "resume",
        REQUESTED,
        One,
        "TOKEN",
        "Resume token of an earlier session.",
    ),
    spec(
        Field::NoResumeFallback,
        Group::Options,
        "no_resume_fallback",
        REQUESTED,
        Switch,
        "",
        "When the backend no longer has the session to resume, end the run with the error instead of starting a fresh session.",
    ),
    spec(
        Field::MaxTurns,
        Group::Options,
        "max_turns",
        RUNS,
        One,
        "N",
        "Maximum number of agent turns.",
    ),
    spec(
        Field::System,
        Group::Options,
        "system",
        RUNS,
        One,
        "TEXT",
        "System prompt for the backend.",
    ),
    spec(
        Field::Effort,
        Group::Options,
        "effort",
        RUNS,
        One,
        "LEVEL",
        "How hard the backend thinks, for backends that have such a setting (Claude Code's --effort); the others refuse the run.",
    ),
    spec(
        Field::AllowedTools,
        Group::Options,
        "allowed_tools",
        RUNS,
        One,
        "TOOLS",
        "The only tools the agent may use, comma-separated; an empty value allows none. A tool call outside them ends the run.",
    ),
    spec(
        Field::DisallowedTools,
        Group::Options,
        "disallowed_tools",
        RUNS,
        One,
        "TOOLS",
        "Tools the agent must not use, comma-separated.",
    ),
    spec(
        Field::Extra,
        Group::Options,
        "extra",
        RUNS,
        One,
        "JSON|@FILE",
        "Adapter-specific options as a JSON object (a flag: inline or @FILE), e.g. the openai adapter's tools: {\"tools\":[…]}.",
    ),
    spec(
        Field::PriceTable,
        Group::Options,
        "price_table",
        BY_HAND,
        One,
        "FILE",
        "Prices per model (JSON: {\"models\": {\"gpt-4o\": {\"inputPerMTok\": 2.5, \"outputPerMTok\": 10}}}) for runs whose backend reports tokens but no cost; such a cost is marked `price_table`.",
    ),
    spec(
        Field::Drain,
        Group::Options,
        "drain",
        BY_HAND,
        One,
        "DURATION",
        "How long an interrupted adapter may take to wind down, e.g. 500ms [default: 500ms].",
    ),
    spec(
        Field::Net,
        Group::Grants,
        "net",
        ALL,
        List,
        "HOSTS",
        "Hosts the adapter may reach over HTTP(S): host, host:port, *.example.com or https://host:port. Loopback and private addresses only when named exactly (localhost:11434, 127.0.0.1).",
    ),
    spec(
        Field::Read,
        Group::Grants,
        "read",
        ALL,
        List,
        "DIRS",
        "Directories the adapter may read. It sees each under its absolute path.",
    ),
    spec(
        Field::Write,
        Group::Grants,
        "write",
        ALL,
        List,
        "DIRS",
        "Directories the adapter may read and write.",
    ),
    spec(
        Field::Env,
        Group::Grants,
        "env",
        ALL,
        List,
        "NAMES",
        "Environment variables the adapter may see, by name.",
    ),
    spec(
        Field::Run,
        Group::Grants,
        "run",
        ALL,
        List,
        "PROGRAMS",
        "Programs the adapter may spawn: names (found on PATH when the run starts) or absolute paths.",
    ),
    spec(
        Field::Secrets,
        Group::Grants,
        "secrets",
        ALL,
        List,
        "NAME@HOST",
        "Secrets moat adds to the adapter's requests, NAME@HOST[:PORT] (a secret kept by `moat secret set NAME`); the adapter never holds the value. The host must be granted too.",
    ),
    spec(
        Field::UnixSocket,
        Group::Grants,
        "unix_socket",
        ALL,
        List,
        "PATHS",
        "Unix sockets outside its write grants the adapter's programs may connect to (a database's, a Docker daemon's); those inside its write grants and private directory they may always reach.",
    ),
    spec(
        Field::WriteProtected,
        Group::Grants,
        "write_protected",
        ALL,
        List,
        "PATHS",
        "Files that run code later (git hooks and config, shell start-up files, the agent CLIs' hooks and MCP servers: see docs/security.md) the adapter may change inside its write grants all the same; every other one it changes is put back before its `done` and reported.",
    ),
    spec(
        Field::Meter,
        Group::Grants,
        "meter",
        ALL,
        List,
        "HOST=VENDOR",
        "Requests to HOST[:PORT] are model calls of VENDOR's API (openai, anthropic or gemini) whose usage moat reads from the answers, as it does for the vendors' own hosts and a vendor key's secret destination (an Ollama, a vLLM, a gateway); it grants nothing.",
    ),
    spec(
        Field::Unmetered,
        Group::Grants,
        "unmetered",
        ALL,
        Switch,
        "",
        "Under a budget in tokens or dollars, let the run's programs tunnel to a model API all the same (CONNECT, TLS end to end: moat cannot read those calls, so the adapter's reports count for them); refused otherwise.",
    ),
    spec(
        Field::Timeout,
        Group::Limits,
        "timeout",
        ALL,
        One,
        "DURATION|none",
        "Wall-clock limit, e.g. 30s, 5m, or `none` for no limit [default: the adapter's (see `moat inspect`), else 1h].",
    ),
    spec(
        Field::Fuel,
        Group::Limits,
        "fuel",
        ALL,
        One,
        "N",
        "CPU budget in fuel units (about one per guest instruction).",
    ),
    spec(
        Field::MaxMemory,
        Group::Limits,
        "max_memory",
        ALL,
        One,
        "SIZE",
        "Memory cap of the run, e.g. 512MiB or 8GiB: its programs together (the run's cgroup, swap off; past it the kernel kills one and the run says MEMORY_LIMIT) and the adapter, whose share is at most 1GiB [default: 256MiB for the adapter, 4GiB for its programs].",
    ),
    spec(
        Field::MaxEventSize,
        Group::Limits,
        "max_event_size",
        ALL,
        One,
        "SIZE",
        "Largest event accepted from the adapter, e.g. 1MiB; larger ones are dropped with an INVALID_EVENT error [default: 1MiB].",
    ),
    spec(
        Field::MaxConnections,
        Group::Limits,
        "max_connections",
        ALL,
        One,
        "N",
        "Most network connections the adapter may have open at once [default: 64].",
    ),
    spec(
        Field::MaxOpenFiles,
        Group::Limits,
        "max_open_files",
        ALL,
        One,
        "N",
        "Most files and directories the adapter may have open at once [default: 256].",
    ),
    spec(
        Field::MaxProcesses,
        Group::Limits,
        "max_processes",
        ALL,
        One,
        "N",
        "Most processes and threads the adapter's programs may have at once; a fork past it fails (EAGAIN) and the run says PROCESS_LIMIT [default: 4096].",
    ),
    spec(
        Field::Cpus,
        Group::Limits,
        "cpus",
        ALL,
        One,
        "N",
        "CPUs the adapter's programs may use together, e.g. 2 or 0.5 [default: no limit].",
    ),
    spec(
        Field::MaxBudgetUsd,
        Group::Limits,
        "max_budget_usd",
        ALL,
        One,
        "USD",
        "The most the run, with the runs it starts, may spend in US dollars (priced as it goes: the vendor's cost, else a price table); past it the run ends `max_budget`.",
    ),
    spec(
        Field::MaxTokens,
        Group::Limits,
        "max_tokens",
        ALL,
        One,
        "N",
        "The most tokens (input and output) the run, with the runs it starts, may use, as moat's meter reads them from its model calls' answers (else as the backend reports them); past it the run ends `max_budget`.",
    ),
    spec(
        Field::MaxModelCalls,
        Group::Limits,
        "max_model_calls",
        ALL,
        One,
        "N",
        "The most model calls the run, with the runs it starts, may make; past it the run ends `max_budget`. Counted by moat's meter as each answer passes (docs/approvals.md: metered usage), else as the backend reports each call.",
    ),
    spec(
        Field::Ask,
        Group::Ask,
        "ask",
        REQUESTED,
        Switch,
        "",
        "Ask for what the run's grants do not cover (a host, a program) instead of refusing it: the run waits until `moat approve RUN` or `moat deny RUN` answers (docs/approvals.md).",
    ),
    spec(
        Field::AskTools,
        Group::Ask,
        "tools",
        Dialects(REQUESTED.0 | Dialects::POLICY),
        One,
        "TOOLS",
        "Tools whose every call the agent asks about first (comma-separated, e.g. Bash); implies asking. Claude Code and the openai and anthropic tool loops ask through moat; see docs/approvals.md.",
    ),
    spec(
        Field::ApprovalTimeout,
        Group::Ask,
        "timeout",
        REQUESTED,
        One,
        "DURATION|none",
        "How long a request waits for an answer before it is denied, or `none` to wait as long as the run lasts [default: 10m].",
    ),
    spec(
        Field::Workspace,
        Group::Workspace,
        "mode",
        RUNS,
        One,
        "MODE",
        "A workspace of the run's own: `worktree` (a git worktree of the project — the working directory — on a branch named after the run), `copy` (a copy of the directory), or `none`. The run may write its workspace only; review with `moat diff`, land with `moat apply`.",
    ),
    spec(
        Field::Base,
        Group::Workspace,
        "base",
        REQUESTED,
        One,
        "REF",
        "What a worktree starts from: a commit, branch or tag [default: HEAD].",
    ),
    spec(
        Field::IncludeDirty,
        Group::Workspace,
        "include_dirty",
        REQUESTED,
        Switch,
        "",
        "Carry the project's uncommitted changes into the worktree (without it, a dirty project is refused).",
    ),
];

impl Field {
    /// Its row.
    pub(crate) fn spec(self) -> &'static Spec {
        FIELDS
            .iter()
            .find(|spec| spec.field == self)
            .expect("every field has a row")
    }

    /// Its canonical name (`max_memory`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Its group.
    pub fn group(self) -> Group {
        self.spec().group
    }

    /// How many values it takes.
    pub fn shape(self) -> Shape {
        self.spec().shape
    }

    /// How its value is written, for a person (`DURATION|none`).
    pub fn value_name(self) -> &'static str {
        self.spec().value
    }

    /// What it does.
    pub fn doc(self) -> &'static str {
        self.spec().doc
    }

    /// Every field, in order.
    pub fn all() -> impl Iterator<Item = Field> {
        FIELDS.iter().map(|spec| spec.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_one_row() {
        for spec in FIELDS {
            assert_eq!(
                FIELDS.iter().filter(|s| s.field == spec.field).count(),
                1,
                "{:?}",
                spec.field
            );
        }
    }
}
