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
//! - `symlink LINK TARGET`: makes the symbolic link LINK pointing to
//!   TARGET (as written, not resolved);
//! - `env NAME`: the variable's value;
//! - `envs`: every visible variable name, sorted, comma-separated;
//! - `connect HOST:PORT`: opens a TCP connection (a raw socket);
//! - `lookup NAME`: resolves a host name;
//! - `http METHOD URL [BODY]`: an HTTP request through `wasi:http`, with
//!   the rest of the line as its body, reported as `ok: <status> <body>`
//!   (the response body's first bytes) or `denied: <error>`;
//! - `spawn PROGRAM [ARGS…]` (split at spaces): starts the program through
//!   the process capability, reads its stdout to the end and waits, reported
//!   as `ok: exit=<code> out=<line>|<line> err=<stderr tail>`;
//! - `shell SCRIPT`: `spawn sh -c SCRIPT`; `shell-in DIR SCRIPT`: the same
//!   with DIR as the working directory; `shell-env NAME=VALUE SCRIPT`: the
//!   same with one variable set explicitly;
//! - `fields N BYTES`: makes N `wasi:http` header maps of one BYTES-long
//!   header each and keeps them all (host memory, outside the guest's),
//!   reported as `ok: kept <n>` or `denied: kept <n>, then <error>`;
//! - `connections N URL` (plain `http://HOST:PORT/PATH`): starts N GET
//!   requests at once and keeps every response, reported as
//!   `ok: <answered> answered, <refused> refused: <first error>`;
//! - `open N DIR`: creates and opens N files in DIR and keeps them all
//!   open, reported as `ok: kept <n>` or `denied: kept <n>, then <error>`;
//! - `cat TEXT`: starts `cat` with a piped stdin, writes TEXT and reads it
//!   back;
//! - `fork N`: starts `sleep 60` N times, keeping every child, reported as
//!   `ok: started <n>` or `denied: started <n>, then <error>`;
//! - `ask TOOL INPUT`: asks the run's user (the contract's
//!   `request-approval`) about a call `probe` of TOOL with INPUT, sent as
//!   written (it need not be JSON), reported as `ok: allowed`,
//!   `denied: <reason>` or `denied: interrupted`.
//!
//! A caller that wraps the prompt in text of its own (a workflow's task
//! gets its context and instructions around it) gives the probes in
//! `options.extra.probes` instead, a list of lines: the prompt is then
//! ignored.
//!
//! It declares needs (a host, a variable, a program) so tests can show
//! that a component loaded from a path receives none of them until
//! `--grant-declared`.

use std::collections::VecDeque;

use moat_guest::process::{Command, Stdin};
use moat_guest::serde_json::Value;
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

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let probes: Vec<String> = match options.extra_object()?.get("probes") {
            Some(Value::Array(lines)) => lines
                .iter()
                .map(|line| line.as_str().unwrap_or_default().to_owned())
                .collect(),
            Some(_) => {
                return Err(ErrorInfo::new(
                    "INVALID_OPTIONS",
                    "options.extra.probes is a list of probe lines",
                    false,
                ));
            }
            None => prompt.lines().map(str::to_owned).collect(),
        };
        let mut pending = VecDeque::new();
        for line in probes.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            let outcome = probe(line).ok_or_else(|| {
                ErrorInfo::new(
                    "INVALID_PROMPT",
                    format!(
                        "unknown probe {line:?}; use read, write, list, symlink, env, envs, connect, lookup, http, fields, connections, open, spawn, shell, shell-in, shell-env, cat or fork"
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
        "symlink" => {
            let (link, target) = argument.split_once(' ').unwrap_or((argument, ""));
            // The one stable way to make a link on WASI.
            #[allow(deprecated)]
            std::fs::soft_link(target, link)
                .map(|()| format!("linked {link} to {target}"))
                .map_err(|e| e.to_string())
        }
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
        "fields" => fields(argument),
        "connections" => connections(argument),
        "open" => open_many(argument),
        "spawn" => {
            let mut words = argument.split(' ').filter(|w| !w.is_empty());
            let program = words.next().unwrap_or_default();
            spawn(Command::new(program).args(words))
        }
        "shell" => spawn(Command::new("sh").args(["-c", argument])),
        "shell-in" => {
            let (dir, script) = argument.split_once(' ').unwrap_or((argument, "true"));
            spawn(Command::new("sh").args(["-c", script]).cwd(dir))
        }
        "shell-env" => {
            let (variable, script) = argument.split_once(' ').unwrap_or((argument, "env"));
            let (name, value) = variable.split_once('=').unwrap_or((variable, ""));
            spawn(Command::new("sh").args(["-c", script]).env(name, value))
        }
        "cat" => cat(argument),
        "fork" => fork(argument.parse().unwrap_or(1)),
        "ask" => ask(argument),
        _ => return None,
    };
    Some(outcome)
}

/// `ask TOOL INPUT`, through the raw import: the input goes as written.
fn ask(argument: &str) -> Result<String, String> {
    let (tool, input) = argument.split_once(' ').unwrap_or((argument, "{}"));
    #[cfg(target_arch = "wasm32")]
    {
        use moat_guest::bindings::moat::adapter::approvals as wit;
        let request = wit::ApprovalRequest {
            tool_name: tool.to_owned(),
            tool_use_id: "probe".to_owned(),
            input: input.to_owned(),
            reason: Some("the escape component probes".to_owned()),
        };
        match wit::request_approval(&request) {
            wit::Approval::Allow => Ok("allowed".to_owned()),
            wit::Approval::Deny(why) => Err(why),
            wit::Approval::Interrupted => Err("interrupted".to_owned()),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        Err(format!("no host to ask about {tool} {input}"))
    }
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

/// Starts `command`, reads its stdout to the end, waits for it.
fn spawn(command: Command) -> Result<String, String> {
    let child = command.spawn().map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    loop {
        match child.read_line() {
            Ok(Some(line)) => lines.push(line),
            Ok(None) => break,
            Err(error) => lines.push(format!("<{error}>")),
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let code = status
        .code
        .map_or_else(|| "none".to_string(), |c| c.to_string());
    Ok(format!(
        "exit={code} out={} err={}",
        lines.join("|"),
        child.stderr_tail().trim_end()
    ))
}

/// Writes `text` to `cat` and reads it back.
fn cat(text: &str) -> Result<String, String> {
    let child = Command::new("cat")
        .stdin(Stdin::Piped)
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .write_stdin(format!("{text}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    child.close_stdin();
    let line = child.read_line().map_err(|e| e.to_string())?;
    let after_close = child.write_stdin(b"more");
    Ok(format!(
        "{} then {}",
        line.unwrap_or_default(),
        after_close.map_or_else(|e| e.to_string(), |()| "written".into())
    ))
}

/// Starts `sleep 60` `count` times, keeping every child until the run ends.
fn fork(count: usize) -> Result<String, String> {
    let mut children = Vec::new();
    for _ in 0..count {
        match Command::new("sleep").arg("60").spawn() {
            Ok(child) => children.push(child),
            Err(error) => return Err(format!("started {}, then {error}", children.len())),
        }
    }
    Ok(format!("started {}", children.len()))
}

/// `METHOD URL [BODY]`: the status and the body's first bytes.
fn fields(argument: &str) -> Result<String, String> {
    use wasi::http::types::Fields;
    let (count, bytes) = argument
        .split_once(' ')
        .and_then(|(n, b)| Some((n.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
        .ok_or_else(|| "usage: fields N BYTES".to_string())?;
    let value = vec![b'a'; bytes];
    let mut kept = Vec::new();
    for _ in 0..count {
        let fields = Fields::new();
        if let Err(error) = fields.append("x-big", &value) {
            return Err(format!("kept {}, then {error:?}", kept.len()));
        }
        kept.push(fields);
    }
    Ok(format!("kept {}", kept.len()))
}

fn open_many(argument: &str) -> Result<String, String> {
    let (count, dir) = argument
        .split_once(' ')
        .and_then(|(n, dir)| Some((n.parse::<usize>().ok()?, dir)))
        .ok_or_else(|| "usage: open N DIR".to_string())?;
    let mut kept = Vec::new();
    for i in 0..count {
        match std::fs::File::create(format!("{dir}/open-{i}")) {
            Ok(file) => kept.push(file),
            Err(error) => return Err(format!("kept {}, then {error}", kept.len())),
        }
    }
    Ok(format!("kept {}", kept.len()))
}

fn connections(argument: &str) -> Result<String, String> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, OutgoingRequest, Scheme};
    let usage = || "usage: connections N http://HOST:PORT/PATH".to_string();
    let (count, url) = argument.split_once(' ').ok_or_else(usage)?;
    let count: usize = count.parse().map_err(|_| usage())?;
    let rest = url.strip_prefix("http://").ok_or_else(usage)?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut pending = Vec::new();
    for _ in 0..count {
        let request = OutgoingRequest::new(Fields::new());
        request
            .set_scheme(Some(&Scheme::Http))
            .map_err(|()| usage())?;
        request
            .set_authority(Some(authority))
            .map_err(|()| usage())?;
        request
            .set_path_with_query(Some(&format!("/{path}")))
            .map_err(|()| usage())?;
        pending.push(outgoing_handler::handle(request, None));
    }
    let mut kept = Vec::new();
    let mut refused = 0;
    let mut first_error = String::new();
    for future in pending {
        let outcome = match future {
            Ok(future) => {
                future.subscribe().block();
                match future.get() {
                    Some(Ok(Ok(response))) => Ok(response),
                    Some(Ok(Err(error))) => Err(format!("{error:?}")),
                    other => Err(format!("{other:?}")),
                }
            }
            Err(error) => Err(format!("{error:?}")),
        };
        match outcome {
            Ok(response) => kept.push(response),
            Err(error) => {
                refused += 1;
                if first_error.is_empty() {
                    first_error = error;
                }
            }
        }
    }
    Ok(format!(
        "{} answered, {refused} refused: {first_error}",
        kept.len()
    ))
}

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
