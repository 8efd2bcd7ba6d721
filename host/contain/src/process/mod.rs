//! The process capability: the children of one run, exactly as granted.
//!
//! A run may start only the programs of its `--allow-run` grants, resolved
//! when the run starts ([`GrantedPrograms`]). Each child:
//!
//! - gets a small fixed base (`PATH`, safe), the run's granted variables
//!   with the host's values, and the values the adapter sets for granted
//!   names, never for a loader or interpreter hook ([`env`]);
//! - runs in a directory inside the run's granted directories, or, when the
//!   adapter names none, in an empty directory of the run's own that is
//!   removed with the run;
//! - leads its own process group, so signals and the final kill reach what
//!   it started too ([`groups`]), and dies with the host ([`spawner`]);
//! - in a contained run, is started by the run's init ([`init`]): in the
//!   run's namespaces and cgroup, without capabilities, under the socket
//!   filter and its own Landlock domain; in an uncontained run, by moat;
//! - is killed when the guest drops it, and every child is killed when the
//!   run ends for any reason: done, trap, timeout, abort (`SIGTERM` at the
//!   abort, `SIGKILL` at the end) or the host shutting down.
//!
//! Limits: [`MAX_LIVE_CHILDREN`] children at a time, stdout lines of at
//! most [`MAX_LINE_BYTES`] (read only when the guest asks, so a child that
//! writes faster than the adapter reads waits on its pipe instead of
//! filling the host's memory), a stderr tail of [`STDERR_TAIL_BYTES`].
//!
//! A refusal answers the guest with `denied` (saying what was refused) and
//! is recorded in the run's [`DenialLog`], which the engine turns into a
//! `CAPABILITY_DENIED` event.
//!
//! The types here are the contract's, version-neutral: the newest contract
//! version's module converts its generated types to them
//! (`contract::v0_4_0::process`), which older versions' bindings share.

mod calls;
mod cgroup;
mod cgroup_limits;
mod child;
mod connector;
mod env;
mod git_config;
mod groups;
mod init;
pub(crate) mod isolate;
pub(crate) mod landlock;
pub(crate) mod seccomp;
mod spawner;
mod tree;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

pub use child::RunningChild;

/// Ends what moat processes killed with `SIGKILL` left behind: the
/// programs still in their runs' cgroups (killed, the cgroups removed) and
/// their runs' private directories. Every moat calls it as it starts, so
/// the next moat of any kind cleans up, not only the next that starts a
/// program; it is done once a process.
pub fn clean_up_after_gone_moats() {
    cgroup::remove_left_behind();
    groups::remove_stale_private_dirs();
}
pub use cgroup::{program_limits_for, program_limits_here};
pub use cgroup_limits::{LimitsHere, ProgramLimits};
pub use groups::{ChildGroups, Containment};
use moat_engine::{Denial, DeniedRequest, Grant};
use moat_grants::names;
use moat_grants::programs::{GrantedPrograms, ProgramRefusal};
pub use moat_process_model::{ExitStatus, ProcessError, Signal, Stdin};
use moat_process_model::{
    MAX_ARGS_AND_VARS, MAX_ARGS_AND_VARS_BYTES, MAX_LINE_BYTES, MAX_LIVE_CHILDREN,
};

use self::child::{ChildProcess, LineReader, StderrTail};
use self::init::{InitSetup, ProgramCall, RunInit};
use self::isolate::Containment as Isolation;
use crate::denials::DenialLog;
use crate::egress::{NetworkContainment, Policy, RunEgress};

/// A child's environment variables, name and value.
type ChildVars = Vec<(String, String)>;

/// The run's init makes the sockets of the run's own network, for the
/// proxy to connect there.
impl crate::egress::SocketSource for RunInit {
    fn socket(&self, family: i32) -> futures::future::BoxFuture<'_, std::io::Result<OwnedFd>> {
        Box::pin(RunInit::socket(self, family))
    }
}

impl std::fmt::Debug for RunInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunInit")
    }
}

/// What an adapter asks to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// A granted program: its granted name or its absolute path.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables on top of the run's granted ones.
    pub env: Vec<(String, String)>,
    /// Working directory, inside a granted directory; `None`: the run's own
    /// empty one.
    pub cwd: Option<String>,
    /// Whether its stdin is a pipe from the adapter or closed.
    pub stdin: Stdin,
}

/// What a run may start, and the groups of what it started.
pub struct ProcessTable {
    adapter: Arc<str>,
    programs: GrantedPrograms,
    /// The children's environment, decided when the run started.
    env: self::env::ChildEnv,
    /// Granted directories (read or write), canonical.
    dirs: Vec<PathBuf>,
    /// Unix sockets granted outside the write grants, canonical.
    unix_sockets: Vec<PathBuf>,
    /// Files that run code later, read-only to the programs in the run's
    /// mount namespace.
    read_only: Vec<PathBuf>,
    groups: ChildGroups,
    denials: DenialLog,
    /// What the children may reach of the filesystem; `None`: not contained.
    rights: Option<self::landlock::ProgramRights>,
    /// What the children may reach of the network, through the proxy.
    policy: Policy,
    /// The proxy and the namespace of the children, made at the first
    /// contained child.
    egress: Option<RunEgress>,
    /// The run's init, which starts its contained children; made at the
    /// first. Declared after `egress`: dropped first.
    init: Option<Arc<RunInit>>,
    /// What makes the connections of the run's programs, in a network of
    /// the run's own; started with the init.
    connector: Option<self::connector::Connector>,
    /// The Landlock rulesets of the run's programs, built once each.
    rulesets: HashMap<PathBuf, Option<Arc<OwnedFd>>>,
    /// Who is asked for a program no grant names; `None`: refused.
    asking: Option<crate::Asking>,
    /// What a program approved mid-run is found and given by: the host's
    /// `PATH`, the directories the run may write (never searched), the
    /// variables granted and the adapter's environment.
    late: LateGrants,
}

/// What [`ProcessTable`] keeps to grant a program while the run runs.
struct LateGrants {
    path_var: Option<std::ffi::OsString>,
    write: Vec<PathBuf>,
    env_grants: Vec<String>,
    adapter_env: Vec<(String, String)>,
}

/// A child just started, however it was, and moat's ends of its pipes.
struct Started {
    pid: u32,
    process: ChildProcess,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: tokio::process::ChildStdout,
    stderr: tokio::process::ChildStderr,
}

impl ProcessTable {
    /// The process capability of a run with `grants`, whose children's
    /// groups are kept in `groups`.
    pub fn new(
        adapter: Arc<str>,
        grants: &moat_grants::Grants,
        confinement: &moat_grants::Confinement,
        dirs: &[moat_grants::OpenDir],
        env: Vec<(String, String)>,
        groups: ChildGroups,
        policy: Policy,
    ) -> Self {
        let denials = policy.denials.clone();
        let path_var = std::env::var_os("PATH");
        // The granted directories are canonical paths, and the programs'
        // rights are given through their handles: a path changed since
        // the run was admitted reaches nothing more.
        let handles = |paths: &[PathBuf]| -> Vec<moat_grants::OpenDir> {
            dirs.iter()
                .filter(|dir| paths.iter().any(|path| path == dir.path()))
                .cloned()
                .collect()
        };
        let read_only: Vec<PathBuf> = grants
            .read
            .iter()
            .filter(|dir| !grants.write.contains(dir))
            .cloned()
            .collect();
        let write = grants.write.clone();
        Self {
            rights: self::landlock::ProgramRights::new(
                confinement,
                handles(&read_only),
                handles(&write),
            ),
            adapter,
            programs: GrantedPrograms::resolve(&grants.run, path_var.as_deref(), &write),
            // A run that may start no program has no children to give an
            // environment to: its PATH is not looked through.
            env: if grants.run.is_empty() {
                self::env::ChildEnv::default()
            } else {
                self::env::ChildEnv::new(&grants.env, &env, &write)
            },
            dirs: grants.preopens().into_iter().map(|p| p.host).collect(),
            unix_sockets: grants.unix_sockets.clone(),
            read_only: match confinement {
                moat_grants::Confinement::Contained { read_only, .. } => read_only.clone(),
                moat_grants::Confinement::Off => Vec::new(),
            },
            groups,
            denials,
            asking: policy.asking.clone(),
            policy,
            egress: None,
            init: None,
            connector: None,
            rulesets: HashMap::new(),
            late: LateGrants {
                path_var,
                write,
                env_grants: grants.env.clone(),
                adapter_env: env,
            },
        }
    }

    /// The base URLs of the run's vendor secrets' routes (e.g.
    /// `OPENAI_BASE_URL`), for the adapter's own environment: an adapter
    /// whose CLI takes its endpoint from the command line or a config
    /// rather than the variable (Codex) passes it on. Only for a contained
    /// run that may start programs; its proxy starts now for that (else at
    /// its first program). Empty when it cannot start: the first program
    /// then reports why.
    pub fn secret_routes(&mut self) -> Vec<(String, String)> {
        let secrets = self.policy.secrets.clone();
        let routed = (secrets.names().iter()).any(|name| moat_grants::vendor_key(name).is_some());
        if self.programs.is_empty() || self.rights.is_none() || !routed {
            return Vec::new();
        }
        match self.egress() {
            Ok(egress) => egress.secret_routes(&secrets),
            Err(error) => {
                tracing::debug!(adapter = %self.adapter, "the run's proxy did not start: {error}");
                Vec::new()
            }
        }
    }

    /// The URL of the run's approvals for the agent CLI it starts: only
    /// when the run asks and its programs are contained (the proxy serves
    /// it); its proxy starts now for that.
    pub fn approval_route(&mut self) -> Option<String> {
        if self.asking.is_none() || self.programs.is_empty() || self.rights.is_none() {
            return None;
        }
        match self.egress() {
            Ok(egress) => Some(egress.approval_route()),
            Err(error) => {
                tracing::debug!(adapter = %self.adapter, "the run's proxy did not start: {error}");
                None
            }
        }
    }

    /// The run's proxy and its programs' network namespace, started at the
    /// first need.
    fn egress(&mut self) -> std::io::Result<&RunEgress> {
        match self.egress {
            Some(ref egress) => Ok(egress),
            None => {
                let started = RunEgress::start(self.policy.clone(), NetworkContainment::detect())?;
                Ok(self.egress.insert(started))
            }
        }
    }

    /// How this run's programs are contained, in a word; `None` when it may
    /// start none.
    pub fn containment(&self) -> Option<String> {
        if self.programs.is_empty() {
            return None;
        }
        Some(match self.rights {
            None => "off".into(),
            Some(_) => NetworkContainment::detect().name().into(),
        })
    }

    /// Starts what `request` asks for, if the run was granted it.
    pub async fn spawn(&mut self, request: SpawnRequest) -> Result<RunningChild, ProcessError> {
        let program = self.program_asking(&request.program).await?;
        check_sizes(&request)?;
        let env = self
            .env
            .for_child(&shown(&request.program), &request.env)
            .map_err(|denial| self.deny(denial))?;
        let cwd = self.cwd(request.cwd.as_deref(), &request.program)?;
        let chose_tmpdir = request.env.iter().any(|(name, _)| name == "TMPDIR");
        if self.groups.len() >= MAX_LIVE_CHILDREN {
            return Err(ProcessError::LimitReached(format!(
                "a run may have {MAX_LIVE_CHILDREN} children at a time; wait for one and drop it before starting another"
            )));
        }
        let started = if self.rights.is_none() {
            self.start_uncontained(&program, &request, env, &cwd).await
        } else {
            self.start_contained(&program, &request, env, &cwd, chose_tmpdir)
                .await
        }?;
        let pid = started.pid;
        self.groups.add(pid);
        tracing::info!(adapter = %self.adapter, pid, program = %program.display(), "child started");
        Ok(RunningChild {
            pid,
            stdin: started.stdin,
            process: started.process,
            stdout: LineReader::new(started.stdout, MAX_LINE_BYTES),
            stderr: StderrTail::collect(started.stderr),
            groups: self.groups.clone(),
        })
    }

    /// Starts a child of a contained run: by the run's init, in its
    /// namespaces, under the program's Landlock domain.
    async fn start_contained(
        &mut self,
        program: &Path,
        request: &SpawnRequest,
        env: ChildVars,
        cwd: &Path,
        chose_tmpdir: bool,
    ) -> Result<Started, ProcessError> {
        let (env, ruleset) = self.contain(program, env, chose_tmpdir)?;
        let init = self.init().await.map_err(|error| {
            ProcessError::Io(format!("cannot contain {}: {error}", program.display()))
        })?;
        let started = init
            .spawn(ProgramCall {
                program,
                args: &request.args,
                env: &env,
                cwd,
                piped_stdin: matches!(request.stdin, Stdin::Piped),
                ruleset: ruleset.as_deref(),
            })
            .await
            .map_err(|error| cannot_start(program, &error))?;
        Ok(Started {
            pid: started.child.pid,
            process: ChildProcess::Contained(started.child),
            stdin: started.stdin,
            stdout: started.stdout,
            stderr: started.stderr,
        })
    }

    /// Starts a child of a run that is not contained: forked by moat, in
    /// the run's cgroup when it has one.
    async fn start_uncontained(
        &mut self,
        program: &Path,
        request: &SpawnRequest,
        env: ChildVars,
        cwd: &Path,
    ) -> Result<Started, ProcessError> {
        let containment = Isolation {
            cgroup: self.groups.cgroup_for_child(),
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(&request.args)
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(match request.stdin {
                Stdin::Null => Stdio::null(),
                Stdin::Piped => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut process = spawner::spawn(command, containment)
            .await
            .map_err(|error| cannot_start(program, &error))?;
        let pid = process
            .id()
            .ok_or_else(|| ProcessError::Io("the child exited at once".into()))?;
        Ok(Started {
            pid,
            stdin: process.stdin.take(),
            stdout: process.stdout.take().expect("stdout is piped"),
            stderr: process.stderr.take().expect("stderr is piped"),
            process: ChildProcess::Direct(process),
        })
    }

    /// The run's init, started at the first contained child: in the run's
    /// network namespace (with the proxy), cgroup, PID and mount
    /// namespaces, holding the socket filter.
    async fn init(&mut self) -> std::io::Result<&RunInit> {
        if self.init.is_none() {
            let namespaces = self.egress()?.namespaces();
            let network = match namespaces {
                Some(_) => seccomp::Network::Own,
                None => seccomp::Network::Hosts,
            };
            let cgroup = self.groups.cgroup_for_child();
            // Without a cgroup to hold it, the process limit is the init's
            // `RLIMIT_NPROC`, counted in the run's own user namespace.
            let max_processes = namespaces
                .as_ref()
                .filter(|namespaces| namespaces.user.is_some())
                .and_then(|_| self.groups.processes_unheld());
            let seccomp = socket_filter(network).map_err(std::io::Error::other)?;
            let connect_filter =
                (network == seccomp::Network::Own).then(|| Arc::new(seccomp::connect_filter()));
            let mut started = RunInit::start(|socket| InitSetup {
                socket,
                namespaces,
                cgroup,
                max_processes,
                seccomp,
                connect_filter,
                proc_access: self::landlock::proc_access(),
                startup_text: self::isolate::StartupText::of_moat(),
                read_only: self::isolate::ReadOnlyMount::prepare(&self.read_only),
                host_pid: std::process::id(),
            })
            .await?;
            if let Some(listener) = started.take_connect_listener() {
                let places = self.socket_places().map_err(std::io::Error::other)?;
                let proxy = self
                    .egress
                    .as_ref()
                    .map(|egress| self::connector::ProxyCallers {
                        traffic: self.policy.traffic.clone(),
                        port: egress.port(),
                    });
                self.connector = Some(self::connector::Connector::start(
                    listener,
                    places,
                    self.denials.clone(),
                    proxy,
                )?);
            }
            let started = Arc::new(started);
            if network == seccomp::Network::Own {
                self.policy.own_network.set(started.clone());
            }
            self.init = Some(started);
        }
        Ok(self.init.as_ref().expect("started above"))
    }

    /// Where the run's programs may reach named Unix sockets: its write
    /// grants, its private directory and its socket grants.
    fn socket_places(&mut self) -> Result<self::connector::SocketPlaces, ProcessError> {
        let mut dirs = self.late.write.clone();
        dirs.push(self.private_dir()?);
        Ok(self::connector::SocketPlaces::new(
            dirs,
            self.unix_sockets.clone(),
        ))
    }

    /// The environment of a contained child of `program` and its Landlock
    /// ruleset (`None` where the kernel has no Landlock): the run's proxy,
    /// and `TMPDIR` the run's own directory (the one place besides its
    /// grants it may write) unless the adapter chose one (`chose_tmpdir`):
    /// the host's, when granted, is out of its reach.
    fn contain(
        &mut self,
        program: &Path,
        mut env: ChildVars,
        chose_tmpdir: bool,
    ) -> Result<(ChildVars, Option<Arc<OwnedFd>>), ProcessError> {
        let cannot = |what: String| {
            ProcessError::Io(format!("cannot contain {}: {what}", program.display()))
        };
        let secrets = self.policy.secrets.clone();
        let egress = self.egress().map_err(|e| cannot(e.to_string()))?;
        egress.proxy_env(&mut env, &secrets);
        let host_network_proxy = egress.namespaces().is_none().then(|| egress.port());
        let private_dir = self.private_dir()?;
        if !chose_tmpdir {
            env.retain(|(name, _)| name != "TMPDIR");
            env.push(("TMPDIR".into(), private_dir.to_string_lossy().into_owned()));
        }
        git_config::add_to(&mut env);
        if let Some(ruleset) = self.rulesets.get(program) {
            return Ok((env, ruleset.clone()));
        }
        let rights = self.rights.as_ref().expect("a contained run");
        let ruleset = rights
            .ruleset(
                program,
                &private_dir,
                &self.env.path_dirs(),
                host_network_proxy,
            )
            .map_err(|e| cannot(e.to_string()))?
            .map(Arc::new);
        self.rulesets.insert(program.to_path_buf(), ruleset.clone());
        Ok((env, ruleset))
    }

    /// [`program`](Self::program), asking for one no grant names when the
    /// run asks ([`crate::approvals`]): approved, it is granted for the
    /// rest of the run, found as a granted one is.
    async fn program_asking(&mut self, requested: &str) -> Result<PathBuf, ProcessError> {
        let nameable = requested.starts_with('/') || !requested.contains('/');
        if let (Some(asking), Err(ProgramRefusal::NotGranted), true) =
            (self.asking.clone(), self.programs.find(requested), nameable)
        {
            let program = shown(requested);
            let denial = Denial {
                request: DeniedRequest::Program {
                    program: program.clone(),
                },
                reason: "not granted".into(),
                remedy: Some(Grant::Run { program }),
            };
            match asking.ask_for_guest(denial).await {
                Ok(()) => self.grant_program(requested),
                Err(denial) => return Err(self.deny(denial)),
            }
        }
        self.program(requested)
    }

    /// Grants `program` from now on (an approval).
    fn grant_program(&mut self, program: &str) {
        let late = &self.late;
        if self.programs.is_empty() {
            // Its first program: the children's environment is made now.
            self.env = self::env::ChildEnv::new(&late.env_grants, &late.adapter_env, &late.write);
        }
        self.programs
            .add(program, late.path_var.as_deref(), &late.write);
    }

    fn program(&self, requested: &str) -> Result<PathBuf, ProcessError> {
        match self.programs.find(requested) {
            Ok(path) => Ok(path),
            Err(ProgramRefusal::NotInstalled { message }) => Err(ProcessError::NotFound(message)),
            Err(ProgramRefusal::Writable { path }) => Err(self.deny(Denial {
                request: DeniedRequest::Program {
                    program: shown(requested),
                },
                reason: format!(
                    "it is in a directory the run may write ({}), where the adapter could have put it",
                    shown(&path.to_string_lossy())
                ),
                remedy: None,
            })),
            Err(ProgramRefusal::NotGranted) => {
                let program = shown(requested);
                // A relative path is never matched by a grant.
                let remedy = if requested.starts_with('/') || !requested.contains('/') {
                    Grant::Run {
                        program: program.clone(),
                    }
                } else {
                    Grant::RunByNameOrPath
                };
                Err(self.deny(Denial {
                    request: DeniedRequest::Program { program },
                    reason: "not granted".into(),
                    remedy: Some(remedy),
                }))
            }
        }
    }

    /// The child's working directory: `requested` if it lies inside a
    /// granted directory, else the run's own empty one.
    fn cwd(&mut self, requested: Option<&str>, program: &str) -> Result<PathBuf, ProcessError> {
        let Some(requested) = requested else {
            return self.private_dir();
        };
        let refuse = |reason: &str| Denial {
            request: DeniedRequest::ProgramDir {
                program: shown(program),
                dir: shown(requested),
            },
            reason: reason.into(),
            remedy: Some(Grant::Read {
                dir: shown(requested),
            }),
        };
        if !Path::new(requested).is_absolute() {
            return Err(self.deny(refuse("a working directory must be an absolute path")));
        }
        let Ok(canonical) = std::fs::canonicalize(requested) else {
            return Err(self.deny(refuse("no such directory")));
        };
        if !canonical.is_dir() {
            return Err(self.deny(refuse("not a directory")));
        }
        if !self.dirs.iter().any(|dir| canonical.starts_with(dir)) {
            return Err(self.deny(refuse(
                "the working directory is outside the granted directories",
            )));
        }
        Ok(canonical)
    }

    fn private_dir(&mut self) -> Result<PathBuf, ProcessError> {
        self.groups
            .private_dir()
            .map_err(|e| ProcessError::Io(format!("cannot make the run's directory: {e}")))
    }

    fn deny(&self, denial: Denial) -> ProcessError {
        let message = denial.to_string();
        self.denials.record(denial);
        ProcessError::Denied(message)
    }
}

impl Drop for ProcessTable {
    fn drop(&mut self) {
        // The run is over, whatever ended it: nothing it started survives.
        self.groups.kill_all();
    }
}

/// Why `program` did not start.
fn cannot_start(program: &Path, error: &std::io::Error) -> ProcessError {
    ProcessError::Io(format!("cannot start {}: {error}", program.display()))
}

fn check_sizes(request: &SpawnRequest) -> Result<(), ProcessError> {
    for (name, value) in &request.env {
        names::env_name(name).map_err(|e| ProcessError::Io(e.to_string()))?;
        if value.contains('\0') {
            return Err(ProcessError::Io(format!(
                "the value of {name} contains a NUL byte"
            )));
        }
    }
    if request.args.iter().any(|arg| arg.contains('\0')) {
        return Err(ProcessError::Io("an argument contains a NUL byte".into()));
    }
    let count = request.args.len() + request.env.len();
    let bytes: usize = request.args.iter().map(String::len).sum::<usize>()
        + request
            .env
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>();
    if count > MAX_ARGS_AND_VARS || bytes > MAX_ARGS_AND_VARS_BYTES {
        return Err(ProcessError::Io(format!(
            "too many arguments and variables ({count}, {bytes} bytes; at most {MAX_ARGS_AND_VARS} and {MAX_ARGS_AND_VARS_BYTES} bytes)"
        )));
    }
    Ok(())
}

/// The socket filter of contained programs in `network`, compiled once
/// per process.
pub(crate) fn socket_filter(
    network: seccomp::Network,
) -> Result<Arc<seccompiler::BpfProgram>, String> {
    type Compiled = OnceLock<Result<Arc<seccompiler::BpfProgram>, String>>;
    static OWN: Compiled = OnceLock::new();
    static HOSTS: Compiled = OnceLock::new();
    let compiled = match network {
        seccomp::Network::Own => &OWN,
        seccomp::Network::Hosts => &HOSTS,
    };
    compiled
        .get_or_init(|| {
            seccomp::socket_filter(network)
                .map(Arc::new)
                .map_err(|e| format!("cannot build the socket filter: {e}"))
        })
        .clone()
}

/// A guest's string as shown in a message: at most 200 bytes of it.
fn shown(text: &str) -> String {
    text[..text.floor_char_boundary(200)].to_owned()
}
