//! The LLM adapters' streaming benchmark: `cargo bench -p moat-benches --bench llm`.
//!
//! A server on 127.0.0.1 streams an answer of 10,000 text deltas, one SSE
//! event per write, in each vendor's wire format. Two clients read it, in
//! the same run, from the same server:
//!
//! - wasm: the built-in `openai` / `anthropic` component through the real
//!   host (`run_agent`, the sandbox's checked `wasi:http`, the engine's
//!   validation), exactly as `moat run` does;
//! - native: a plain Rust client on a blocking socket that sends the same
//!   request and feeds the body through the same parsing code natively (the
//!   SDK's SSE parser and the adapter's translator, linked as rlibs).
//!
//! Figures, each the median of several rounds: time from the start of the
//! run to the first event (wasm: the `init` event), time to the first text
//! delta (the request's round trip included), and deltas per second from
//! the first delta to `done`, with the server writing one SSE event per
//! write (as the vendors stream) and again with 16 KiB writes (where the
//! per-write cost of the body path drops out and parsing dominates).
//!
//! Metering (issue 52): in the same rounds, alternating with the plain wasm
//! run, the same built-in run with the server metered (a meter rule
//! `127.0.0.1:PORT=openai|anthropic` in its grants and a traffic record
//! made from them, as `moat run --meter` makes it), so every answer's body
//! is also read by moat's usage reader as it passes. Each metered run must
//! have been metered: its record holds one model call with its usage.
//! Both sides record the request's row; only the metered one reads the
//! body. The table goes to stdout and to `target/moat-bench/llm.md`.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs once at a
//! tiny size and writes nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

use common::{bench_dir, load_average};
use moat_contain::traffic::Traffic;
use moat_engine::{DoneStatus, EventPayload, Registry, RunRequest, run_agent};
use moat_grants::{Grants, MeterRule, Meters, NetRule};
use moat_guest::sse::SseParser;
use moat_guest::{EventKind, Options};
use moat_llm_support::Translate;
use moat_sandbox::{RunScope, Sandbox, SandboxConfig};
use moat_testkit::llm_server::{LlmServer, Reply, Step};
use serde_json::json;

/// The vendors measured.
#[derive(Clone, Copy)]
enum Vendor {
    OpenAi,
    Anthropic,
}

impl Vendor {
    fn name(self) -> &'static str {
        match self {
            Vendor::OpenAi => "openai",
            Vendor::Anthropic => "anthropic",
        }
    }

    /// The streamed answer: `deltas` text deltas, one SSE event per step.
    fn body(self, deltas: usize) -> Vec<Step> {
        let mut events: Vec<String> = Vec::with_capacity(deltas + 8);
        match self {
            Vendor::OpenAi => {
                let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                    let chunk = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                        "created": 1, "model": "bench", "choices": [{"index": 0, "delta": delta,
                        "logprobs": null, "finish_reason": finish}]});
                    format!("data: {chunk}\n\n")
                };
                events.push(chunk(
                    json!({"role": "assistant", "content": ""}),
                    json!(null),
                ));
                for i in 0..deltas {
                    events.push(chunk(json!({"content": format!("tok{i} ")}), json!(null)));
                }
                events.push(chunk(json!({}), json!("stop")));
                let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                    "created": 1, "model": "bench", "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": deltas, "total_tokens": deltas + 10}});
                events.push(format!("data: {usage}\n\n"));
                events.push("data: [DONE]\n\n".into());
            }
            Vendor::Anthropic => {
                let event = |name: &str, data: serde_json::Value| {
                    format!("event: {name}\ndata: {data}\n\n")
                };
                events.push(event("message_start", json!({"type": "message_start", "message":
                    {"id": "msg_bench", "model": "bench", "usage": {"input_tokens": 10, "output_tokens": 1}}})));
                events.push(event(
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": 0, "content_block": {"type": "text", "text": ""}}),
                ));
                for i in 0..deltas {
                    events.push(event(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": 0, "delta": {"type": "text_delta", "text": format!("tok{i} ")}}),
                    ));
                }
                events.push(event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ));
                events.push(event(
                    "message_delta",
                    json!({"type": "message_delta",
                    "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": deltas}}),
                ));
                events.push(event("message_stop", json!({"type": "message_stop"})));
            }
        }
        events
            .into_iter()
            .map(|e| Step::Send(e.into_bytes()))
            .collect()
    }

    /// The run options both clients use.
    fn options(self, server: &LlmServer) -> Options {
        let base_url = match self {
            Vendor::OpenAi => format!("{}/v1", server.url()),
            Vendor::Anthropic => server.url(),
        };
        Options {
            model: Some("bench".into()),
            extra: Some(json!({"base_url": base_url}).to_string()),
            ..Options::default()
        }
    }
}

/// How the server writes the stream.
#[derive(Clone, Copy)]
enum Writes {
    /// One SSE event per write, as the vendors stream.
    PerEvent,
    /// 16 KiB per write.
    Batched,
}

/// What one run measured.
#[derive(Clone, Copy)]
struct Sample {
    first_event: Duration,
    first_delta: Duration,
    deltas_per_second: f64,
    /// A wasm run's row was recorded only after its `done`.
    late: bool,
}

/// Whether moat reads the answers' usage as they pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Metering {
    /// No meter: the request's row is recorded, its body not read.
    Off,
    /// The server is a model API by a meter rule: its body is read too.
    On,
}

/// Runs the built-in component once.
async fn wasm_run(
    registry: &Registry<RunScope>,
    vendor: Vendor,
    server: &LlmServer,
    deltas: usize,
    metering: Metering,
) -> Sample {
    let options = vendor.options(server);
    let mut request = RunRequest::new(vendor.name(), "bench").with_scope(RunScope::none());
    request.options.model = options.model;
    request.options.extra = options
        .extra
        .map(|e| serde_json::from_str(&e).expect("JSON"));
    let meter = match metering {
        Metering::Off => Vec::new(),
        Metering::On => vec![
            MeterRule::parse(&format!("{}={}", server.grant(), vendor.name())).expect("a rule"),
        ],
    };
    request.scope.grants = Grants {
        net: vec![NetRule::parse(&server.grant()).expect("a rule")],
        meter,
        ..Grants::none()
    };
    // As `moat run` makes it: the record of a run whose meters are its
    // grants'; without a meter rule, rows only (the loopback server is no
    // vendor's host).
    let traffic = Traffic::new(
        Meters::of(&request.scope.grants),
        false,
        tokio_util::sync::CancellationToken::new(),
    );
    request.scope.traffic = traffic.clone();
    let started = Instant::now();
    let mut run = run_agent(registry, request).expect("registered");
    let (mut first_event, mut first_delta, mut count) = (None, None, 0usize);
    let mut status = None;
    while let Some(event) = run.next().await {
        first_event.get_or_insert_with(|| started.elapsed());
        match event.payload {
            EventPayload::TextDelta(_) => {
                first_delta.get_or_insert_with(|| started.elapsed());
                count += 1;
            }
            EventPayload::Done(done) => status = Some(done.status),
            _ => {}
        }
    }
    let total = started.elapsed();
    assert_eq!(status, Some(DoneStatus::Success), "the wasm run succeeds");
    assert_eq!(count, deltas, "every delta arrives");
    // The run's one request was recorded; metered, moat read its usage.
    // Its row may come after the run's `done`: the connection's task,
    // which reads the body ahead, records it when it lets the body go.
    let mut taken = traffic.take();
    let late = taken.exchanges.is_empty();
    if late {
        taken = tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| traffic.poll_take(cx)),
        )
        .await
        .expect("the run's row is recorded");
    }
    assert_eq!(taken.exchanges.len(), 1, "one row per run");
    match metering {
        Metering::Off => assert!(taken.calls.is_empty(), "nothing metered"),
        Metering::On => {
            assert_eq!(taken.calls.len(), 1, "one metered call");
            let usage = taken.calls[0].usage.expect("moat read the call's usage");
            assert_eq!(
                (usage.input_tokens, usage.output_tokens),
                (10, deltas as u64),
                "the usage the answer carries"
            );
        }
    }
    Sample {
        late,
        ..sample(first_event, first_delta, total, count)
    }
}

/// The native client: the same request on a blocking socket, the body
/// through the same SSE parser and translator, natively.
fn native_run(vendor: Vendor, server: &LlmServer, deltas: usize) -> Sample {
    let options = vendor.options(server);
    let (path, headers, body) = match vendor {
        Vendor::OpenAi => {
            let config = moat_adapter_openai::config::configure("bench", &options, |_| None)
                .expect("a valid config");
            let request = moat_adapter_openai::config::request(&config);
            (path_of(&config.endpoint.url), request.headers, request.body)
        }
        Vendor::Anthropic => {
            let config = moat_adapter_anthropic::config::configure("bench", &options, |_| None)
                .expect("a valid config");
            let request = moat_adapter_anthropic::config::request(&config);
            (path_of(&config.endpoint.url), request.headers, request.body)
        }
    };
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut head = format!("POST {path} HTTP/1.1\r\nhost: {}\r\n", server.grant());
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {}\r\n", String::from_utf8_lossy(value)));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).expect("write the head");
    stream.write_all(&body).expect("write the body");

    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("read the response head");
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut parser = SseParser::new();
    let mut openai = moat_adapter_openai::stream::Translator::default();
    let mut anthropic = moat_adapter_anthropic::stream::Translator::default();
    let (mut first_delta, mut count, mut ended) = (None, 0usize, false);
    let mut chunk = Vec::new();
    while !ended {
        // Chunked transfer encoding: a hex size line, the data, CRLF.
        line.clear();
        reader.read_line(&mut line).expect("read a chunk size");
        let size = usize::from_str_radix(line.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        chunk.resize(size + 2, 0);
        reader.read_exact(&mut chunk).expect("read a chunk");
        for item in parser.feed(&chunk[..size]) {
            let event = item.expect("events are small");
            let events = match vendor {
                Vendor::OpenAi => openai.on_event(&event),
                Vendor::Anthropic => anthropic.on_event(&event),
            };
            for event in events {
                match event.kind {
                    EventKind::TextDelta(_) => {
                        first_delta.get_or_insert_with(|| started.elapsed());
                        count += 1;
                    }
                    EventKind::Done(_) => ended = true,
                    _ => {}
                }
            }
        }
    }
    let total = started.elapsed();
    assert!(ended, "the native client saw the end of the answer");
    assert_eq!(count, deltas, "every delta arrives");
    // The native client has no init event: its first event is the first
    // delta.
    sample(first_delta, first_delta, total, count)
}

/// Seconds per delta of moat's usage reader alone (natively, in this
/// process) fed `writes` as they come, one `feed` per write: the median of
/// `rounds` passes, each of at least 20 ms.
fn reader_alone(vendor: Vendor, writes: &[Vec<u8>], deltas: usize, rounds: usize) -> f64 {
    let vendor = match vendor {
        Vendor::OpenAi => moat_meter::Vendor::OpenAi,
        Vendor::Anthropic => moat_meter::Vendor::Anthropic,
    };
    let read = || {
        let mut reader = moat_meter::UsageReader::new(vendor, Some(b"text/event-stream"), None);
        for write in writes {
            reader.feed(std::hint::black_box(write));
        }
        reader.reading()
    };
    let usage = read().usage.expect("the reader finds the usage");
    assert_eq!(
        usage.output_tokens, deltas as u64,
        "the usage the body carries"
    );
    let mut per_delta: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let started = Instant::now();
            let mut passes = 0usize;
            while passes == 0 || started.elapsed() < Duration::from_millis(20) {
                std::hint::black_box(read());
                passes += 1;
            }
            started.elapsed().as_secs_f64() / (passes * deltas) as f64
        })
        .collect();
    median(&mut per_delta)
}

fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_owned())
}

fn sample(
    first_event: Option<Duration>,
    first_delta: Option<Duration>,
    total: Duration,
    count: usize,
) -> Sample {
    let first_delta = first_delta.expect("a delta arrived");
    let streaming = total.saturating_sub(first_delta).as_secs_f64().max(1e-9);
    Sample {
        first_event: first_event.expect("an event arrived"),
        first_delta,
        deltas_per_second: count as f64 / streaming,
        late: false,
    }
}

fn median<T: Copy + PartialOrd>(values: &mut [T]) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn main() {
    let full = common::full_run();
    let (deltas, rounds) = if full { (10_000, 21) } else { (200, 1) };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the tokio runtime starts");
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(bench_dir().join("cache")),
        pool_sessions: 16,
        ..SandboxConfig::default()
    })
    .expect("the sandbox starts");

    let mut rows = Vec::new();
    // Timed wasm runs, and those whose row came only after their `done`.
    let (mut timed, mut late) = (0usize, 0usize);
    let modes = [
        (Writes::PerEvent, "one event per write"),
        (Writes::Batched, "16 KiB writes"),
    ];
    for (vendor, (writes, label)) in [Vendor::OpenAi, Vendor::Anthropic]
        .into_iter()
        .flat_map(|v| modes.into_iter().map(move |m| (v, m)))
    {
        let name = vendor.name();
        let bytes = moat_builtins::component(name).expect("a built-in adapter");
        let adapter = rt
            .block_on(sandbox.load_bytes(format!("built-in {name}"), bytes.to_vec()))
            .unwrap_or_else(|e| panic!("cannot load {name}: {e}"));
        let mut registry = Registry::scoped();
        registry
            .register(Arc::new(adapter))
            .expect("a fresh registry");
        let steps = vendor.body(deltas);
        let writes_of: Vec<Vec<u8>> = {
            let events = steps.iter().filter_map(|step| match step {
                Step::Send(bytes) => Some(bytes.clone()),
                _ => None,
            });
            match writes {
                Writes::PerEvent => events.collect(),
                Writes::Batched => events
                    .flatten()
                    .collect::<Vec<u8>>()
                    .chunks(16 * 1024)
                    .map(<[u8]>::to_vec)
                    .collect(),
            }
        };
        let reply = match writes {
            Writes::PerEvent => Reply::stream(steps),
            Writes::Batched => Reply::sse_split(&writes_of.concat(), &[16 * 1024], Duration::ZERO),
        };
        let server = LlmServer::start(reply);

        // One untimed round each, so the first timed one is not the one
        // that warms caches and connections.
        let run_wasm =
            |metering| rt.block_on(wasm_run(&registry, vendor, &server, deltas, metering));
        run_wasm(Metering::Off);
        run_wasm(Metering::On);
        native_run(vendor, &server, deltas);
        let (mut wasm, mut metered, mut native) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Metered and not in turn, each first in every other round.
            if round % 2 == 0 {
                wasm.push(run_wasm(Metering::Off));
                metered.push(run_wasm(Metering::On));
            } else {
                metered.push(run_wasm(Metering::On));
                wasm.push(run_wasm(Metering::Off));
            }
            native.push(native_run(vendor, &server, deltas));
        }
        let pick = |samples: &[Sample], f: fn(&Sample) -> f64| {
            let mut values: Vec<f64> = samples.iter().map(f).collect();
            median(&mut values)
        };
        let first_event = |s: &Sample| s.first_event.as_secs_f64();
        let first_delta = |s: &Sample| s.first_delta.as_secs_f64();
        let rate = |s: &Sample| s.deltas_per_second;
        let (we, wd, wr) = (
            pick(&wasm, first_event),
            pick(&wasm, first_delta),
            pick(&wasm, rate),
        );
        let (nd, nr) = (pick(&native, first_delta), pick(&native, rate));
        timed += wasm.len() + metered.len();
        late += wasm.iter().chain(&metered).filter(|s| s.late).count();
        rows.push(format!(
            "| {name}, {label}: time to first event | {} (init) | {} (first delta) | — |",
            ms(Duration::from_secs_f64(we)),
            ms(Duration::from_secs_f64(nd)),
        ));
        rows.push(format!(
            "| {name}, {label}: time to first text delta | {} | {} | {:+.2} ms |",
            ms(Duration::from_secs_f64(wd)),
            ms(Duration::from_secs_f64(nd)),
            (wd - nd) * 1e3,
        ));
        rows.push(format!(
            "| {name}, {label}: deltas per second ({deltas} deltas) | {wr:.0}/s | {nr:.0}/s | native {:.1}× faster |",
            nr / wr
        ));
        // The metering's cost: time per delta metered over not, the median
        // of each round's pair (both runs of a round share its moment), and
        // the ratio of the two medians.
        let mr = pick(&metered, rate);
        let mut paired: Vec<f64> = wasm
            .iter()
            .zip(&metered)
            .map(|(plain, metered)| plain.deltas_per_second / metered.deltas_per_second)
            .collect();
        let paired = median(&mut paired);
        rows.push(format!(
            "| {name}, {label}: deltas per second, metered | {mr:.0}/s | {wr:.0}/s not metered | {:+.1} % time per delta (medians {:+.1} %) |",
            (paired - 1.0) * 100.0,
            (wr / mr - 1.0) * 100.0,
        ));
        // What the reading itself costs: the usage reader alone, natively,
        // over the same writes; its share of a delta's time not metered.
        let alone = reader_alone(vendor, &writes_of, deltas, rounds);
        rows.push(format!(
            "| {name}, {label}: the usage reader alone, per delta | {:.0} ns | {:.0} ns a delta not metered | {:.1} % of it |",
            alone * 1e9,
            1e9 / wr,
            alone * wr * 100.0,
        ));
    }

    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut summary = format!(
        "# moat LLM adapter benchmark\n\n- command: `cargo bench -p moat-benches --bench llm`\n- date: {date}\n- load average: {}\n- {rounds} rounds per side, medians; a loopback server on 127.0.0.1\n- metered rows: the wasm run with the server metered beside the same run not metered (its second column), alternating in each round; the cost is the median of the rounds' ratios of time per delta\n\n| figure | wasm (built-in via host) | native client | overhead |\n|---|---|---|---|\n",
        load_average()
    );
    for row in &rows {
        summary.push_str(row);
        summary.push('\n');
    }
    summary.push_str(&format!(
        "\nRows recorded only after their run's `done` (waited for, untimed): {late} of {timed} timed wasm runs\n"
    ));
    if !full {
        summary.push_str("\nsmoke test: a tiny size; these are not measurements\n");
    }
    print!("\n{summary}");
    if full {
        let path = bench_dir().join("llm.md");
        match std::fs::create_dir_all(bench_dir()).and_then(|()| std::fs::write(&path, &summary)) {
            Ok(()) => println!("summary written to {}", path.display()),
            Err(error) => eprintln!("cannot write the summary: {error}"),
        }
    }
}
