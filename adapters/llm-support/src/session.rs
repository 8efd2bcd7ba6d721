//! One run of an LLM adapter: `init`, the request, the streamed answer,
//! the end. The phases, the interruption checks and the failures are the
//! same for every vendor; the vendor's [`Translate`] reads the stream.

use std::collections::VecDeque;

use moat_guest::http::{self, Request, Response};
use moat_guest::sse::{ReadError, SseParser, SseReader};
use moat_guest::{Event, InitEvent};

use crate::config::Config;
use crate::endpoint::Endpoint;
use crate::failure::{header, status_failure, transport_failure};
use crate::stream::{MALFORMED_EVENT, STREAM_CUT, Translate};

/// Most bytes of an error response read to quote its message.
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// Most bytes of a whole (non-streamed) answer.
const MAX_WHOLE_BODY: u64 = 16 * 1024 * 1024;

type ChunkReader = Box<dyn FnMut() -> Result<Option<Vec<u8>>, http::Error>>;

/// Where a run is.
enum Phase {
    /// The request is to be sent (after the pending `init`).
    Requesting,
    /// Reading the streamed answer.
    Streaming(SseReader<ChunkReader>),
    /// `done` was produced; nothing follows.
    Over,
}

/// One run: what the adapter's `next` returns, event by event.
pub struct Session<T> {
    request: Request,
    endpoint: Endpoint,
    model: String,
    phase: Phase,
    translator: T,
    pending: VecDeque<Event>,
}

impl<T: Translate> Session<T> {
    /// A run sending `request` (made from `config`), its answer read by
    /// `translator`; its `init` names the model, `cwd` and the tools
    /// offered. Warns (in the host's log) when the key would travel in
    /// clear, since the user may not know the base URL is plain `http://`.
    pub fn new(config: Config, request: Request, cwd: Option<&str>, translator: T) -> Self {
        let Config {
            endpoint,
            model,
            tools,
            ..
        } = config;
        if endpoint.key_in_clear() {
            moat_guest::log::warn(&format!(
                "{} is sent unencrypted to {} (plain http://, not loopback)",
                endpoint.vendor.key_var, endpoint.grant
            ));
        }
        let init = InitEvent::new(Some(&model), cwd, tools);
        Session {
            request,
            endpoint,
            model,
            phase: Phase::Requesting,
            translator,
            pending: VecDeque::from([init.into()]),
        }
    }

    /// The run's next event; `None` once `done` was returned.
    pub fn next_event(&mut self) -> Option<Event> {
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
                Phase::Requesting => match self.send() {
                    Some(phase) => self.phase = phase,
                    // Aborted while waiting for the server: the loop's
                    // interruption check ends the run.
                    None => continue,
                },
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
                            let mut failure = transport_failure(&self.endpoint, &error);
                            failure.error.code = Some(STREAM_CUT.into());
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

    /// Sends the request: the phase that follows, or `None` when the run
    /// was interrupted before the answer came.
    fn send(&mut self) -> Option<Phase> {
        match http::send(&self.request) {
            Ok(response)
                if response.status == 200
                    && self.translator.takes_whole_answers()
                    && is_json(&response) =>
            {
                match response.read_to_end(MAX_WHOLE_BODY) {
                    Ok(body) => self.pending.extend(self.translator.on_complete(&body)),
                    Err(http::Error::Interrupted) => return None,
                    Err(error) => {
                        let failure = transport_failure(&self.endpoint, &error);
                        self.pending.extend(self.translator.fail(&failure));
                    }
                }
                Some(Phase::Over)
            }
            Ok(response) if response.status == 200 => Some(Phase::Streaming(reader(response))),
            Ok(response) => {
                let status = response.status;
                let headers = response.headers.clone();
                // The body only serves to quote the server's message: a
                // failure to read it leaves it out.
                let body = response.read_to_end(MAX_ERROR_BODY).unwrap_or_default();
                let failure = status_failure(&self.endpoint, &self.model, status, &headers, &body);
                self.pending.extend(self.translator.fail(&failure));
                Some(Phase::Over)
            }
            Err(http::Error::Interrupted) => None,
            Err(error) => {
                let failure = transport_failure(&self.endpoint, &error);
                self.pending.extend(self.translator.fail(&failure));
                Some(Phase::Over)
            }
        }
    }
}

/// Whether a successful response is one JSON answer rather than a stream
/// (a server that ignored `stream: true`).
fn is_json(response: &Response) -> bool {
    header(&response.headers, "content-type")
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("application/json"))
}

fn reader(mut response: Response) -> SseReader<ChunkReader> {
    let read: ChunkReader = Box::new(move || response.read_chunk());
    SseReader::new(SseParser::new(), read)
}
