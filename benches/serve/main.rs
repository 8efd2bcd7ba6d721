//! `moat serve` under load: `cargo bench -p moat-benches --bench serve`.
//!
//! Two figures, each beside its baseline in the same run, with the real
//! `moat` binary and the testing `flood` component:
//!
//! 1. Per event through the protocol: one run of `flood` (100,000 small
//!    `text_delta` events), started and subscribed to through a `moat
//!    serve` on stdio, timed from the `run` request to the `done` event the
//!    client reads; beside `moat run FLOOD 100000 --output ndjson`, timed
//!    from the command's start to its last line. Both record into a store
//!    and both clients parse every line as JSON.
//! 2. Load: one `moat serve` on a socket holds 1,000 concurrent runs (half
//!    `echo`, half `flood` of 200 events) while 10 clients each subscribe to
//!    every run. Each client follows each run to its `done` across any
//!    `lagged` (resubscribing from `nextSeq`), and the bench fails unless
//!    every client saw every event of every run exactly once and in order
//!    (seqs 0..n, `done` last). Figures: wall time, events delivered per
//!    second over all clients, lags, the server's peak memory.
//!
//! The table goes to stdout and to `target/moat-bench/serve.md`. Without
//! `--bench` (as under `cargo test --benches`) it runs once at a tiny size
//! and writes nothing.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

use common::{bench_dir, load_average, moat};
use serde_json::{Value, json};

/// Seconds per event of `moat run FLOOD N --output ndjson`, every line
/// parsed.
fn ndjson_per_event(store: &Path, events: u64) -> f64 {
    let started = Instant::now();
    let mut child = moat(store)
        .args(["run", moat_testkit::components::FLOOD, &events.to_string()])
        .args(["--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("moat runs");
    let mut lines = 0u64;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let _: Value = serde_json::from_str(&line.unwrap()).expect("an event");
        lines += 1;
    }
    assert!(child.wait().unwrap().success());
    assert_eq!(lines, events + 1, "every delta and the done");
    started.elapsed().as_secs_f64() / lines as f64
}

/// One connection to a server: requests out, lines in.
struct Connection {
    out: Box<dyn Write + Send>,
    lines: std::io::Lines<BufReader<Box<dyn std::io::Read + Send>>>,
    next_id: u64,
    /// Responses that came before the one waited for (they come in the
    /// order requests complete).
    early: HashMap<u64, Value>,
}

impl Connection {
    fn new(out: Box<dyn Write + Send>, input: Box<dyn std::io::Read + Send>) -> Self {
        Self {
            out,
            lines: BufReader::with_capacity(1 << 16, input).lines(),
            next_id: 1,
            early: HashMap::new(),
        }
    }

    fn send(&mut self, op: &str, mut fields: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        fields["id"] = json!(id);
        fields["op"] = json!(op);
        writeln!(self.out, "{fields}").unwrap();
        self.out.flush().unwrap();
        id
    }

    fn message(&mut self) -> Value {
        let line = self.lines.next().expect("the server answers").unwrap();
        serde_json::from_str(&line).expect("JSON")
    }

    /// The result of request `id`; events that come first are handed to
    /// `on_event`.
    fn result(&mut self, id: u64, mut on_event: impl FnMut(Value)) -> Value {
        let message = loop {
            if let Some(message) = self.early.remove(&id) {
                break message;
            }
            let message = self.message();
            if message.get("event").is_some() {
                on_event(message);
            } else if message["id"] == id {
                break message;
            } else if let Some(other) = message["id"].as_u64() {
                self.early.insert(other, message);
            }
        };
        message
            .get("result")
            .unwrap_or_else(|| panic!("request {id} failed: {message}"))
            .clone()
    }
}

/// What one client saw of each run: the next seq it expects, and whether
/// the run's done came.
#[derive(Default)]
struct Followed {
    next: HashMap<String, u64>,
    done: HashMap<String, bool>,
    events: u64,
    lags: u64,
}

impl Followed {
    /// Takes one event; a `lagged` returns the run and seq to resubscribe
    /// from. Panics on a gap, a duplicate or anything after a done.
    fn take(&mut self, message: &Value) -> Option<(String, u64)> {
        let run = message["run"].as_str().unwrap().to_owned();
        match message["event"].as_str() {
            Some("run_event") => {
                let seq = message["seq"].as_u64().unwrap();
                let next = self.next.entry(run.clone()).or_default();
                assert_eq!(seq, *next, "run {run}: event {seq} where {next} was due");
                assert!(!self.done.get(&run).copied().unwrap_or(false), "after done");
                *next += 1;
                self.events += 1;
                if message["data"]["type"] == "done" {
                    self.done.insert(run, true);
                }
                None
            }
            Some("lagged") => {
                self.lags += 1;
                Some((run, message["nextSeq"].as_u64().unwrap()))
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
}

/// Follows `runs` on `connection` until each has its done.
fn follow(connection: &mut Connection, runs: &[String]) -> Followed {
    let mut followed = Followed::default();
    let mut resubscribe = Vec::new();
    let id = connection.send("subscribe", json!({"runs": runs}));
    connection.result(id, |event| resubscribe.extend(followed.take(&event)));
    while followed.done.len() < runs.len() {
        for (run, from) in resubscribe.drain(..) {
            connection.send("subscribe", json!({"runs": [run], "fromSeq": from}));
        }
        let message = connection.message();
        if message.get("event").is_some() {
            resubscribe.extend(followed.take(&message));
        }
    }
    followed
}

/// A `moat serve` on stdio with the store `store`, its stdin and stdout
/// piped.
fn stdio_server(store: &Path) -> Child {
    moat(store)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("moat serve starts")
}

/// Seconds per event through a `moat serve` on stdio: `run` to `done`;
/// the lags, and the run (stored, for the replay figure).
fn protocol_per_event(store: &Path, events: u64) -> (f64, u64, String) {
    let mut server = stdio_server(store);
    let mut connection = Connection::new(
        Box::new(server.stdin.take().unwrap()),
        Box::new(server.stdout.take().unwrap()),
    );
    // Warm: the component compiled and cached, the server's runtime up.
    let warm = connection.send(
        "run",
        json!({"adapter": moat_testkit::components::FLOOD, "prompt": "10"}),
    );
    let warm = connection.result(warm, |_| {})["run"]
        .as_str()
        .unwrap()
        .to_owned();
    follow(&mut connection, &[warm]);

    let started = Instant::now();
    let id = connection.send(
        "run",
        json!({"adapter": moat_testkit::components::FLOOD, "prompt": events.to_string()}),
    );
    let run = connection.result(id, |_| {})["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let followed = follow(&mut connection, std::slice::from_ref(&run));
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(followed.events, events + 1);
    connection.send("shutdown", json!({}));
    let _ = server.wait();
    (elapsed / followed.events as f64, followed.lags, run)
}

/// Reads NDJSON lines from `input` until `is_last` says one is the last,
/// handing each to `check`; how many. Counting, not parsing: the figures
/// this serves are the server's rate, which a parsing client would cap.
fn count_lines(input: impl std::io::Read, mut check: impl FnMut(&[u8]) -> bool) -> u64 {
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut line = Vec::with_capacity(1024);
    let mut lines = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).expect("lines");
        if read == 0 {
            return lines;
        }
        lines += 1;
        if !check(&line) {
            return lines;
        }
    }
}

/// Whether an event's JSON line (bare, or in a protocol message's `data`)
/// is a `done`.
fn is_done(line: &[u8]) -> bool {
    const DONE: &[u8] = br#"{"type":"done""#;
    line.windows(DONE.len()).any(|window| window == DONE)
}

/// The `seq` of a protocol `run_event` line, found without parsing it.
fn seq_of(line: &[u8]) -> Option<u64> {
    const SEQ: &[u8] = br#","seq":"#;
    let at = line.windows(SEQ.len()).position(|w| w == SEQ)? + SEQ.len();
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// Seconds to replay stored run `run` (`events` events and its done) to a
/// subscriber from seq 0 through a `moat serve` on stdio, from the
/// `subscribe` request to the `done` read; the server already up.
fn replay_to_subscriber(store: &Path, run: &str, events: u64) -> f64 {
    let mut server = stdio_server(store);
    let mut input = server.stdin.take().unwrap();
    let mut output = BufReader::new(server.stdout.take().unwrap());
    // Up and answering before the clock starts.
    writeln!(input, r#"{{"id":1,"op":"get","run":"{run}"}}"#).unwrap();
    let mut answer = String::new();
    output.read_line(&mut answer).unwrap();
    assert!(answer.contains("\"result\""), "{answer}");

    let started = Instant::now();
    writeln!(
        input,
        r#"{{"id":2,"op":"subscribe","runs":["{run}"],"fromSeq":0}}"#
    )
    .unwrap();
    let mut next = 0;
    let lines = count_lines(output, |line| {
        let Some(seq) = seq_of(line) else {
            return true; // the subscribe's answer
        };
        assert_eq!(seq, next, "every event once, in order");
        next += 1;
        !is_done(line)
    });
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(next, events + 1, "every event and the done ({lines} lines)");
    drop(input);
    let _ = server.kill();
    let _ = server.wait();
    elapsed
}

/// Seconds of a whole `moat logs RUN --output ndjson` process replaying
/// the same run to its last line.
fn replay_with_logs(store: &Path, run: &str, events: u64) -> f64 {
    let started = Instant::now();
    let mut child = moat(store)
        .args(["logs", run, "--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("moat logs runs");
    let mut done = false;
    let lines = count_lines(child.stdout.take().unwrap(), |line| {
        done = is_done(line);
        !done
    });
    assert!(child.wait().unwrap().success());
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        done && lines == events + 1,
        "every event and the done ({lines} lines)"
    );
    elapsed
}

/// The median of `samples` runs of `measure`.
fn median(samples: usize, mut measure: impl FnMut() -> f64) -> f64 {
    let mut times: Vec<f64> = (0..samples).map(|_| measure()).collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// A `moat serve` on a socket, listening; stopped when dropped, so a
/// bench that fails leaves no server behind.
struct SocketServer(Child);

impl SocketServer {
    fn start(store: &Path, socket: &Path) -> Self {
        let server = Self(
            moat(store)
                .args(["serve", "--socket"])
                .arg(socket)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("moat serve starts"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "the server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Waits for it to exit (after a `shutdown`).
    fn wait(mut self) {
        let _ = self.0.wait();
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Milliseconds from each `run` request to its run's first event, for
/// `concurrent` echo runs asked for at once on one connection to a warm
/// server on a socket (each run subscribed to as its id comes back, as a
/// client must): the samples of `rounds` rounds.
fn create_to_first_event(dir: &Path, concurrent: usize, rounds: usize) -> Vec<f64> {
    let socket = dir.join(format!("first-{concurrent}.sock"));
    let server = SocketServer::start(&dir.join("first.db"), &socket);
    let stream = UnixStream::connect(&socket).unwrap();
    let mut connection = Connection::new(Box::new(stream.try_clone().unwrap()), Box::new(stream));
    // Warm: echo compiled (a built-in), the server's runtime and store up.
    let warm = connection.send("run", json!({"adapter": "echo", "prompt": "warm"}));
    let warm = connection.result(warm, |_| {})["run"]
        .as_str()
        .unwrap()
        .to_owned();
    follow(&mut connection, &[warm]);

    let mut samples = Vec::with_capacity(concurrent * rounds);
    for round in 0..rounds {
        let mut asked = HashMap::new();
        for n in 0..concurrent {
            let sent = Instant::now();
            let id = connection.send(
                "run",
                json!({"adapter": "echo", "prompt": format!("r{round} {n}"), "limits": {"maxMemoryBytes": RUN_MEMORY}}),
            );
            asked.insert(id, sent);
        }
        let mut sent_for_run: HashMap<String, Instant> = HashMap::new();
        let mut done = 0;
        while done < concurrent {
            let message = connection.message();
            if let Some(id) = message["id"].as_u64() {
                if let Some(sent) = asked.remove(&id) {
                    let run = message["result"]["run"]
                        .as_str()
                        .unwrap_or_else(|| panic!("a run: {message}"))
                        .to_owned();
                    connection.send("subscribe", json!({"runs": [run.clone()]}));
                    sent_for_run.insert(run, sent);
                }
                continue;
            }
            if message["event"] != "run_event" {
                continue;
            }
            let run = message["run"].as_str().unwrap();
            if message["seq"] == 0 {
                let sent = sent_for_run[run];
                samples.push(sent.elapsed().as_secs_f64() * 1e3);
            }
            if message["data"]["type"] == "done" {
                done += 1;
            }
        }
    }
    connection.send("shutdown", json!({}));
    server.wait();
    samples
}

/// Milliseconds from a whole `moat run echo` process's start to its first
/// line: what a local run's first event costs a user.
fn local_first_event_ms(store: &Path) -> f64 {
    let started = Instant::now();
    let mut child = moat(store)
        .args(["run", "echo", "hi", "--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("moat runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    assert!(first.starts_with('{'), "{first}");
    assert!(child.wait().unwrap().success());
    elapsed
}

/// The `q` quantile (0..=1) of `samples`.
fn quantile(samples: &mut [f64], q: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let at = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[at]
}

/// The server's peak resident memory (`VmHWM`), in KiB.
fn peak_kib(server: &Child) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Load {
    runs: usize,
    clients: usize,
    seconds: f64,
    events: u64,
    lags: u64,
    peak_kib: u64,
}

/// The memory cap of the runs asked for many at once. Echo and flood need
/// little: hundreds of runs live together at the default cap each (256 MiB)
/// would pass the server's memory budget (half the machine's memory) and be
/// refused.
const RUN_MEMORY: u64 = 32 << 20;

/// 1,000 runs in one server, 10 clients each following all of them.
fn load(dir: &Path, runs: usize, clients: usize, flood: u64) -> Load {
    let socket = dir.join("moat.sock");
    let server = SocketServer::start(&dir.join("load.db"), &socket);
    let connect = || {
        let stream = UnixStream::connect(&socket).unwrap();
        Connection::new(Box::new(stream.try_clone().unwrap()), Box::new(stream))
    };
    let mut starter = connect();
    let started = Instant::now();
    let mut ids = Vec::with_capacity(runs);
    for n in 0..runs {
        let limits = json!({"maxMemoryBytes": RUN_MEMORY});
        let request = if n % 2 == 0 {
            json!({"adapter": "echo", "prompt": format!("run {n}"), "limits": limits})
        } else {
            json!({"adapter": moat_testkit::components::FLOOD, "prompt": flood.to_string(), "limits": limits})
        };
        ids.push(starter.send("run", request));
    }
    let mut run_ids = Vec::with_capacity(runs);
    for id in ids {
        run_ids.push(
            starter.result(id, |_| {})["run"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let followers: Vec<_> = (0..clients)
        .map(|_| {
            let mut connection = connect();
            let runs = run_ids.clone();
            std::thread::spawn(move || follow(&mut connection, &runs))
        })
        .collect();
    let mut events = 0;
    let mut lags = 0;
    for follower in followers {
        let followed = follower
            .join()
            .expect("a client saw every event once, in order");
        assert_eq!(followed.done.len(), runs);
        events += followed.events;
        lags += followed.lags;
    }
    let seconds = started.elapsed().as_secs_f64();
    // Every run, as the store has it: completed.
    let listed = starter.send("list", json!({"status": ["completed"]}));
    let completed = starter.result(listed, |_| {})["runs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(completed, runs, "every run completed");
    let peak_kib = peak_kib(&server.0);
    starter.send("shutdown", json!({}));
    server.wait();
    Load {
        runs,
        clients,
        seconds,
        events,
        lags,
        peak_kib,
    }
}

fn main() {
    let full = common::full_run();
    let (events, runs, clients, flood) = if full {
        (100_000, 1_000, 10, 200)
    } else {
        (1_000, 20, 2, 20)
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store: PathBuf = dir.path().join("moat.db");

    // Warm the compile cache for both sides.
    ndjson_per_event(&store, 10);
    let ndjson = ndjson_per_event(&store, events);
    let (protocol, lags, flooded) = protocol_per_event(&store, events);
    let samples = if full { 5 } else { 1 };
    let replayed = median(samples, || replay_to_subscriber(&store, &flooded, events));
    let logged = median(samples, || replay_with_logs(&store, &flooded, events));
    let local_first = median(if full { 21 } else { 1 }, || local_first_event_ms(&store));
    let firsts: Vec<(usize, Vec<f64>)> = [
        (1, if full { 50 } else { 2 }),
        (100, if full { 5 } else { 1 }),
        (1_000, 1),
    ]
    .into_iter()
    .filter(|&(concurrent, _)| full || concurrent <= 100)
    .map(|(concurrent, rounds)| {
        (
            concurrent,
            create_to_first_event(dir.path(), concurrent, rounds),
        )
    })
    .collect();
    let load = load(dir.path(), runs, clients, flood);

    let ns = |seconds: f64| format!("{:.0} ns", seconds * 1e9);
    let mut table = String::new();
    table.push_str(&format!(
        "Load average: {}\n\n| figure | moat run --output ndjson | moat serve | ratio |\n|---|---|---|---|\n",
        load_average()
    ));
    table.push_str(&format!(
        "| per event, flood of {events} | {} | {} (lagged {lags}×) | {:.2}× |\n",
        ns(ndjson),
        ns(protocol),
        protocol / ndjson
    ));
    let rate = |seconds: f64| (events + 1) as f64 / seconds;
    table.push_str(&format!(
        "| replay of the stored run to a subscriber, from seq 0 | {:.0} events/s (`moat logs`, whole process) | {:.0} events/s | {:.2}× |\n",
        rate(logged),
        rate(replayed),
        rate(replayed) / rate(logged)
    ));
    table.push_str(
        "\n| concurrent `run`s of echo | create → first event p50 | p99 | samples | baseline: `moat run echo`, start → first line (median) |\n|---|---|---|---|---|\n"
    );
    for (concurrent, mut samples) in firsts {
        let count = samples.len();
        table.push_str(&format!(
            "| {concurrent} | {:.2} ms | {:.2} ms | {count} | {local_first:.2} ms |\n",
            quantile(&mut samples, 0.5),
            quantile(&mut samples, 0.99),
        ));
    }
    table.push_str(&format!(
        "\n| load | figure |\n|---|---|\n| runs (half echo, half flood of {flood}) | {} |\n| clients, each following every run | {} |\n| wall time, first run to the last client's last done | {:.2} s |\n| events delivered (all clients) | {} ({:.0}/s) |\n| lagged, resumed from the store | {} |\n| every event once and in order, every run completed | yes |\n| server peak memory | {:.1} MiB |\n",
        load.runs,
        load.clients,
        load.seconds,
        load.events,
        load.events as f64 / load.seconds,
        load.lags,
        load.peak_kib as f64 / 1024.0
    ));
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("serve.md"), &table).expect("the summary is written");
    }
}
