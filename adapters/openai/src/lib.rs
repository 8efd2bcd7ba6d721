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
//!   tool calls accumulated by index, usage and the finish reason in done);
//! - [`errors`]: HTTP statuses and connection failures as error events.

pub mod config;
pub mod errors;
pub mod stream;

use std::collections::VecDeque;

use moat_guest::http::{self, Response};
use moat_guest::sse::{ReadError, SseParser, SseReader};
use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, InitEvent, Needs, Options};

use config::{BASE_URL_VAR, Config, DEFAULT_HOST, KEY_VAR};
use stream::{MALFORMED_EVENT, Translator};

/// Most bytes of an error response read to quote its message.
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// Most bytes of a whole (non-streamed) answer.
const MAX_WHOLE_BODY: u64 = 16 * 1024 * 1024;

type ChunkReader = Box<dyn FnMut() -> Result<Option<Vec<u8>>, http::Error>>;

/// Where a run is.
enum Phase {
    /// `init` not sent yet.
    Starting,
    /// The request is to be sent.
    Requesting,
    /// Reading the streamed answer.
    Streaming(SseReader<ChunkReader>),
    /// `done` was produced; nothing follows.
    Over,
}

/// One run of the adapter.
pub struct OpenAi {
    config: Config,
    cwd: Option<String>,
    phase: Phase,
    translator: Translator,
    pending: VecDeque<Event>,
}

impl Adapter for OpenAi {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "openai",
            env!("CARGO_PKG_VERSION"),
            "OpenAI Chat Completions and OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), streamed",
        )
        .with_needs(
            Needs::default()
                .with_hosts([DEFAULT_HOST])
                .with_env([KEY_VAR, BASE_URL_VAR]),
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let config = Config::new(&prompt, &options, |name| std::env::var(name).ok())?;
        if config.key_in_clear() {
            moat_guest::log::warn(&format!(
                "{KEY_VAR} is sent unencrypted to {} (plain http://, not loopback)",
                config.grant
            ));
        }
        Ok(OpenAi {
            config,
            cwd: options.cwd,
            phase: Phase::Starting,
            translator: Translator::new(),
            pending: VecDeque::new(),
        })
    }

    fn next(&mut self) -> Option<Event> {
        loop {
            if matches!(self.phase, Phase::Over) && self.pending.is_empty() {
                return None;
            }
            if moat_guest::interrupted() && !self.translator.ended() {
                // Dropping the reader drops the response: the request ends.
                self.phase = Phase::Over;
                self.pending.clear();
                return Some(self.translator.interrupted());
            }
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            match &mut self.phase {
                Phase::Starting => {
                    self.phase = Phase::Requesting;
                    let init = InitEvent::new(
                        Some(&self.config.model),
                        self.cwd.as_deref(),
                        self.config.tools.clone(),
                    );
                    return Some(init.into());
                }
                Phase::Requesting => {
                    self.phase = match http::send(&self.config.request()) {
                        Ok(response) if response.status == 200 && is_json(&response) => {
                            match response.read_to_end(MAX_WHOLE_BODY) {
                                Ok(body) => self.pending.extend(self.translator.on_complete(&body)),
                                Err(http::Error::Interrupted) => continue,
                                Err(error) => {
                                    let failure = errors::transport_failure(&self.config, &error);
                                    self.pending.extend(self.translator.fail(&failure));
                                }
                            }
                            Phase::Over
                        }
                        Ok(response) if response.status == 200 => {
                            Phase::Streaming(reader(response))
                        }
                        Ok(response) => {
                            let status = response.status;
                            let headers = response.headers.clone();
                            // The body only serves to quote the server's
                            // message: a failure to read it leaves it out.
                            let body = response.read_to_end(MAX_ERROR_BODY).unwrap_or_default();
                            let failure =
                                errors::status_failure(&self.config, status, &headers, &body);
                            self.pending.extend(self.translator.fail(&failure));
                            Phase::Over
                        }
                        // Aborted while waiting for the server: the loop's
                        // interruption check ends the run.
                        Err(http::Error::Interrupted) => continue,
                        Err(error) => {
                            let failure = errors::transport_failure(&self.config, &error);
                            self.pending.extend(self.translator.fail(&failure));
                            Phase::Over
                        }
                    };
                }
                Phase::Streaming(reader) => {
                    let events = match reader.next() {
                        Some(Ok(event)) => self.translator.on_event(&event),
                        Some(Err(ReadError::Sse(error))) => vec![Event::error(
                            MALFORMED_EVENT,
                            format!("the server sent an event moat cannot take: {error}"),
                            true,
                        )],
                        Some(Err(ReadError::Http(http::Error::Interrupted))) => continue,
                        Some(Err(ReadError::Http(error))) => {
                            let mut failure = errors::transport_failure(&self.config, &error);
                            failure.error.code = Some(stream::STREAM_CUT.into());
                            failure.error.message = format!(
                                "the response broke off mid-stream: {}",
                                failure.error.message
                            );
                            self.translator.fail(&failure)
                        }
                        None => self.translator.end_of_body(),
                    };
                    self.pending.extend(events);
                    if self.translator.ended() {
                        self.phase = Phase::Over;
                    }
                }
                Phase::Over => {}
            }
        }
    }
}

moat_guest::export_adapter!(OpenAi);

/// Whether a successful response is one JSON answer rather than a stream
/// (a server that ignored `stream: true`).
fn is_json(response: &Response) -> bool {
    errors::header(&response.headers, "content-type")
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("application/json"))
}

fn reader(mut response: Response) -> SseReader<ChunkReader> {
    let read: ChunkReader = Box::new(move || response.read_chunk());
    SseReader::new(SseParser::new(), read)
}
