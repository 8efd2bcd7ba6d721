//! A run's limits as records keep them and jobs carry them: plain numbers,
//! the same JSON in the local store and in the cluster.

use std::time::Duration;

use moat_engine::RunLimits;
use serde::{Deserialize, Serialize};

/// Which limits of a run's programs its user asked for (rather than
/// took by default): a place that cannot hold one refuses the run rather
/// than run it unlimited; one that can hold none of the others runs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskedProgramLimits {
    /// Its memory (`--max-memory`).
    #[serde(default)]
    pub memory: bool,
    /// Its processes (`--max-processes`).
    #[serde(default)]
    pub processes: bool,
    /// Its CPUs (`--cpus`).
    #[serde(default)]
    pub cpus: bool,
}

impl AskedProgramLimits {
    /// None asked.
    pub fn is_none(&self) -> bool {
        *self == Self::default()
    }
}

/// A run's effective limits, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedLimits {
    /// Wall-clock limit in milliseconds; `None`: none.
    pub timeout_ms: Option<u64>,
    /// CPU budget in fuel units; `None`: unlimited.
    pub fuel: Option<u64>,
    /// Memory cap in bytes.
    pub max_memory_bytes: u64,
    /// Memory cap of its programs together in bytes (records from before
    /// it: the default).
    #[serde(default = "default_max_program_memory")]
    pub max_program_memory_bytes: u64,
    /// Largest accepted event in bytes.
    pub max_event_bytes: u64,
    /// Most open connections.
    pub max_connections: u64,
    /// Most open files.
    pub max_open_files: u64,
    /// Most processes of its programs (records from before it: the
    /// default).
    #[serde(default = "default_max_processes")]
    pub max_processes: u64,
    /// CPU time of its programs in thousandths of a CPU; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milli_cpus: Option<u64>,
    /// The most it (with its children) may spend, in US dollars; `None`:
    /// no budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// The most tokens it (with its children) may use; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The most model calls it (with its children) may make; `None`: no
    /// limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u64>,
}

/// What a run (with its children) has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spent {
    /// US dollars, as reported or priced; `None`: nothing it used had a
    /// price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Tokens, input and output.
    pub tokens: u64,
    /// Model calls.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub calls: u64,
}

fn default_max_program_memory() -> u64 {
    RunLimits::DEFAULT_MAX_PROGRAM_MEMORY_BYTES
}

fn default_max_processes() -> u64 {
    RunLimits::DEFAULT_MAX_PROCESSES
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Spent {
    /// In words: `$0.42 (1200 tokens)`, or `1200 tokens` when nothing
    /// had a price.
    pub fn words(&self) -> String {
        match self.usd {
            Some(usd) => format!("${usd:.2} ({} tokens)", self.tokens),
            None => format!("{} tokens", self.tokens),
        }
    }

    /// [`Spent::words`], with its model calls when `calls` counts them
    /// (a budget of calls): `30 tokens in 2 model calls`.
    pub fn words_with_calls(&self, calls: bool) -> String {
        match (calls, self.calls) {
            (false, _) => self.words(),
            (true, 1) => format!("{} in 1 model call", self.words()),
            (true, n) => format!("{} in {n} model calls", self.words()),
        }
    }
}

impl RecordedLimits {
    /// `limits` as records keep them.
    pub fn of(limits: &RunLimits) -> Self {
        Self {
            timeout_ms: limits
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            fuel: limits.fuel,
            max_memory_bytes: limits.max_memory_bytes,
            max_program_memory_bytes: limits.max_program_memory_bytes,
            max_event_bytes: limits.max_event_bytes as u64,
            max_connections: limits.max_connections as u64,
            max_open_files: limits.max_open_files as u64,
            max_processes: limits.max_processes,
            milli_cpus: limits.milli_cpus,
            budget_usd: None,
            max_tokens: None,
            max_model_calls: None,
        }
    }

    /// The engine's limits. Values too large for this machine saturate.
    pub fn to_run_limits(&self) -> RunLimits {
        let size = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        RunLimits {
            timeout: self.timeout_ms.map(Duration::from_millis),
            fuel: self.fuel,
            max_memory_bytes: self.max_memory_bytes,
            max_program_memory_bytes: self.max_program_memory_bytes,
            max_event_bytes: size(self.max_event_bytes),
            max_connections: size(self.max_connections),
            max_open_files: size(self.max_open_files),
            max_processes: self.max_processes,
            milli_cpus: self.milli_cpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_go_to_records_and_back() {
        let limits = RunLimits {
            timeout: Some(Duration::from_millis(1500)),
            fuel: Some(7),
            max_processes: 40,
            milli_cpus: Some(500),
            max_program_memory_bytes: 1 << 33,
            ..RunLimits::default()
        };
        let recorded = RecordedLimits::of(&limits);
        assert_eq!(recorded.timeout_ms, Some(1500));
        assert_eq!(recorded.to_run_limits(), limits);
        let json = serde_json::to_value(&recorded).unwrap();
        assert_eq!(json["maxMemoryBytes"], limits.max_memory_bytes);
        assert_eq!(json["maxProcesses"], 40);
        assert_eq!(json["milliCpus"], 500);
    }

    #[test]
    fn a_record_from_before_the_programs_limits_reads_with_their_defaults() {
        let mut json = serde_json::to_value(RecordedLimits::of(&RunLimits::default())).unwrap();
        let fields = json.as_object_mut().unwrap();
        fields.remove("maxProcesses");
        fields.remove("milliCpus");
        fields.remove("maxProgramMemoryBytes");
        let read: RecordedLimits = serde_json::from_value(json).unwrap();
        assert_eq!(
            read.max_program_memory_bytes,
            RunLimits::DEFAULT_MAX_PROGRAM_MEMORY_BYTES
        );
        assert_eq!(read.max_processes, RunLimits::DEFAULT_MAX_PROCESSES);
        assert_eq!(read.milli_cpus, None);
    }
}
