//! `moat:adapter/types` of 0.2.0: the newest's (unchanged since 0.3.0), but
//! for `options`.
//!
//! bindgen's `with` takes whole interfaces, and 0.3.0 changed one record of
//! `types` only: `options`, to which it added three fields. So 0.2.0's
//! bindings take this module for `types`: 0.3.0's generated types for all
//! the rest (the infos, events and errors a 0.2.0 component returns are
//! the same), and 0.2.0's `options`, declared here as bindgen would.
//! Nothing trusts the declaration: the generated bindings check its size
//! against `wit/v0.2.0` when they compile, and linking a 0.2.0 component
//! checks its fields, by name and type, against the component's own
//! (`adapters/testing/contract-v0-2` is one).

use wasmtime::component::{ComponentType, Lower};

use super::latest::moat::adapter::types as latest;
// Everything of the newest `types`; its `Options` is shadowed by 0.2.0's
// below.
pub use latest::*;

/// Options for one run, as 0.2.0 carries them: 0.3.0's without
/// `directories`, `mcp-servers` and `agents`.
#[derive(ComponentType, Lower, Clone, Debug)]
#[component(record)]
pub struct Options {
    #[component(name = "cwd")]
    pub cwd: Option<String>,
    #[component(name = "model")]
    pub model: Option<String>,
    #[component(name = "max-turns")]
    pub max_turns: Option<u32>,
    #[component(name = "max-budget-usd")]
    pub max_budget_usd: Option<f64>,
    #[component(name = "effort")]
    pub effort: Option<String>,
    #[component(name = "resume")]
    pub resume: Option<String>,
    #[component(name = "allowed-tools")]
    pub allowed_tools: Option<Vec<String>>,
    #[component(name = "disallowed-tools")]
    pub disallowed_tools: Vec<String>,
    #[component(name = "trust")]
    pub trust: TrustLevel,
    #[component(name = "system-prompt")]
    pub system_prompt: Option<String>,
    #[component(name = "extra")]
    pub extra: Option<String>,
}

impl From<latest::Options> for Options {
    /// 0.3.0's options without the fields 0.3.0 added, which are empty:
    /// a run that sets any of them is refused before its options are
    /// converted.
    fn from(options: latest::Options) -> Self {
        Self {
            cwd: options.cwd,
            model: options.model,
            max_turns: options.max_turns,
            max_budget_usd: options.max_budget_usd,
            effort: options.effort,
            resume: options.resume,
            allowed_tools: options.allowed_tools,
            disallowed_tools: options.disallowed_tools,
            trust: options.trust,
            system_prompt: options.system_prompt,
            extra: options.extra,
        }
    }
}
