//! What a request makes for a launch: what it asks, the ceiling it sets
//! as the flags of whoever starts runs, and its [`LaunchSpec`] — made in
//! this one place from the one request type.

use std::path::PathBuf;
use std::sync::Arc;

use moat_engine::SettingNames;

use super::RunRequest;
use crate::admit::{Asked, Ceiling};
use crate::limits::Timeout;
use crate::spec::{AdapterRef, LaunchSpec};

impl RunRequest {
    /// What it asks for: the grants it names (all allowed when none), its
    /// trust, its limits.
    pub fn asked(&self) -> Asked {
        Asked {
            grants: self.grants.asked(),
            trust: self.trust,
            limits: self.limits.clone(),
        }
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
                max_memory_bytes: limits.max_memory_bytes.map_or(host.max_memory_bytes, |b| {
                    b.min(moat_sandbox::MAX_MEMORY_CEILING)
                }),
                max_program_memory_bytes: limits
                    .max_memory_bytes
                    .unwrap_or(host.max_program_memory_bytes),
                max_event_bytes: limits.max_event_bytes.unwrap_or(host.max_event_bytes),
                max_connections: limits.max_connections.unwrap_or(host.max_connections),
                max_open_files: limits.max_open_files.unwrap_or(host.max_open_files),
                max_processes: limits.max_processes.unwrap_or(host.max_processes),
                milli_cpus: limits.milli_cpus.or(host.milli_cpus),
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
