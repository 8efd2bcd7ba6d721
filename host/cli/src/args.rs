//! Command-line arguments.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand, ValueEnum};

use moat_engine::{McpServers, PriceTable, RunLimits, RunOptions};
use moat_grants::{Grants, NetRule, Policy, SecretGrant, TrustLevel, canonical_dir, names};
use moat_launch::{Asked, AskedLimits, Ceiling, Timeout};
use moat_runs::RunStatus;
use moat_sandbox::MAX_MEMORY_CEILING;

/// How many sessions a command other than `serve` runs at once at most
/// (its pool's size): the most tasks `--max-parallel` may run at once.
pub const COMMAND_SESSIONS: usize = 64;

/// The examples `moat run --help` ends with (each line within 80 columns:
/// help is wrapped to the terminal, and a wrapped command reads badly).
const RUN_EXAMPLES: &str = "\
Examples:
  moat run echo \"hello from the sandbox\"
  moat run openai \"Say hello\" --model llama3.2 --allow-net=localhost:11434
  moat run claude-code \"Fix the test\" --workspace worktree --allow-write=.
  git diff | moat run anthropic - --model claude-sonnet-4-5
  moat run ./my.wasm hi --allow-net=api.example.com --timeout 2m -o ndjson
  moat run echo later --detach      # its id: moat wait, logs -f, cancel";

/// The examples `moat parallel --help` ends with.
const PARALLEL_EXAMPLES: &str = "\
Examples:
  moat parallel --task a:echo=one --task b:echo=two
  moat parallel --tasks tasks.json --max-total-memory 4GiB
  moat parallel --task claude-code=\"Plan it\" --task codex=\"Plan it\" \\
                --workspace worktree --allow-write=.";

/// The examples `moat serve --help` ends with.
const SERVE_EXAMPLES: &str = "\
Examples:
  moat serve --stdio                # one client: its stdin and stdout
  moat serve --socket /tmp/moat.sock --allow-net=api.openai.com
  echo '{\"id\":1,\"op\":\"run\",\"adapter\":\"echo\",\"prompt\":\"hi\"}' | moat serve --stdio";

/// The examples `moat workflow run --help` ends with.
const WORKFLOW_RUN_EXAMPLES: &str = "\
Examples:
  moat workflow run examples/workflows/pipeline/workflow.toml
  moat workflow run workflow.toml --max-parallel 2 --output ndjson
  moat workflow resume workflow.toml   # after a crash or Ctrl-C";

/// Run AI-agent adapters as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "moat", version, about, propagate_version = true)]
pub struct Cli {
    /// More logs on stderr (-v: info, -vv: debug, -vvv: trace). MOAT_LOG
    /// takes a tracing filter instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Output")]
    pub verbose: u8,
    /// Where compiled components are cached [default: ~/.cache/moat].
    #[arg(
        long,
        global = true,
        env = "MOAT_CACHE_DIR",
        value_name = "DIR",
        help_heading = "Store"
    )]
    pub cache_dir: Option<PathBuf>,
    /// Do not read or write the compiled-component cache.
    #[arg(long, global = true, help_heading = "Store")]
    pub no_cache: bool,
    /// The run store [default: ~/.local/state/moat/moat.db].
    #[arg(
        long,
        global = true,
        env = "MOAT_STORE",
        value_name = "PATH",
        help_heading = "Store"
    )]
    pub store: Option<PathBuf>,
    /// The secrets file (mode 0600) [default: ~/.local/state/moat/secrets.json].
    #[arg(
        long,
        global = true,
        env = "MOAT_SECRETS",
        value_name = "PATH",
        help_heading = "Store"
    )]
    pub secrets: Option<PathBuf>,
    /// Where runs' workspaces are made [default:
    /// ~/.local/state/moat/workspaces].
    #[arg(
        long,
        global = true,
        env = "MOAT_WORKSPACE_DIR",
        value_name = "DIR",
        help_heading = "Workspace"
    )]
    pub workspace_dir: Option<PathBuf>,
    /// Export traces over OTLP/HTTP to the collector at URL [default: the
    /// OTEL_EXPORTER_OTLP_* variables, else http://localhost:4318]. The
    /// standard OTEL_* variables turn it on without the flag
    /// (docs/observability.md).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        num_args = 0..=1,
        require_equals = true,
        help_heading = "Output"
    )]
    pub otel: Option<Option<String>>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an adapter on a prompt and stream its events.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Run several tasks at once and merge their events.
    #[command(after_help = PARALLEL_EXAMPLES)]
    Parallel(ParallelArgs),
    /// Show what an adapter is and what it asks for.
    Inspect(InspectArgs),
    /// Compile a component into the cache without running it.
    Compile(CompileArgs),
    /// List every adapter: the built-in ones (and whether the programs they
    /// run are installed), then those installed by name.
    Adapters(AdapterListArgs),
    /// List recorded runs (live ones unless --all).
    Ps(PsArgs),
    /// Show a run's record and result.
    Show(ShowArgs),
    /// Print a run's recorded events.
    Logs(LogsArgs),
    /// Wait until runs end; the exit code is what `moat run` would give.
    Wait(WaitArgs),
    /// Cancel runs, wherever on this machine they run (idempotent).
    Cancel(CancelArgs),
    /// Approve a run's request (a run started with --ask waits for it).
    Approve(ApproveArgs),
    /// Deny a run's request; the run goes on without it.
    Deny(DenyArgs),
    /// Remove ended runs older than an age, and their events.
    Prune(PruneArgs),
    /// Keep secrets for runs to use without holding them (--secret).
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Serve moat's operations as JSON lines (docs/protocol.md), on stdio
    /// or a Unix socket.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Be an ACP agent on stdio for editors (Zed, JetBrains…): each prompt
    /// a contained, recorded run of ADAPTER (docs/acp.md).
    Acp(AcpArgs),
    /// Run workflows: DAGs of agent tasks, persisted and resumable
    /// (docs/workflows.md).
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Install adapters by name, with the grants you accept for them.
    #[command(subcommand)]
    Adapter(AdapterCommand),
    /// Create a ready adapter project: sources, build script, one test,
    /// README.
    New(NewArgs),
    /// Execute runs submitted to a NATS JetStream cluster, here, within
    /// the grants given (docs/cluster.md).
    Worker(WorkerArgs),
    /// Check what moat needs and finds here: containment, the store and
    /// cache, the agent CLIs, the tools to build adapters, the config.
    Doctor,
    /// Print the completion script of a shell (e.g. `source <(moat
    /// completions bash)`).
    Completions(CompletionsArgs),
    /// Print moat's man page (or write one per command with --out).
    Man(ManArgs),
    /// Show what a run changed in its workspace, against its base.
    Diff(DiffArgs),
    /// Apply what a run changed in its workspace to the project: all of
    /// it, or nothing when it conflicts.
    Apply(ApplyArgs),
    /// List or remove runs' workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Watch runs and workflows in the browser: a local page on
    /// 127.0.0.1, its URL (with its token) printed (docs/observability.md).
    Ui(UiArgs),
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The port on 127.0.0.1 (0: a free one).
    #[arg(long, value_name = "P", default_value_t = 0)]
    pub port: u16,
    /// Print the URL without opening a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// How a run gets a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkspaceMode {
    /// A git worktree of the project.
    Worktree,
    /// A copy of the project's directory.
    Copy,
    /// None: the run works where it is told.
    None,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A run id, a prefix naming one run, or `@last`.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// Only which files changed, and how much.
    #[arg(long)]
    pub stat: bool,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A run id, a prefix naming one run, or `@last`.
    #[arg(add = crate::complete::runs())]
    pub run: String,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// List the workspaces (of live and ended runs, and of runs a killed
    /// moat left).
    Ls,
    /// Remove workspaces (directory, branch, snapshot); never one of a
    /// live run.
    Rm(WorkspaceRmArgs),
}

#[derive(Debug, Args)]
pub struct WorkspaceRmArgs {
    /// Runs whose workspaces to remove.
    #[arg(required_unless_present_any = ["ended", "older_than"], add = crate::complete::runs())]
    pub runs: Vec<String>,
    /// Every workspace whose run has ended.
    #[arg(long, conflicts_with = "runs")]
    pub ended: bool,
    /// Every workspace of an ended run made longer ago than this, e.g. 7d.
    #[arg(long, value_name = "AGE", value_parser = parse_duration, conflicts_with = "runs")]
    pub older_than: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `moat.1` and a `moat-COMMAND.1` per command into this
    /// directory instead.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Where the cluster is: with `--nats`, `run`, `ps`, `show`, `logs`,
/// `wait` and `cancel` work on the cluster's runs instead of this
/// machine's (docs/cluster.md).
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterFlags {
    /// NATS servers of the cluster, comma-separated (nats://HOST:PORT).
    /// Credentials never go here: see --nats-auth.
    #[arg(
        long,
        global = true,
        env = "MOAT_NATS",
        value_name = "URLS",
        help_heading = "Cluster"
    )]
    pub nats: Option<String>,
    /// A file with the NATS credentials (token, user/password, nkey or a
    /// .creds file) and TLS settings [default: $MOAT_NATS_AUTH, else the
    /// MOAT_NATS_TOKEN/USER/PASSWORD/NKEY/CREDS variables].
    #[arg(long, global = true, value_name = "FILE", help_heading = "Cluster")]
    pub nats_auth: Option<PathBuf>,
    /// Copies of each stream and bucket this moat creates in the cluster
    /// (3 on a three-node cluster); existing ones are used as they are.
    #[arg(long, global = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=5), help_heading = "Cluster")]
    pub nats_replicas: u8,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Most runs executed at once.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub max_runs: u16,
    /// A worker that has not beaten for this long has lost its runs;
    /// takes effect when the cluster's workers bucket is created.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub worker_timeout: Duration,
    /// The most memory the runs executing here may hold together: the sum
    /// of their memory caps, e.g. 4GiB; a job waits for room, a child run
    /// that does not fit is refused [default: half of this machine's
    /// memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// The most this worker gives any run: a job asking for more is
    /// refused (BOUNDARY_VIOLATION on its record).
    #[command(flatten)]
    pub grants: GrantFlags,
    /// The most trust and limits this worker gives any run.
    #[command(flatten)]
    pub most: CeilingFlags,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The adapter's name: lowercase letters, digits and `-`.
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// Where to create it [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Reference this moat checkout's guest SDK (or the language's SDK
    /// folder itself) where it is, by absolute path, instead of copying
    /// it into the project's vendor/ (for working on the SDK itself).
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

/// The languages `moat new` writes adapters in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the `moat-guest` crate.
    Rust,
    /// Python, with the `moat-adapter` package (componentize-py).
    Python,
    /// TypeScript, with the `@moat/adapter` package (componentize-js).
    Typescript,
}

/// `moat adapter …`.
#[derive(Debug, Subcommand)]
pub enum AdapterCommand {
    /// Install a component under a name: `moat run NAME` then runs it with
    /// the grants accepted here.
    Install(Box<InstallArgs>),
    /// List every adapter, built-in and installed: `moat adapters`.
    List(AdapterListArgs),
    /// Remove an installed adapter.
    Remove(AdapterNameArg),
    /// Show an installed adapter's record and check its bytes.
    Inspect(AdapterNameArg),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The component: a .wasm file, or an https:// URL.
    pub source: String,
    /// The SHA-256 the component must have (lowercase hex): nothing is
    /// installed otherwise.
    #[arg(long, value_name = "HEX", value_parser = parse_sha256)]
    pub sha256: String,
    /// The name to run it by [default: the name its info() gives].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Accept without asking: the grants are exactly the --allow-* flags
    /// (and what it declares, with --grant-declared).
    #[arg(long, short)]
    pub yes: bool,
    /// Grants to give it, besides (or, with --yes, instead of) what it
    /// declares.
    #[command(flatten)]
    pub grants: GrantFlags,
}

#[derive(Debug, Args)]
pub struct AdapterListArgs {
    /// `table` (default) or `json`.
    #[arg(long, short, value_enum, default_value = "table")]
    pub output: ListFormat,
}

#[derive(Debug, Args)]
pub struct AdapterNameArg {
    /// The installed adapter's name.
    pub name: String,
}

fn parse_sha256(text: &str) -> Result<String, String> {
    let text = text.trim().to_ascii_lowercase();
    if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(text)
    } else {
        Err("must be 64 hexadecimal digits (e.g. from `sha256sum FILE`)".into())
    }
}

/// `moat workflow …`.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Run a workflow from its first task.
    #[command(after_help = WORKFLOW_RUN_EXAMPLES)]
    Run(WorkflowRunArgs),
    /// Go on with a workflow that stopped (a crash, Ctrl-C, a failure):
    /// completed tasks are skipped, the rest run.
    Resume(WorkflowResumeArgs),
    /// Show each task's status, duration, tokens and cost.
    Status(WorkflowStatusArgs),
    /// Draw the workflow's graph.
    Graph(WorkflowGraphArgs),
    /// Check a workflow file without running anything.
    Validate(WorkflowFileArg),
    /// Apply what the workflow's tasks changed in their workspaces to the
    /// project, in dependency order: all of it, or nothing.
    Apply(WorkflowFileArg),
}

/// The workflow file.
#[derive(Debug, Args)]
pub struct WorkflowFileArg {
    /// The workflow file (TOML, or JSON when it ends in .json).
    pub file: PathBuf,
}

/// What `run` and `resume` share.
#[derive(Debug, Args)]
pub struct WorkflowFlags {
    /// The workflow file (TOML, or JSON when it ends in .json).
    pub file: PathBuf,
    /// How many tasks may run at once [default: the file's max_parallel,
    /// else 4].
    #[arg(long, value_name = "N", value_parser = parse_parallel)]
    pub max_parallel: Option<usize>,
    /// The trust level of every task's run.
    #[arg(long, value_name = "LEVEL", value_parser = trust_parser(), default_value = "sandbox")]
    pub trust: TrustLevel,
    /// The most any task may be granted: a task's own grants in the file
    /// can only narrow these. Each task works in the file's directory.
    #[command(flatten)]
    pub grants: GrantFlags,
    /// The most of each limit any task's run may have.
    #[command(flatten)]
    pub limits: LimitCeilingFlags,
    /// Every task's run asks for what its grants do not cover, within the
    /// workflow's flags (beyond them: denied at once).
    #[command(flatten)]
    pub asking: AskFlags,
    /// Record nothing in the run store (the state file is still written).
    #[arg(long)]
    pub no_store: bool,
    /// `pretty` (a live view; the default on a terminal) or `ndjson` (one
    /// event per line; the default when piped).
    #[arg(long, short, value_enum)]
    pub output: Option<OutputFormat>,
}

#[derive(Debug, Args)]
pub struct WorkflowRunArgs {
    #[command(flatten)]
    pub workflow: WorkflowFlags,
    /// Start over even though an earlier run did not finish (its state is
    /// replaced).
    #[arg(long)]
    pub fresh: bool,
}

#[derive(Debug, Args)]
pub struct WorkflowResumeArgs {
    #[command(flatten)]
    pub workflow: WorkflowFlags,
    /// Resume even though the file changed since the state was written.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct WorkflowStatusArgs {
    /// The workflow file.
    pub file: PathBuf,
    /// `table` (default) or `json` (the state file's contents).
    #[arg(long, short, value_enum, default_value = "table")]
    pub output: ListFormat,
}

#[derive(Debug, Args)]
pub struct WorkflowGraphArgs {
    /// The workflow file.
    pub file: PathBuf,
    /// `text` (default), `dot` (Graphviz) or `mermaid`.
    #[arg(long, value_enum, default_value = "text")]
    pub format: GraphFormat,
}

/// How `moat workflow graph` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// One line per task, by level.
    Text,
    /// Graphviz's dot language.
    Dot,
    /// A Mermaid flowchart.
    Mermaid,
}

fn parse_parallel(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n @ 1..=COMMAND_SESSIONS) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {}",
            COMMAND_SESSIONS
        )),
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve on stdin/stdout (the default): one client, whose end (stdin
    /// closed) stops the server.
    #[arg(long, conflicts_with = "socket")]
    pub stdio: bool,
    /// Serve on a Unix socket at PATH (mode 0600), several clients at once.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The most memory the runs live here may hold together: the sum of
    /// their memory caps, every descendant counted, e.g. 4GiB; a run that
    /// does not fit is refused [default: half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// The most any run may be granted: a request can only ask for less.
    #[command(flatten)]
    pub grants: GrantFlags,
    /// The most trust and limits any run may have.
    #[command(flatten)]
    pub most: CeilingFlags,
}

#[derive(Debug, Clone, Args)]
pub struct PsArgs {
    /// Every run, ended ones too.
    #[arg(long, short)]
    pub all: bool,
    /// Only runs in these statuses (pending, running, completed, failed).
    #[arg(long, value_delimiter = ',', value_parser = parse_status)]
    pub status: Vec<RunStatus>,
    /// Only runs of this adapter.
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
    /// Only the children of this run (an id or a prefix), whatever their
    /// status.
    #[arg(long, value_name = "RUN", add = crate::complete::runs())]
    pub parent: Option<String>,
    /// At most this many, newest first.
    #[arg(short = 'n', long = "last", value_name = "N")]
    pub last: Option<usize>,
    /// `table` (default) or `json`.
    #[arg(long, short, value_enum, default_value = "table")]
    pub output: ListFormat,
    /// Only the ids, one a line, whole (for scripts: `moat cancel $(moat
    /// ps -q)`).
    #[arg(long, short, conflicts_with = "output")]
    pub quiet: bool,
    /// Whole ids in the table (by default each is as short as it can be
    /// and stay unique among those listed, at least 12 characters).
    #[arg(long)]
    pub no_trunc: bool,
    /// Keep the table up to date: redrawn each second on a terminal,
    /// printed again whenever it changes otherwise; Ctrl-C ends it.
    #[arg(long, short, conflicts_with_all = ["quiet", "output"])]
    pub watch: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// A run id, a prefix naming one run (its `r_` may be left out), or
    /// `@last` for the newest.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// As JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Run ids, prefixes naming one run each (`r_` may be left out), or
    /// `@last` for the newest.
    #[arg(required = true, add = crate::complete::runs())]
    pub runs: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// A run id, a prefix naming one run (its `r_` may be left out), or
    /// `@last` for the newest.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// After the stored events, the live ones, until the run ends.
    #[arg(long, short)]
    pub follow: bool,
    /// Only the last N events (then the live ones with --follow).
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
    /// Only events from this long ago on (e.g. 10m, 2h), or from a time
    /// (e.g. 2026-11-28T09:00:00Z).
    #[arg(long, value_name = "AGE|TIME", value_parser = parse_since)]
    pub since: Option<SystemTime>,
    /// Each line with the time of its event (pretty output; NDJSON events
    /// carry their `timestamp`).
    #[arg(long, short = 't')]
    pub timestamps: bool,
    /// Output format [default: pretty on a terminal, ndjson otherwise].
    #[arg(long, short, value_enum)]
    pub output: Option<OutputFormat>,
}

/// A `--since`: an age before now, or a time (RFC 3339).
pub fn parse_since(text: &str) -> Result<SystemTime, String> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    let age = parse_duration(text).map_err(|_| {
        format!("`{text}` is neither an age (e.g. 10m, 2h) nor a time (e.g. 2026-11-28T09:00:00Z)")
    })?;
    Ok(SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH))
}

#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// Run ids, prefixes naming one run each (`r_` may be left out), or
    /// `@last` for the newest.
    #[arg(required = true, add = crate::complete::runs())]
    pub runs: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ApproveArgs {
    /// A run id, a prefix naming one run (`r_` may be left out), or
    /// `@last` for the newest.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// The request's number (`moat show RUN` lists them); left out: the
    /// run's only open one.
    pub request: Option<u32>,
    /// Approve this request and every later one of the run for the same
    /// host, program, directory (or one within it) or tool.
    #[arg(long)]
    pub always: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DenyArgs {
    /// A run id, a prefix naming one run (`r_` may be left out), or
    /// `@last` for the newest.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// The request's number (`moat show RUN` lists them); left out: the
    /// run's only open one.
    pub request: Option<u32>,
    /// Why, for the run (its adapter is told).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove runs that ended longer ago than this, e.g. 7d.
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub older_than: Duration,
}

/// How `moat ps` lists runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned columns, for people.
    Table,
    /// One JSON array of records.
    Json,
}

fn parse_status(text: &str) -> Result<RunStatus, String> {
    text.parse()
}

#[derive(Debug, Args)]
pub struct AcpArgs {
    /// The adapter every session runs: a built-in name (see `moat
    /// adapters`), an installed adapter or a path to a .wasm component.
    #[arg(add = crate::complete::adapters())]
    pub adapter: String,
    /// The runs' options, grants and limits, as `moat run` takes them; the
    /// working directory is each session's own.
    #[command(flatten)]
    pub run: RunFlags,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in adapter name (see `moat adapters`) or a path to a .wasm
    /// component.
    #[arg(add = crate::complete::adapters())]
    pub adapter: String,
    /// The prompt; `-` or nothing reads it from stdin.
    pub prompt: Option<String>,
    #[command(flatten)]
    pub run: RunFlags,
    /// Output format [default: pretty on a terminal, ndjson otherwise].
    #[arg(long, short, value_enum, help_heading = "Output")]
    pub output: Option<OutputFormat>,
    /// Leave nothing on disk: no record of the run in the store.
    #[arg(long, conflicts_with = "detach", help_heading = "Store")]
    pub no_store: bool,
    /// Print the run's id and return at once; the run goes on in a moat
    /// process of its own (see `moat ps`, `logs`, `wait`, `cancel`).
    #[arg(long, help_heading = "Session")]
    pub detach: bool,
    /// Continue the session of the recorded run RUN (an id, a prefix, or
    /// `@last`):
    /// its resume token, with the same adapter.
    #[arg(
        long = "continue",
        value_name = "RUN",
        conflicts_with = "resume",
        help_heading = "Session",
        add = crate::complete::runs()
    )]
    pub continue_run: Option<String>,
    /// Record the run as a child of the live run RUN (an id or a prefix):
    /// when RUN ends, this run is stopped and ends `parent ended`.
    #[arg(
        long,
        value_name = "RUN",
        conflicts_with = "no_store",
        help_heading = "Session",
        add = crate::complete::runs()
    )]
    pub parent: Option<String>,
    /// With --nats: when the worker running it is lost, run it again on
    /// another worker from the start (off: a coding agent may have changed
    /// files already).
    #[arg(long, help_heading = "Cluster")]
    pub retry_on_worker_loss: bool,
    /// The process a `--detach` started: prints the run's id once it is
    /// recorded, then renders nothing.
    #[arg(long, hide = true)]
    pub detached_child: bool,
}

#[derive(Debug, Args)]
pub struct ParallelArgs {
    /// A task as `[ROLE:]ADAPTER=PROMPT`; repeat for more tasks.
    #[arg(
        long = "task",
        value_name = "[ROLE:]ADAPTER=PROMPT",
        required_unless_present = "tasks_file"
    )]
    pub tasks: Vec<String>,
    /// A JSON or TOML file listing the tasks, with per-task options.
    #[arg(long = "tasks", value_name = "FILE", conflicts_with = "tasks")]
    pub tasks_file: Option<PathBuf>,
    /// Options every task gets unless its entry in --tasks says otherwise.
    #[command(flatten)]
    pub run: RunFlags,
    /// The most memory the running tasks may have together (the sum of
    /// their --max-memory), e.g. 4GiB; tasks beyond it wait for room
    /// [default: half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// Leave nothing on disk: no record of the tasks in the store.
    #[arg(long, conflicts_with = "parent", help_heading = "Store")]
    pub no_store: bool,
    /// Record every task as a child of the live run RUN (an id or a
    /// prefix): within its grants, trust and limits, stopped when it ends.
    #[arg(long, value_name = "RUN", help_heading = "Session", add = crate::complete::runs())]
    pub parent: Option<String>,
    /// Output format [default: pretty on a terminal, ndjson otherwise].
    #[arg(long, short, value_enum, help_heading = "Output")]
    pub output: Option<OutputFormat>,
}

/// The most trust and limits any run started here may have: a request
/// asking for more is refused (BOUNDARY_VIOLATION).
#[derive(Debug, Clone, Args)]
pub struct CeilingFlags {
    /// The most trust a run may ask for (`sandbox`, `controlled`,
    /// `unrestricted`); a run asking nothing gets this.
    #[arg(long, value_name = "LEVEL", value_parser = trust_parser(), default_value = "sandbox")]
    pub trust: TrustLevel,
    #[command(flatten)]
    pub limits: LimitCeilingFlags,
}

impl CeilingFlags {
    /// The ceiling held by `holder` that these flags and `grants` set: no
    /// trust presets (a server or worker has no working directory of its
    /// runs').
    pub fn ceiling(&self, holder: &str, grants: &GrantFlags) -> Ceiling {
        Ceiling {
            budget: moat_launch::Budget {
                usd: self.limits.max_budget_usd,
                tokens: self.limits.max_tokens,
            },
            ..grants.ceiling(holder, self.trust, None, &[], self.limits.ceiling())
        }
    }
}

/// The most of each limit a run may have; what a run does not ask for is
/// its default, lowered to fit.
#[derive(Debug, Clone, Default, Args)]
pub struct LimitCeilingFlags {
    /// The longest a run may take, e.g. 30m [default: no ceiling].
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// The most fuel a run may have [default: no ceiling].
    #[arg(long = "fuel", value_name = "N")]
    pub fuel: Option<u64>,
    /// The largest memory cap a run may have [default: 1GiB].
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = parse_memory)]
    pub max_memory: Option<u64>,
    /// The largest event a run may emit [default: 1MiB].
    #[arg(long = "max-event-size", value_name = "SIZE", value_parser = parse_event_size)]
    pub max_event_size: Option<usize>,
    /// The most connections a run may have open [default: 64].
    #[arg(long = "max-connections", value_name = "N", value_parser = parse_count)]
    pub max_connections: Option<usize>,
    /// The most files a run may have open [default: 256].
    #[arg(long = "max-open-files", value_name = "N", value_parser = parse_count)]
    pub max_open_files: Option<usize>,
    /// The most a run (with its children) may spend, in US dollars
    /// [default: no ceiling].
    #[arg(long = "max-budget-usd", value_name = "USD", value_parser = parse_usd)]
    pub max_budget_usd: Option<f64>,
    /// The most tokens a run (with its children) may use [default: no
    /// ceiling].
    #[arg(long = "max-tokens", value_name = "N", value_parser = parse_tokens)]
    pub max_tokens: Option<u64>,
}

impl LimitCeilingFlags {
    /// The most of each limit these flags set: a host's shared defaults
    /// where they say nothing.
    pub fn ceiling(&self) -> RunLimits {
        let host = moat_launch::limits::shared_host();
        RunLimits {
            timeout: self.timeout,
            fuel: self.fuel,
            max_memory_bytes: self.max_memory.unwrap_or(host.max_memory_bytes),
            max_event_bytes: self.max_event_size.unwrap_or(host.max_event_bytes),
            max_connections: self.max_connections.unwrap_or(host.max_connections),
            max_open_files: self.max_open_files.unwrap_or(host.max_open_files),
        }
    }
}

/// Options and limits of a run, shared by `run` and `parallel`.
#[derive(Debug, Clone, Args)]
pub struct RunFlags {
    /// Model for the backend.
    #[arg(long, help_heading = "Agent")]
    pub model: Option<String>,
    /// Working directory for the backend (an existing directory; the
    /// adapter receives its absolute path). Trust `controlled` and
    /// `unrestricted` grant it read-write.
    #[arg(long, value_name = "DIR", value_parser = parse_cwd, help_heading = "Agent")]
    pub cwd: Option<String>,
    /// A directory the backend may use besides the working directory (an
    /// existing directory; repeat for more). It reaches the backend through
    /// its own switch, and trust `controlled` and `unrestricted` grant it
    /// read-write, as they do the working directory.
    #[arg(long = "add-dir", value_name = "DIR", value_parser = parse_cwd, help_heading = "Agent")]
    pub add_dirs: Vec<String>,
    /// Sub-agents for backends that have them (Claude Code), from a JSON
    /// file: {"NAME": {"description": …, "prompt": …, "tools"?: […],
    /// "model"?: …}}. Adapters whose backend has none refuse the run.
    #[arg(long, value_name = "FILE", value_parser = parse_agents, help_heading = "Agent")]
    pub agents: Option<serde_json::Value>,
    /// MCP servers for the backend, from a JSON file of the common shape:
    /// {"mcpServers": {"NAME": {"command": …, "args": […]} or {"url": …}}}.
    /// A stdio server's command must be granted (--allow-run) like any
    /// program.
    #[arg(long, value_name = "FILE", value_parser = parse_mcp_config, help_heading = "Agent")]
    pub mcp_config: Option<McpServers>,
    /// Resume token of an earlier session.
    #[arg(long, value_name = "TOKEN", help_heading = "Session")]
    pub resume: Option<String>,
    /// When the backend no longer has the session to resume, end the run
    /// with the error instead of starting a fresh session.
    #[arg(long, help_heading = "Session")]
    pub no_resume_fallback: bool,
    /// Maximum number of agent turns.
    #[arg(long, value_name = "N", help_heading = "Agent")]
    pub max_turns: Option<u32>,
    /// System prompt for the backend.
    #[arg(long, value_name = "TEXT", help_heading = "Agent")]
    pub system: Option<String>,
    /// Adapter-specific options as a JSON object, inline or `@FILE`
    /// (e.g. the openai adapter's tools: `{"tools":[…]}`).
    #[arg(long, value_name = "JSON|@FILE", value_parser = parse_extra, help_heading = "Agent")]
    pub extra: Option<serde_json::Value>,
    /// How much the backend may do on its own; also presets grants
    /// (docs/security.md).
    #[arg(long, value_name = "LEVEL", value_parser = trust_parser(), default_value = "sandbox", help_heading = "Grants")]
    pub trust: TrustLevel,
    /// Asking instead of refusing.
    #[command(flatten)]
    pub asking: AskFlags,
    /// The only tools the agent may use, comma-separated; an empty value
    /// allows none. A tool call outside them ends the run.
    #[arg(long, value_name = "TOOLS", value_parser = parse_tool_list, help_heading = "Agent")]
    pub allowed_tools: Option<ToolList>,
    /// Tools the agent must not use, comma-separated.
    #[arg(long, value_name = "TOOLS", value_parser = parse_tool_list, help_heading = "Agent")]
    pub disallowed_tools: Option<ToolList>,
    /// Wall-clock limit for the run, e.g. 30s, 5m, or `none` for no limit
    /// [default: the adapter's (see `moat inspect`), else 1h].
    #[arg(long, value_name = "DURATION|none", value_parser = parse_timeout, help_heading = "Limits")]
    pub timeout: Option<Timeout>,
    /// CPU budget in fuel units (about one per guest instruction).
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub fuel: Option<u64>,
    /// The most the run, with the runs it starts, may spend in US dollars
    /// (priced as it goes: the vendor's cost, else --price-table); past
    /// it the run ends `max_budget`.
    #[arg(long, value_name = "USD", value_parser = parse_usd, help_heading = "Limits")]
    pub max_budget_usd: Option<f64>,
    /// The most tokens (input and output) the run, with the runs it
    /// starts, may use; past it the run ends `max_budget`.
    #[arg(long, value_name = "N", value_parser = parse_tokens, help_heading = "Limits")]
    pub max_tokens: Option<u64>,
    /// Memory cap for the adapter, e.g. 256MiB (at most 1GiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, default_value = "256MiB", help_heading = "Limits")]
    pub max_memory: u64,
    /// Largest event accepted from the adapter, e.g. 1MiB; larger ones are
    /// dropped with an INVALID_EVENT error.
    #[arg(long, value_name = "SIZE", value_parser = parse_event_size, default_value = "1MiB", help_heading = "Limits")]
    pub max_event_size: usize,
    /// Most network connections the adapter may have open at once.
    #[arg(long, value_name = "N", default_value_t = RunLimits::DEFAULT_MAX_CONNECTIONS, value_parser = parse_count, help_heading = "Limits")]
    pub max_connections: usize,
    /// Most files and directories the adapter may have open at once.
    #[arg(long, value_name = "N", default_value_t = RunLimits::DEFAULT_MAX_OPEN_FILES, value_parser = parse_count, help_heading = "Limits")]
    pub max_open_files: usize,
    /// How long an interrupted adapter may take to wind down, e.g. 500ms.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "500ms", help_heading = "Limits")]
    pub drain: Duration,
    /// Prices per model (JSON: {"models": {"gpt-4o": {"inputPerMTok": 2.5,
    /// "outputPerMTok": 10}}}) for runs whose backend reports tokens but no
    /// cost; such a cost is marked `price_table`.
    #[arg(long, value_name = "FILE", value_parser = parse_price_table, help_heading = "Output")]
    pub price_table: Option<Arc<PriceTable>>,
    /// A workspace of the run's own: `worktree` (a git worktree of the
    /// project — the --cwd, else this directory — on a branch named after
    /// the run), `copy` (a copy of the directory), or `none`. The run may
    /// write its workspace only; review with `moat diff`, land with
    /// `moat apply`.
    #[arg(long, value_enum, default_value = "none", help_heading = "Workspace")]
    pub workspace: WorkspaceMode,
    /// What a worktree starts from: a commit, branch or tag [default: HEAD].
    #[arg(long, value_name = "REF", help_heading = "Workspace")]
    pub base: Option<String>,
    /// Carry the project's uncommitted changes into the worktree (without
    /// it, a dirty project is refused).
    #[arg(long, help_heading = "Workspace")]
    pub include_dirty: bool,
    #[command(flatten)]
    pub grants: GrantFlags,
}

/// `moat secret …`.
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Keep a secret: its value from stdin (or --from-file), never an
    /// argument.
    Set {
        /// Its name, as runs grant it (--secret NAME@HOST).
        name: String,
        /// Read the value from this file instead of stdin.
        #[arg(long, value_name = "FILE")]
        from_file: Option<PathBuf>,
        /// The HTTP header it is sent in (e.g. x-api-key) [default: the
        /// vendor's for ANTHROPIC_API_KEY, OPENAI_API_KEY and
        /// GEMINI_API_KEY, else Authorization: Bearer VALUE].
        #[arg(long, value_name = "NAME")]
        header: Option<String>,
    },
    /// List the secrets kept, by name (never their values).
    List,
    /// Forget a secret.
    Rm {
        /// Its name.
        name: String,
    },
}

/// What the user grants an adapter on the command line (docs/security.md).
/// Everything not granted is refused.
#[derive(Debug, Clone, Default, Args)]
pub struct GrantFlags {
    /// Hosts the adapter may reach over HTTP(S), comma-separated: host,
    /// host:port, *.example.com or https://host:port. Loopback and private
    /// addresses only when named exactly (localhost:11434, 127.0.0.1).
    #[arg(long, value_name = "HOSTS", value_delimiter = ',', value_parser = parse_net_rule, help_heading = "Grants")]
    pub allow_net: Vec<NetRule>,
    /// Directories the adapter may read, comma-separated. It sees each
    /// under its absolute path.
    #[arg(long, value_name = "DIRS", value_delimiter = ',', value_parser = parse_dir, help_heading = "Grants")]
    pub allow_read: Vec<PathBuf>,
    /// Directories the adapter may read and write, comma-separated.
    #[arg(long, value_name = "DIRS", value_delimiter = ',', value_parser = parse_dir, help_heading = "Grants")]
    pub allow_write: Vec<PathBuf>,
    /// Environment variables the adapter may see, comma-separated names.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_env_name, help_heading = "Grants")]
    pub allow_env: Vec<String>,
    /// Programs the adapter may spawn, comma-separated: names (found on
    /// PATH when the run starts) or absolute paths.
    #[arg(long, value_name = "PROGRAMS", value_delimiter = ',', value_parser = parse_program, help_heading = "Grants")]
    pub allow_run: Vec<String>,
    /// Secrets moat adds to the adapter's requests, comma-separated
    /// NAME@HOST[:PORT] (a secret kept by `moat secret set NAME`); the
    /// adapter never holds the value. The host must be granted too
    /// (--allow-net).
    #[arg(long, value_name = "NAME@HOST", value_delimiter = ',', value_parser = parse_secret_grant, help_heading = "Grants")]
    pub secret: Vec<SecretGrant>,
    /// A policy file (TOML) with grants per adapter; they add to the flags.
    #[arg(long, value_name = "FILE", value_parser = parse_policy, help_heading = "Grants")]
    pub policy: Option<Policy>,
    /// Grant a component loaded from a path what it declares (see
    /// `moat inspect`). Built-in adapters always get their declared needs.
    #[arg(long, help_heading = "Grants")]
    pub grant_declared: bool,
    /// Run the programs the adapter starts with all of your rights instead
    /// of contained to the run's grants (Landlock; docs/security.md).
    #[arg(long, help_heading = "Grants")]
    pub no_contain: bool,
}

impl GrantFlags {
    /// The grants the `--allow-*` flags give.
    pub fn grants(&self) -> Grants {
        Grants {
            net: self.allow_net.clone(),
            read: self.allow_read.clone(),
            write: self.allow_write.clone(),
            env: self.allow_env.clone(),
            run: self.allow_run.clone(),
            secrets: self.secret.clone(),
        }
    }

    /// The ceiling held by `holder` that these flags grant, at `trust`
    /// (whose presets apply to `cwd` and `directories`), with `limits`.
    pub fn ceiling(
        &self,
        holder: &str,
        trust: TrustLevel,
        cwd: Option<&str>,
        directories: &[String],
        limits: RunLimits,
    ) -> Ceiling {
        Ceiling {
            holder: holder.to_owned(),
            grants: self.grants(),
            policy: self.policy.clone(),
            grant_declared: self.grant_declared,
            contain: !self.no_contain,
            trust,
            cwd: cwd.map(PathBuf::from),
            directories: directories.iter().map(PathBuf::from).collect(),
            limits,
            answers_beyond: false,
            budget: moat_launch::Budget::default(),
        }
    }
}

/// Asking instead of refusing (docs/approvals.md): of `moat run`,
/// `parallel` (each task's) and `workflow run` (every task's).
#[derive(Debug, Clone, Default, Args)]
pub struct AskFlags {
    /// Ask for what the run's grants do not cover (a host, a program)
    /// instead of refusing it: the run waits (`moat ps`: waiting) until
    /// `moat approve RUN` or `moat deny RUN` answers (docs/approvals.md).
    #[arg(long, help_heading = "Grants")]
    pub ask: bool,
    /// Tools whose every call the agent asks about first (comma-separated,
    /// e.g. Bash); implies --ask. Claude Code and the openai and
    /// anthropic tool loops ask through moat; see docs/approvals.md.
    #[arg(long, value_name = "TOOLS", value_parser = parse_tool_list, help_heading = "Grants")]
    pub ask_tools: Option<ToolList>,
    /// How long a request waits for an answer before it is denied, or
    /// `none` to wait as long as the run lasts [default: 10m].
    #[arg(long, value_name = "DURATION|none", value_parser = parse_timeout, help_heading = "Grants")]
    pub approval_timeout: Option<Timeout>,
}

impl AskFlags {
    /// How the run asks for what it lacks (`--ask`); `None`: it does not.
    pub fn ask(&self) -> Result<Option<moat_launch::Ask>, crate::UsageError> {
        if self.approval_timeout.is_some() && !self.asks() {
            return Err(crate::UsageError(
                "--approval-timeout is for a run that asks: add --ask (or --ask-tools)".into(),
            ));
        }
        Ok(self.asks().then(|| moat_launch::Ask {
            timeout: match self.approval_timeout {
                None => Some(moat_launch::Ask::DEFAULT_TIMEOUT),
                Some(Timeout::After(after)) => Some(after),
                Some(Timeout::Never) => None,
            },
            tools: self
                .ask_tools
                .as_ref()
                .map(|tools| tools.0.clone())
                .unwrap_or_default(),
        }))
    }

    /// Whether the run asks for what it lacks (`--ask`, `--ask-tools`).
    pub fn asks(&self) -> bool {
        self.ask || self.ask_tools.is_some()
    }
}

/// A comma-separated list of tool names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<String>);

impl RunFlags {
    /// The options the adapter receives.
    /// The workspace `--workspace` asks for, made under `root`; `None` for
    /// `none`. The project is the `--cwd`, else this directory.
    pub fn workspace_request(&self, root: &Path) -> Option<moat_workspace::Request> {
        let mode = match self.workspace {
            WorkspaceMode::None => return None,
            WorkspaceMode::Worktree => moat_workspace::Mode::Worktree,
            WorkspaceMode::Copy => moat_workspace::Mode::Copy,
        };
        let project = self
            .cwd
            .as_deref()
            .map(PathBuf::from)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        Some(moat_workspace::Request {
            mode,
            project,
            base: self.base.clone(),
            include_dirty: self.include_dirty,
            root: root.to_path_buf(),
            seeds: Vec::new(),
        })
    }

    pub fn options(&self) -> RunOptions {
        RunOptions {
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            max_turns: self.max_turns,
            resume: self.resume.clone(),
            directories: self.add_dirs.clone(),
            agents: self.agents.clone(),
            mcp_servers: self.mcp_config.as_ref().map(McpServers::to_value),
            system_prompt: self.system.clone(),
            allowed_tools: self.allowed_tools.clone().map(|list| list.0),
            disallowed_tools: self
                .disallowed_tools
                .clone()
                .map(|list| list.0)
                .unwrap_or_default(),
            extra: self.extra.clone(),
            max_budget_usd: self.max_budget_usd,
            ..RunOptions::default()
        }
    }

    /// The limits the flags ask for: each of them, the timeout only when
    /// given (else the adapter's).
    pub fn asked_limits(&self) -> AskedLimits {
        AskedLimits {
            timeout: self.timeout,
            fuel: self.fuel,
            max_memory_bytes: Some(self.max_memory),
            max_event_bytes: Some(self.max_event_size),
            max_connections: Some(self.max_connections),
            max_open_files: Some(self.max_open_files),
            max_tokens: self.max_tokens,
        }
    }

    /// The ceiling of a run these flags start (its own flags: `moat run`'s
    /// ceiling is what its user grants it).
    pub fn ceiling(&self, holder: &str) -> Ceiling {
        Ceiling {
            // Its user answers its requests: they may give it anything.
            answers_beyond: true,
            ..self.grants.ceiling(
                holder,
                self.trust,
                self.cwd.as_deref(),
                &self.add_dirs,
                moat_launch::limits::unbounded(),
            )
        }
    }

    /// What a run with these flags asks for: all its ceiling allows, at
    /// its trust level, with its limits.
    pub fn asked(&self) -> Asked {
        Asked {
            grants: None,
            trust: Some(self.trust),
            limits: self.asked_limits(),
        }
    }

    /// What a run of `resolved` with these flags asks for, `under_parent`
    /// or not. Under a parent (`--parent`) the grants its flags give it
    /// (`ceiling`'s allowance) are asked for by name, as its trust is:
    /// left unnamed they would be narrowed to the parent's without a word
    /// (`--allow-env=X` under a parent without X quietly not granted);
    /// named, more than the parent holds is refused, saying what.
    pub fn asked_for(
        &self,
        ceiling: &Ceiling,
        resolved: &moat_launch::Resolved,
        under_parent: bool,
    ) -> Result<Asked, moat_launch::Refusal> {
        let mut asked = self.asked();
        if under_parent {
            let mut grants = ceiling.allowance(resolved)?;
            // A built-in's own key by reference is used when it can be,
            // not asked for: under a parent without it, the run goes as a
            // run whose key is not kept does.
            grants
                .secrets
                .retain(|grant| self.grants.secret.contains(grant));
            asked.grants = Some(grants);
        }
        Ok(asked)
    }
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A built-in adapter name or a path to a .wasm component.
    #[arg(add = crate::complete::adapters())]
    pub adapter: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The trust level to show the grants of.
    #[arg(long, value_name = "LEVEL", value_parser = trust_parser(), default_value = "sandbox")]
    pub trust: TrustLevel,
    /// The working directory to show the grants of.
    #[arg(long, value_name = "DIR", value_parser = parse_cwd)]
    pub cwd: Option<String>,
    /// Directories the backend may use besides it, as `moat run --add-dir`.
    #[arg(long = "add-dir", value_name = "DIR", value_parser = parse_cwd)]
    pub add_dirs: Vec<String>,
    /// Grants to show the effect of, as `moat run` takes them.
    #[command(flatten)]
    pub grants: GrantFlags,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The component to compile.
    pub file: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Streamed text, tool calls and a summary line, for people.
    Pretty,
    /// One JSON event per line, for programs.
    Ndjson,
    /// Only the assistant's text.
    Text,
    /// One JSON object at the end: the run's result (status, text,
    /// sessionId, resumeToken, usage, error).
    Json,
}

/// `--trust`: one of the trust levels, by name.
fn trust_parser() -> impl clap::builder::TypedValueParser<Value = TrustLevel> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(TrustLevel::ALL.map(TrustLevel::as_str)).map(|name| {
        TrustLevel::ALL
            .into_iter()
            .find(|level| level.as_str() == name)
            .expect("clap accepts only the possible values")
    })
}

/// Parses a timeout: a duration, or `none`.
pub fn parse_timeout(text: &str) -> Result<Timeout, String> {
    if text == "none" {
        return Ok(Timeout::Never);
    }
    parse_duration(text)
        .map(Timeout::After)
        .map_err(|e| format!("{e}, or `none` for no limit"))
}

/// Parses a duration such as `30s`, `5m` or `500ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    // humantime's own message lists every unit it knows "(and few
    // variations)": one line with examples says more.
    let duration = humantime::parse_duration(text).map_err(|_| {
        format!("`{text}` is not a duration: write a number and a unit, e.g. 30s, 5m, 2h or 500ms")
    })?;
    if duration.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(duration)
}

/// Parses a memory cap such as `256MiB`, within what the sandbox allows.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|_| "not a size; use e.g. 64MiB, 256MiB or 1GiB".to_string())?;
    let bytes = size.as_u64();
    if bytes < 1024 * 1024 {
        return Err("too small: an adapter needs at least 1MiB".into());
    }
    if bytes > MAX_MEMORY_CEILING {
        return Err(format!(
            "over the ceiling of {}",
            bytesize::ByteSize::b(MAX_MEMORY_CEILING).display().iec()
        ));
    }
    Ok(bytes)
}

/// A count of at least 1, at most [`moat_launch::MAX_COUNT`] (more than
/// any one run needs of a resource the host shares).
/// A budget in US dollars: a positive number.
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "`{text}` is not an amount of dollars; give a positive number, e.g. 1.50"
        )),
    }
}

/// A number of tokens: a positive whole number.
fn parse_tokens(text: &str) -> Result<u64, String> {
    match text.trim().replace('_', "").parse::<u64>() {
        Ok(tokens) if tokens > 0 => Ok(tokens),
        _ => Err(format!(
            "`{text}` is not a number of tokens; give a positive whole number, e.g. 50000"
        )),
    }
}

fn parse_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n @ 1..=moat_launch::MAX_COUNT) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {}",
            moat_launch::MAX_COUNT
        )),
    }
}

fn parse_total_memory(text: &str) -> Result<u64, String> {
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|_| "not a size; use e.g. 2GiB or 512MiB".to_string())?;
    if size.as_u64() < 1024 * 1024 {
        return Err("too small: a task needs at least 1MiB".into());
    }
    Ok(size.as_u64())
}

fn parse_event_size(text: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|_| "not a size; use e.g. 256KiB or 1MiB".to_string())?;
    usize::try_from(size.as_u64())
        .ok()
        .filter(|&bytes| bytes >= 1024)
        .ok_or_else(|| "must be at least 1KiB".to_string())
}

/// Parses one network rule of `--allow-net`.
pub fn parse_net_rule(text: &str) -> Result<NetRule, String> {
    NetRule::parse(text).map_err(|e| e.reason().to_string())
}

/// Parses one `--secret` grant.
pub fn parse_secret_grant(text: &str) -> Result<SecretGrant, String> {
    SecretGrant::parse(text).map_err(|e| e.reason().to_string())
}

/// Resolves one directory of `--allow-read` or `--allow-write`.
pub fn parse_dir(text: &str) -> Result<PathBuf, String> {
    canonical_dir(Path::new(text), None).map_err(|e| e.reason().to_string())
}

/// Largest `--extra` accepted, inline or from a file.
const MAX_EXTRA_BYTES: u64 = 1024 * 1024;

/// Parses `--extra`: a JSON object, inline or from `@FILE`.
pub fn parse_extra(text: &str) -> Result<serde_json::Value, String> {
    let json = match text.strip_prefix('@') {
        Some(path) => {
            let size = std::fs::metadata(path)
                .map_err(|e| format!("cannot read {path}: {e}"))?
                .len();
            if size > MAX_EXTRA_BYTES {
                return Err(format!("{path} is larger than 1 MiB"));
            }
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?
        }
        None => text.to_string(),
    };
    extra_object(serde_json::from_str(&json).map_err(|e| format!("not JSON: {e}"))?)
}

/// Checks adapter-specific options are a JSON object.
pub fn extra_object(value: serde_json::Value) -> Result<serde_json::Value, String> {
    if value.is_object() {
        Ok(value)
    } else {
        Err("must be a JSON object, e.g. {\"tools\": []}".into())
    }
}

/// Resolves `--cwd` to an absolute path.
pub fn parse_cwd(text: &str) -> Result<String, String> {
    let dir = parse_dir(text)?;
    Ok(dir.to_string_lossy().into_owned())
}

fn parse_env_name(text: &str) -> Result<String, String> {
    names::env_name(text).map_err(|e| e.reason().to_string())
}

fn parse_program(text: &str) -> Result<String, String> {
    names::program(text).map_err(|e| e.reason().to_string())
}

fn parse_mcp_config(text: &str) -> Result<McpServers, String> {
    let json = std::fs::read_to_string(text).map_err(|e| format!("cannot read it: {e}"))?;
    McpServers::from_json(&json).map_err(|e| e.to_string())
}

fn parse_agents(text: &str) -> Result<serde_json::Value, String> {
    let json = std::fs::read_to_string(text).map_err(|e| format!("cannot read it: {e}"))?;
    let agents: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("not JSON: {e}"))?;
    match agents.as_object() {
        Some(map) if map.values().all(serde_json::Value::is_object) => Ok(agents),
        _ => Err("must be a JSON object of sub-agents by name, each an object".into()),
    }
}

fn parse_price_table(text: &str) -> Result<Arc<PriceTable>, String> {
    let json = std::fs::read_to_string(text).map_err(|e| format!("cannot read it: {e}"))?;
    PriceTable::from_json(&json)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn parse_policy(text: &str) -> Result<Policy, String> {
    Policy::load(Path::new(text)).map_err(|e| e.to_string())
}

/// Parses `a,b,c`; an empty value is an empty list.
pub fn parse_tool_list(text: &str) -> Result<ToolList, String> {
    let tools: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|tool| !tool.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(bad) = tools
        .iter()
        .find(|tool| tool.chars().any(char::is_whitespace))
    {
        return Err(format!("tool name {bad:?} contains whitespace"));
    }
    Ok(ToolList(tools))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_with_units_and_respect_the_ceiling() {
        assert_eq!(parse_memory("256MiB"), Ok(256 * 1024 * 1024));
        assert!(parse_memory("lots").unwrap_err().contains("not a size"));
        assert!(parse_memory("2GiB").unwrap_err().contains("ceiling"));
        assert!(parse_memory("10KiB").unwrap_err().contains("too small"));
    }

    #[test]
    fn durations_parse_with_units_and_must_be_positive() {
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn tool_lists_split_on_commas_and_an_empty_value_allows_none() {
        assert_eq!(
            parse_tool_list("Read, Grep"),
            Ok(ToolList(vec!["Read".into(), "Grep".into()]))
        );
        assert_eq!(parse_tool_list(""), Ok(ToolList(vec![])));
        assert!(parse_tool_list("Read,Web Fetch").is_err());
    }

    #[test]
    fn event_sizes_parse_with_units() {
        assert_eq!(parse_event_size("1MiB"), Ok(1024 * 1024));
        assert!(parse_event_size("12").is_err());
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
