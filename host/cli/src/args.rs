//! Command-line arguments.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand, ValueEnum};

use moat_launch::request::parse_duration;
use moat_runs::RunStatus;

use crate::flags::{
    CeilingFields, GrantFields, InspectFields, RequestFlags, RunFields, WorkflowFields,
};

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
    /// The most the tasks of a workflow started from the page get, as
    /// `moat workflow run`'s flags.
    #[command(flatten)]
    pub request: RequestFlags<WorkflowFields>,
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
    /// Land the commits the run made in its worktree on the project's
    /// current branch (a fast-forward, or each replayed on it with its
    /// author and message; all or none), instead of its changes as a
    /// patch on the working tree.
    #[arg(long)]
    pub commits: bool,
    /// Land what moat does not land unasked too: links the run made that
    /// point outside the project, and its changes to files that run code
    /// later (`moat diff` lists them).
    #[arg(long)]
    pub include_protected: bool,
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
    /// of their memory caps (a job's programs' too), e.g. 4GiB; a job
    /// waits for room, a child run that does not fit is refused [default:
    /// half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// The most this worker gives any run — grants, trust, limits: a job
    /// asking for more is refused (BOUNDARY_VIOLATION on its record).
    #[command(flatten)]
    pub ceiling: RequestFlags<CeilingFields>,
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
    pub grants: RequestFlags<GrantFields>,
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
    Apply(WorkflowApplyArgs),
}

/// `moat workflow apply`.
#[derive(Debug, Args)]
pub struct WorkflowApplyArgs {
    /// The workflow file (TOML, or JSON when it ends in .json).
    pub file: PathBuf,
    /// Land what moat does not land unasked too: links the tasks made
    /// that point outside the project, and their changes to files that
    /// run code later.
    #[arg(long)]
    pub include_protected: bool,
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
    /// The most any task may have — grants, trust, limits — and how its
    /// run asks: a task's own grants and limits in the file can only
    /// narrow these. Each task works in the file's directory.
    #[command(flatten)]
    pub request: RequestFlags<WorkflowFields>,
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
    /// their memory caps (their programs' too, when asked), every
    /// descendant counted, e.g. 4GiB; a run that does not fit is refused
    /// [default: half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// The most any run may have — grants, trust, limits: a request can
    /// only ask for less.
    #[command(flatten)]
    pub ceiling: RequestFlags<CeilingFields>,
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
    /// Its traffic: every request and connection it made through moat,
    /// allowed or refused, with its model calls' usage (never a body or a
    /// header's value).
    #[arg(long)]
    pub net: bool,
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
    /// Only its traffic: each request and connection it made through moat
    /// (`moat:traffic` events), one line each.
    #[arg(long)]
    pub net: bool,
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
    pub run: RequestFlags<RunFields>,
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
    pub run: RequestFlags<RunFields>,
    /// Output format [default: pretty on a terminal, ndjson otherwise].
    #[arg(long, short, value_enum, help_heading = "Output")]
    pub output: Option<OutputFormat>,
    /// Leave nothing on disk: no record of the run in the store.
    #[arg(long, conflicts_with_all = ["detach", "parent"], help_heading = "Store")]
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
    /// Options every task gets unless its entry in --tasks says otherwise
    /// (with --parent, every task is a child of that live run).
    #[command(flatten)]
    pub run: RequestFlags<RunFields>,
    /// The most memory the running tasks may have together (the sum of
    /// their --max-memory, their programs' counted), e.g. 4GiB; tasks
    /// beyond it wait for room [default: half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_total_memory, help_heading = "Limits")]
    pub max_total_memory: Option<u64>,
    /// Leave nothing on disk: no record of the tasks in the store.
    #[arg(long, conflicts_with = "parent", help_heading = "Store")]
    pub no_store: bool,
    /// Output format [default: pretty on a terminal, ndjson otherwise].
    #[arg(long, short, value_enum, help_heading = "Output")]
    pub output: Option<OutputFormat>,
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

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A built-in adapter name or a path to a .wasm component.
    #[arg(add = crate::complete::adapters())]
    pub adapter: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The trust level, directories and grants to show the effect of, as
    /// `moat run` takes them.
    #[command(flatten)]
    pub request: RequestFlags<InspectFields>,
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

/// The most memory runs may hold together (`--max-total-memory`).
fn parse_total_memory(text: &str) -> Result<u64, String> {
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|_| "not a size; use e.g. 2GiB or 512MiB".to_string())?;
    if size.as_u64() < 1024 * 1024 {
        return Err("too small: a task needs at least 1MiB".into());
    }
    Ok(size.as_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
