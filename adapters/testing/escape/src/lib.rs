//! Security-corpus adapter: tries to reach files, environment variables and
//! the network (raw sockets and HTTP) and reports what happened, so a test can prove that what was not granted
//! stays out of reach and what was granted works.
//!
//! The prompt holds one probe per line; each yields one `text` event,
//! `ok: <result>` or `denied: <error>`, then the run ends with `done`
//! success:
//!
//! - `read PATH`: the file's first bytes;
//! - `write PATH`: creates or truncates the file with a fixed line;
//! - `list PATH`: the directory's entries, sorted, comma-separated;
//! - `env NAME`: the variable's value;
//! - `envs`: every visible variable name, sorted, comma-separated;
//! - `connect HOST:PORT`: opens a TCP connection (a raw socket);
//! - `lookup NAME`: resolves a host name;
//! - `http METHOD URL [BODY]`: an HTTP request through `wasi:http`, with
//!   the rest of the line as its body, reported as `ok: <status> <body>`
//!   (the response body's first bytes) or `denied: <error>`.
//!
//! It declares needs (a host, a variable, a program) so tests can show
//! that a component loaded from a path receives none of them until
//! `--grant-declared`.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Needs, Options};

/// What `write` puts in a file.
const WRITTEN: &str = "written by the escape adapter\n";
/// Longest file excerpt reported by `read`.
const MAX_EXCERPT: usize = 200;

/// A run that has done its probes and emits their results.
pub struct Escape {
    pending: VecDeque<Event>,
}

impl Adapter for Escape {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "escape",
            env!("CARGO_PKG_VERSION"),
            "Tries to reach files, environment variables and the network, and reports what happened",
        )
        .with_needs(
            Needs::default()
                .with_hosts(["probe.invalid:443"])
                .with_env(["MOAT_ESCAPE_DECLARED"])
                .with_programs(["true"]),
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let mut pending = VecDeque::new();
        for line in prompt.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let outcome = probe(line).ok_or_else(|| {
                ErrorInfo::new(
                    "INVALID_PROMPT",
                    format!(
                        "unknown probe {line:?}; use read, write, list, env, envs, connect, lookup or http"
                    ),
                    false,
                )
            })?;
            let text = match outcome {
                Ok(result) => format!("ok: {result}"),
                Err(error) => format!("denied: {error}"),
            };
            pending.push_back(Event::text(text.as_str()));
        }
        pending.push_back(DoneEvent::new(DoneStatus::Success).into());
        Ok(Escape { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(Escape);

/// Runs one probe; `None` for a line that is not one.
fn probe(line: &str) -> Option<Result<String, String>> {
    let (verb, argument) = line.split_once(' ').unwrap_or((line, ""));
    let argument = argument.trim();
    let outcome = match verb {
        "read" => std::fs::read(argument)
            .map(|bytes| {
                let excerpt = &bytes[..bytes.len().min(MAX_EXCERPT)];
                String::from_utf8_lossy(excerpt).trim_end().to_string()
            })
            .map_err(|e| e.to_string()),
        "write" => std::fs::write(argument, WRITTEN)
            .map(|()| format!("wrote {} bytes", WRITTEN.len()))
            .map_err(|e| e.to_string()),
        "list" => list(argument),
        "env" => std::env::var(argument).map_err(|e| e.to_string()),
        "envs" => {
            let mut names: Vec<String> = std::env::vars_os()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect();
            names.sort();
            Ok(names.join(","))
        }
        "connect" => std::net::TcpStream::connect(argument)
            .map(|stream| match stream.peer_addr() {
                Ok(peer) => format!("connected to {peer}"),
                Err(_) => "connected".to_string(),
            })
            .map_err(|e| e.to_string()),
        "lookup" => {
            use std::net::ToSocketAddrs;
            (argument, 80)
                .to_socket_addrs()
                .map(|addresses| {
                    let addresses: Vec<String> = addresses.map(|a| a.ip().to_string()).collect();
                    addresses.join(",")
                })
                .map_err(|e| e.to_string())
        }
        "http" => http(argument),
        _ => return None,
    };
    Some(outcome)
}

fn list(dir: &str) -> Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names.join(","))
}

/// `METHOD URL [BODY]`: the status and the body's first bytes.
fn http(argument: &str) -> Result<String, String> {
    let (method, rest) = argument
        .split_once(' ')
        .ok_or_else(|| "usage: http METHOD URL [BODY]".to_string())?;
    let (url, body) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
    let request = moat_guest::http::Request::new(method, url).with_body(body);
    let response = moat_guest::http::send(&request).map_err(|e| e.to_string())?;
    let status = response.status;
    let body = response
        .read_to_end(1024 * 1024)
        .map_err(|e| e.to_string())?;
    let excerpt = &body[..body.len().min(MAX_EXCERPT)];
    Ok(format!(
        "{status} {}",
        String::from_utf8_lossy(excerpt).trim_end()
    ))
}
