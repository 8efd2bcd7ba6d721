//! How the engine's messages name what a user can change.
//!
//! A message that says a limit was reached or a request was refused should
//! tell the user what to change, and only the caller knows how its users
//! change things: the command line has flags (`--fuel`,
//! `--allow-net=example.com:80`), a protocol server has request fields, an
//! embedding application has its own settings. The engine states the
//! problem and asks the run's [`SettingNames`] for the words; the library's
//! own default, [`FieldNames`], names the fields of its types.
//!
//! What a user can change is a run's [`Setting`] or a [`Grant`] (the
//! remedy of a refused request, [`Denial`](crate::Denial)); this module
//! imports nothing else of the engine.

use serde::{Deserialize, Serialize};

/// The one of `known` a mistyped `word` most likely meant, when one is
/// close enough: the likeness clap uses for "a similar argument exists"
/// (Jaro-Winkler over 0.8), so every "did you mean" of moat agrees.
pub fn likely_meant<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|candidate| (strsim::jaro_winkler(word, candidate), candidate))
        .filter(|(likeness, candidate)| *likeness > 0.8 && *candidate != word)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// A setting of a run that a message can point the user to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// The run's wall-clock limit ([`RunLimits::timeout`](crate::RunLimits)).
    Timeout,
    /// The run's CPU budget ([`RunLimits::fuel`](crate::RunLimits)).
    Fuel,
    /// The run's memory cap ([`RunLimits::max_memory_bytes`](crate::RunLimits)).
    MaxMemory,
    /// The tools the run may use ([`RunOptions::allowed_tools`](crate::RunOptions)).
    AllowedTools,
    /// The tools the run may not use ([`RunOptions::disallowed_tools`](crate::RunOptions)).
    DisallowedTools,
    /// The largest event the run may emit ([`RunLimits::max_event_bytes`](crate::RunLimits)).
    MaxEventSize,
    /// The most connections the run may have open ([`RunLimits::max_connections`](crate::RunLimits)).
    MaxConnections,
    /// The most files the run may have open ([`RunLimits::max_open_files`](crate::RunLimits)).
    MaxOpenFiles,
    /// The most processes the run's programs may have ([`RunLimits::max_processes`](crate::RunLimits)).
    MaxProcesses,
    /// The CPUs the run's programs may use ([`RunLimits::milli_cpus`](crate::RunLimits)).
    Cpus,
    /// How far the run's backend may go on its own (its trust level).
    Trust,
    /// The hosts the run may reach.
    AllowNet,
    /// The directories the run may read.
    AllowRead,
    /// The directories the run may read and write.
    AllowWrite,
    /// The environment variables the run may see.
    AllowEnv,
    /// The programs the run may start.
    AllowRun,
    /// The secrets the run's requests carry, added by the host.
    Secret,
    /// The Unix sockets outside its write grants the run's programs may
    /// reach.
    AllowUnixSocket,
    /// The files that run code later the run may change all the same.
    AllowWriteProtected,
    /// Model calls moat cannot read, under a budget.
    AllowUnmetered,
    /// Destinations read as a model API.
    Meter,
    /// The most the run (and its children) may spend, in US dollars.
    MaxBudget,
    /// The most tokens the run (and its children) may use.
    MaxTokens,
    /// The model the run asks its backend for ([`RunOptions::model`](crate::RunOptions)).
    Model,
    /// The most model calls the run (and its children) may make.
    MaxModelCalls,
}

/// A grant that would allow a refused request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grant {
    /// Outgoing HTTP(S) to `host` on `port`.
    Net {
        /// A name, an IPv4 address or a bracketed IPv6 address.
        host: String,
        /// The port.
        port: u16,
    },
    /// Reading a directory (a program's working directory must lie inside
    /// a granted one).
    Read {
        /// The directory.
        dir: String,
    },
    /// Starting a program.
    Run {
        /// A bare name or an absolute path.
        program: String,
    },
    /// Starting a program named by a bare name or an absolute path: the
    /// adapter named it by a relative path, which no grant matches.
    RunByNameOrPath,
    /// An environment variable, with the host's value (which the adapter
    /// may then set for the programs it starts).
    Env {
        /// The variable's name.
        name: String,
    },
    /// A named Unix socket outside the run's write grants, for its
    /// programs to connect to.
    UnixSocket {
        /// The socket's path.
        path: String,
    },
    /// Model calls moat cannot read the usage of, under a budget in
    /// tokens or dollars.
    Unmetered,
}

/// The caller's words for its settings and grants, used in the messages of
/// the events the engine makes.
pub trait SettingNames: Send + Sync {
    /// The name of `setting` as the user writes it, e.g. `--fuel`.
    fn setting(&self, setting: Setting) -> String;
    /// `setting` given `value`, as the user writes it, e.g.
    /// `--allow-net=example.com`; by default the setting's name, then the
    /// value.
    fn assignment(&self, setting: Setting, value: &str) -> String {
        format!("{} {value}", self.setting(setting))
    }
    /// How the user gives `grant`, as the end of the sentence "to allow
    /// it, …", e.g. `run with --allow-net=example.com:80`.
    fn grant(&self, grant: &Grant) -> String;
}

/// The library's own names: the fields of [`RunLimits`](crate::RunLimits)
/// and [`RunOptions`](crate::RunOptions), and grants described as data.
#[derive(Debug, Clone, Copy, Default)]
pub struct FieldNames;

impl SettingNames for FieldNames {
    fn setting(&self, setting: Setting) -> String {
        match setting {
            Setting::Timeout => "`limits.timeout`",
            Setting::Fuel => "`limits.fuel`",
            Setting::MaxMemory => "`limits.max_memory_bytes`",
            Setting::AllowedTools => "`options.allowed_tools`",
            Setting::DisallowedTools => "`options.disallowed_tools`",
            Setting::MaxEventSize => "`limits.max_event_bytes`",
            Setting::MaxConnections => "`limits.max_connections`",
            Setting::MaxOpenFiles => "`limits.max_open_files`",
            Setting::MaxProcesses => "`limits.max_processes`",
            Setting::Cpus => "`limits.milli_cpus`",
            Setting::Trust => "`trust`",
            Setting::AllowNet => "`grants.net`",
            Setting::AllowRead => "`grants.read`",
            Setting::AllowWrite => "`grants.write`",
            Setting::AllowEnv => "`grants.env`",
            Setting::AllowRun => "`grants.run`",
            Setting::Secret => "`grants.secrets`",
            Setting::AllowUnixSocket => "`grants.unix_sockets`",
            Setting::AllowWriteProtected => "`grants.write_protected`",
            Setting::AllowUnmetered => "`grants.unmetered`",
            Setting::Meter => "`grants.meter`",
            Setting::MaxBudget => "`options.max_budget_usd`",
            Setting::MaxTokens => "`limits.max_tokens`",
            Setting::Model => "`options.model`",
            Setting::MaxModelCalls => "`limits.max_model_calls`",
        }
        .to_owned()
    }

    fn grant(&self, grant: &Grant) -> String {
        match grant {
            Grant::Net { host, port } => format!("grant net access to {host}:{port}"),
            Grant::Read { dir } => format!("grant read access to {dir:?}"),
            Grant::Run { program } => format!("grant running {program:?}"),
            Grant::RunByNameOrPath => {
                "name the program by a bare name or an absolute path, and grant it".to_owned()
            }
            Grant::Env { name } => format!("grant the variable {name}"),
            Grant::UnixSocket { path } => format!("grant the Unix socket {path:?}"),
            Grant::Unmetered => "grant `grants.unmetered`".to_owned(),
        }
    }
}
