//! The `openai` adapter: OpenAI Chat Completions, streamed, over
//! `wasi:http`, for the public API and every OpenAI-compatible server
//! (Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter).
//!
//! Built into the `moat` binary: `moat run openai "hi" --model gpt-4o-mini`.
//! The base URL comes from `options.extra.base_url`, else `OPENAI_BASE_URL`,
//! else the public API; the key from `OPENAI_API_KEY` (optional for local
//! servers). Its declared needs are the public API's host and those two
//! variables; a user pointing it at another server grants that host with
//! `--allow-net` (docs/llm-adapters.md).
//!
//! - [`config`]: the request, and the refusals before it is sent;
//! - [`stream`]: stream chunks to events (text deltas, the assembled text,
//!   tool calls accumulated by index, usage and the finish reason in done).
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
const DESCRIPTION: &str = "OpenAI Chat Completions and OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), streamed";

/// One run of the adapter.
pub struct OpenAi {
    session: Session<Translator>,
}

impl Adapter for OpenAi {
    fn info() -> AdapterInfo {
        config::VENDOR.adapter_info(DEFAULT_HOST, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let config = config::configure(&prompt, &options, |name| std::env::var(name).ok())?;
        // The servers start once the run's own options have passed.
        let toolbox = Toolbox::start(&options)?;
        Ok(OpenAi {
            session: Session::new(config, config::request, &options, toolbox),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }

    fn ready(&self) -> bool {
        self.session.ready()
    }
}

moat_guest::export_adapter!(OpenAi);
