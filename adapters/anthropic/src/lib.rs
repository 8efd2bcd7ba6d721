//! The `anthropic` adapter: the Anthropic Messages API, streamed, over
//! `wasi:http`.
//!
//! Built into the `moat` binary:
//! `moat run anthropic "hi" --model claude-sonnet-4-5`. The base URL comes
//! from `options.extra.base_url`, else `ANTHROPIC_BASE_URL`, else the
//! public API; the key from `ANTHROPIC_API_KEY`. Its declared needs are the
//! public API's host and those two variables; a user pointing it at another
//! server grants that host with `--allow-net` (docs/llm-adapters.md).
//!
//! - [`config`]: the request, and the refusals before it is sent;
//! - [`stream`]: stream events to moat events (text deltas and text per
//!   block, thinking, tool calls from `input_json_delta`, usage and the
//!   stop reason in done, mid-stream errors).
//!
//! HTTP failures, the run's phases and interruption are the shared
//! `moat-llm-support` crate's.

pub mod config;
pub mod stream;

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};
use moat_llm_support::{Session, Toolbox};

use config::DEFAULT_HOST;
use stream::Translator;

/// What `moat inspect` says the adapter is.
const DESCRIPTION: &str = "Anthropic Messages API, streamed: text, thinking, tool calls";

/// One run of the adapter.
pub struct Anthropic {
    session: Session<Translator>,
}

impl Adapter for Anthropic {
    fn info() -> AdapterInfo {
        config::VENDOR.adapter_info(DEFAULT_HOST, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let config = config::configure(&prompt, &options, |name| std::env::var(name).ok())?;
        // The servers start once the run's own options have passed.
        let toolbox = Toolbox::start(&options)?;
        let session = Session::new(config, config::request, &options, toolbox);
        Ok(Anthropic { session })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }

    fn ready(&self) -> bool {
        self.session.ready()
    }
}

moat_guest::export_adapter!(Anthropic);
