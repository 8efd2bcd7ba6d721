//! `cargo bench -p moat-benches --bench egress`: what containing the programs a run
//! starts costs (docs/performance.md, "Spawned programs: containment and
//! the proxy"). Every figure is measured beside its baseline in the same
//! bench run, through the real `moat` binary and the testing `escape`
//! component, and reported as a ratio; no time is asserted.
//!
//! 1. **Containment per spawned program**, contained (the default) beside
//!    `--no-contain`, two ways:
//!    - a. *timestamps*: runs of `spawn date +%s%N` lines. Each program
//!      prints the clock as it runs, so the difference between two
//!      consecutive programs' clocks is one whole spawn as the adapter
//!      pays it (the previous program's exit and reaping, the component's
//!      next call, moat's preparation, fork, containment, exec, the
//!      dynamic loader): p50, p99 and mean per spawn. A run starts with an
//!      `http GET` to the bench's server, which answers with its clock: the
//!      time from there to the first program's clock is the first spawn,
//!      which also makes the run's namespace and starts its proxy; what
//!      the first spawn costs beyond a later one is the once-per-run cost
//!      of starting; from the last program's clock to the moat process's
//!      exit, the end of a run.
//!    - b. *whole runs*: the wall time of `moat run` with N `spawn true`
//!      lines and with one: (T(N) − T(1)) / (N − 1) is the mean per spawn
//!      without the once-per-run cost (medians of several runs each), a
//!      check on method a by other means.
//! 2. **The proxy per request**: one `curl` fetching a small URL of the
//!    bench's loopback server K times (`-w '%{time_total}'` per request),
//!    inside a contained `shell` (through the run's proxy), beside the same
//!    command on the host (direct, curl keeping its connection) and direct
//!    with `Connection: close` (a new connection per request, as the proxy
//!    makes to the origin for every forwarded request).
//! 3. **The proxy per MB**: a 64 MiB body through the proxy, forwarded and
//!    through a `CONNECT` tunnel (`--proxytunnel`), beside curl direct.
//! 4. **A connection on the run's own loopback**: a Python program serving
//!    on 127.0.0.1 and connecting to itself N times (each connection
//!    timed, connect and close), contained — where moat makes every
//!    `connect` of the run's programs (a seccomp notification answered by
//!    the host) — beside `--no-contain`, where the kernel alone does.
//! 5. **A run beside a fork bomb**: the wall time of a contained run of
//!    50 `spawn true`, alone and while another run's bash fork bomb is at
//!    its process limit (the default 4096, and `--max-processes=200`).
//! 6. **Metering a flood of model calls through the proxy** (issue 52): the
//!    contained curl of figure 2 POSTing K chat completions to the bench's
//!    server (`/v1/chat/completions`, each answered with a small JSON body
//!    carrying usage), with `--meter 127.0.0.1:PORT=openai` (each request
//!    a model call whose answer moat reads as it passes, and charges as a
//!    `moat:usage` event) beside the same run without it (each request
//!    still recorded as a row and a `moat:traffic` event), the two runs
//!    alternating. Every metered request's row must carry its usage, and
//!    no unmetered one.
//!
//! The table goes to stdout and to `target/moat-bench/egress.md`; `--
//! metering` runs figure 6 alone (`egress-metering.md`). Without
//! `--bench` (as under `cargo test --benches`) it runs once at a tiny size
//! and writes nothing.

#[path = "../common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bench_dir, load_average, moat};
use moat_testkit::components::ESCAPE;

/// Sizes of a full run and of a smoke run.
struct Scale {
    /// Runs per mode of the timestamp method, and programs per run.
    stamp_runs: usize,
    stamps: usize,
    /// Extra short runs per mode (one `http` mark, two programs) for the
    /// first spawn.
    first_runs: usize,
    /// `spawn true` lines in a long whole run; long runs and one-spawn
    /// runs per mode.
    whole_spawns: usize,
    whole_runs: usize,
    single_runs: usize,
    /// Small requests per curl, and rounds of them per side.
    requests: usize,
    request_rounds: usize,
    /// The large body, and downloads of it per side.
    body_mib: usize,
    downloads: usize,
    /// Connections on the run's loopback per run, and runs per mode.
    connections: usize,
    connection_rounds: usize,
    /// Runs timed alone and beside each fork bomb.
    bomb_runs: usize,
    /// Runs per side of the flood of model calls, `requests` each.
    model_rounds: usize,
    /// The bombs' process limits (`None`: the default). Under `cargo
    /// test` a small one only, which the tests beside it do not feel.
    bomb_limits: &'static [Option<&'static str>],
}

const FULL: Scale = Scale {
    stamp_runs: 5,
    stamps: 200,
    first_runs: 20,
    whole_spawns: 200,
    whole_runs: 3,
    single_runs: 15,
    requests: 500,
    request_rounds: 2,
    body_mib: 64,
    downloads: 3,
    connections: 1000,
    connection_rounds: 2,
    bomb_runs: 10,
    model_rounds: 4,
    bomb_limits: &[None, Some("--max-processes=200")],
};

const SMOKE: Scale = Scale {
    stamp_runs: 1,
    stamps: 3,
    first_runs: 1,
    whole_spawns: 3,
    whole_runs: 1,
    single_runs: 1,
    requests: 3,
    request_rounds: 1,
    body_mib: 1,
    downloads: 1,
    connections: 5,
    connection_rounds: 1,
    bomb_runs: 1,
    model_rounds: 1,
    bomb_limits: &[Some("--max-processes=50")],
};

fn main() {
    let full = common::full_run();
    let scale = if full { FULL } else { SMOKE };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = dir.path().join("moat.db");
    let origin = Origin::start(scale.body_mib << 20);
    let load = load_average();
    let bench = Bench {
        store: &store,
        origin: &origin,
    };
    // Warm: the compile cache of the component.
    bench.escape(Mode::Contained, &["--allow-run=true"], "spawn true");
    if std::env::args().skip(1).any(|arg| arg == "metering") {
        // `-- metering`: figure 6 alone, its own summary.
        let table = metering_report(&bench.model_calls(&scale));
        println!("load average before: {load}\n{table}");
        if full {
            let out = bench_dir();
            std::fs::create_dir_all(&out).expect("the bench directory");
            std::fs::write(out.join("egress-metering.md"), &table).expect("the summary is written");
        }
        return;
    }

    let spawns = bench.spawn_stamps(&scale);
    let whole = bench.whole_runs(&scale);
    let requests = bench.requests(&scale);
    // Beside figure 2, and before the fork bombs, whose aftermath would
    // weigh on whichever side ran next.
    let model_calls = bench.model_calls(&scale);
    let bodies = bench.bodies(&scale);
    let connections = bench.connections(&scale);
    let beside_bombs = bench.beside_bombs(&scale);

    let mut table = report(&scale, &load, &spawns, &whole, &requests, &bodies);
    table.push_str(&connections_report(&scale, &connections));
    table.push_str(&bombs_report(&scale, &beside_bombs));
    table.push_str(&metering_report(&model_calls));
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("egress.md"), &table).expect("the summary is written");
    }
}

/// Whether a run's programs are contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Contained,
    Off,
}

impl Mode {
    const BOTH: [Mode; 2] = [Mode::Contained, Mode::Off];
}

struct Bench<'a> {
    store: &'a Path,
    origin: &'a Origin,
}

impl Bench<'_> {
    /// `moat run ESCAPE flags… prompt` (`--no-contain` when `mode` is
    /// off, no run store): the text of its events, one per probe, each
    /// required to be `ok: …`.
    fn escape(&self, mode: Mode, flags: &[&str], prompt: &str) -> Vec<String> {
        self.escape_ended(mode, flags, prompt).0
    }

    /// [`Self::escape`], and the clock (ns since the epoch) when the moat
    /// process had exited.
    fn escape_ended(&self, mode: Mode, flags: &[&str], prompt: &str) -> (Vec<String>, i128) {
        let ran = self.escape_run(mode, flags, prompt);
        (ran.texts, ran.ended)
    }

    /// [`Self::escape_ended`], and the payloads of the run's
    /// `moat:traffic` events.
    fn escape_run(&self, mode: Mode, flags: &[&str], prompt: &str) -> Ran {
        let output = self
            .command(mode, flags, prompt)
            .stdout(Stdio::piped())
            .output()
            .expect("moat runs");
        let ended = now_ns();
        assert!(
            output.status.success(),
            "moat run failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stdout)
        );
        let mut texts = Vec::new();
        let mut traffic = Vec::new();
        let mut done = false;
        for line in output
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
        {
            let event: serde_json::Value = serde_json::from_slice(line).expect("an NDJSON event");
            match event["type"].as_str() {
                Some("text") => {
                    let text = event["payload"]["content"].as_str().expect("a text");
                    assert!(text.starts_with("ok: "), "a probe failed: {text}");
                    texts.push(text["ok: ".len()..].to_owned());
                }
                Some("done") => {
                    assert_eq!(event["payload"]["status"], "success", "{event}");
                    done = true;
                }
                Some("moat:traffic") => traffic.push(event["payload"].clone()),
                _ => {}
            }
        }
        assert!(done, "the run ended with done");
        assert_eq!(texts.len(), prompt.lines().count(), "one result per probe");
        Ran {
            texts,
            ended,
            traffic,
        }
    }

    fn command(&self, mode: Mode, flags: &[&str], prompt: &str) -> Command {
        let mut command = moat(self.store);
        command
            .args(["run", ESCAPE, "--no-store", "--output", "ndjson"])
            .args(flags)
            .arg(prompt)
            .stdout(Stdio::null());
        if mode == Mode::Off {
            command.arg("--no-contain");
        }
        command
    }

    /// Method 1a: the clocks of `date` programs started one after another.
    fn spawn_stamps(&self, scale: &Scale) -> [Stamps; 2] {
        let mut stamps = [Stamps::default(), Stamps::default()];
        let grant = format!("--allow-net=127.0.0.1:{}", self.origin.port);
        let flags = ["--allow-run=date", grant.as_str()];
        let prompt = |programs: usize| {
            let mut prompt = format!("http GET {}\n", self.origin.url("/clock"));
            for _ in 0..programs {
                prompt.push_str("spawn date +%s%N\n");
            }
            prompt
        };
        let record = |long: bool, stamps: &mut [Stamps; 2]| {
            for (at, mode) in Mode::BOTH.into_iter().enumerate() {
                let programs = if long { scale.stamps } else { 2 };
                let (texts, ended) = self.escape_ended(mode, &flags, &prompt(programs));
                let mark: i128 = texts[0]
                    .strip_prefix("200 ")
                    .and_then(|clock| clock.trim().parse().ok())
                    .unwrap_or_else(|| panic!("the server's clock: {}", texts[0]));
                let clocks: Vec<i128> = texts[1..]
                    .iter()
                    .map(|text| {
                        let (code, out) = exit_and_out(text);
                        assert_eq!(code, "0", "date ran: {text}");
                        out.parse().unwrap_or_else(|_| panic!("a clock: {text}"))
                    })
                    .collect();
                stamps[at].first.push((clocks[0] - mark) as f64 / 1e9);
                stamps[at]
                    .end
                    .push((ended - clocks[clocks.len() - 1]) as f64 / 1e9);
                stamps[at]
                    .each
                    .extend(clocks.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e9));
            }
        };
        for _ in 0..scale.stamp_runs {
            record(true, &mut stamps);
        }
        for _ in 0..scale.first_runs {
            record(false, &mut stamps);
        }
        stamps
    }

    /// Method 1b: whole runs of `spawn true` lines.
    fn whole_runs(&self, scale: &Scale) -> [Whole; 2] {
        let flags = ["--allow-run=true"];
        let long = "spawn true\n".repeat(scale.whole_spawns);
        let time = |mode: Mode, prompt: &str| {
            let started = Instant::now();
            let texts = self.escape(mode, &flags, prompt);
            let took = started.elapsed().as_secs_f64();
            for text in &texts {
                assert_eq!(exit_and_out(text).0, "0", "true ran: {text}");
            }
            took
        };
        let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        // Interleaved, so both modes share whatever the machine is doing.
        for round in 0..scale.single_runs.max(scale.whole_runs) {
            for (at, mode) in Mode::BOTH.into_iter().enumerate() {
                if round < scale.whole_runs {
                    times[at][0].push(time(mode, &long));
                }
                if round < scale.single_runs {
                    times[at][1].push(time(mode, "spawn true"));
                }
            }
        }
        times.map(|[long, single]| Whole {
            long: median(&long),
            single: median(&single),
            spawns: scale.whole_spawns,
        })
    }

    /// Figure 2: per-request times of one curl through the proxy and
    /// directly.
    fn requests(&self, scale: &Scale) -> Requests {
        let url = self.origin.url(&format!("/small?[1-{}]", scale.requests));
        let curl = format!("curl -s -o /dev/null -w '%{{time_total}}\\n' '{url}'");
        let closing =
            format!("curl -s -o /dev/null -H 'Connection: close' -w '%{{time_total}}\\n' '{url}'");
        let mut found = Requests::default();
        // Warm: the proxy's first connection, curl's libraries.
        self.contained_shell(&curl);
        for _ in 0..scale.request_rounds {
            found.proxied.extend(numbers(&self.contained_shell(&curl)));
            found.direct.extend(numbers(&host_shell(&curl)));
            found.closing.extend(numbers(&host_shell(&closing)));
        }
        let expected = scale.requests * scale.request_rounds;
        for side in [&found.proxied, &found.direct, &found.closing] {
            assert_eq!(side.len(), expected, "a time per request");
        }
        found
    }

    /// Figure 3: MB/s of the large body through the proxy and directly.
    fn bodies(&self, scale: &Scale) -> Bodies {
        let url = self.origin.url(&format!("/large?[1-{}]", scale.downloads));
        let curl = |extra: &str| {
            format!(
                "curl -s {extra} -o /dev/null -w '%{{time_total}} %{{size_download}}\\n' '{url}'"
            )
        };
        let rates = |out: &[String]| -> Vec<f64> {
            let rates: Vec<f64> = out
                .iter()
                .map(|line| {
                    let (time, size) = line.split_once(' ').expect("time and size");
                    let size: f64 = size.parse().expect("a size");
                    assert_eq!(size as usize, self.origin.large.len(), "the whole body");
                    size / time.parse::<f64>().expect("a time") / 1e6
                })
                .collect();
            assert_eq!(rates.len(), scale.downloads, "a figure per download");
            rates
        };
        Bodies {
            forward: median(&rates(&self.contained_shell(&curl("")))),
            tunnel: median(&rates(&self.contained_shell(&curl("--proxytunnel")))),
            direct: median(&rates(&host_shell(&curl("")))),
        }
    }

    /// Figure 4: seconds per connection on the run's own loopback,
    /// contained and not.
    fn connections(&self, scale: &Scale) -> [Vec<f64>; 2] {
        // One line (the escape component reads a command per line): a
        // server thread accepting and closing, and N timed connections.
        let script = format!(
            "/usr/bin/python3 -c 'import socket, threading, time; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(128); threading.Thread(target=lambda: [s.accept()[0].close() for _ in iter(int, 1)], daemon=True).start(); a = s.getsockname(); [print((lambda t: (socket.create_connection(a).close(), time.perf_counter() - t)[1])(time.perf_counter())) for _ in range({})]'",
            scale.connections
        );
        let mut found = [Vec::new(), Vec::new()];
        for _ in 0..scale.connection_rounds {
            for (at, mode) in Mode::BOTH.into_iter().enumerate() {
                let texts = self.escape(mode, &["--allow-run=sh"], &format!("shell {script}"));
                let (code, out) = exit_and_out(&texts[0]);
                assert_eq!(code, "0", "the script ran: {}", texts[0]);
                let times: Vec<f64> = out
                    .split('|')
                    .filter(|l| !l.is_empty())
                    .map(|l| l.parse().expect("seconds"))
                    .collect();
                assert_eq!(times.len(), scale.connections, "a time per connection");
                found[at].extend(times);
            }
        }
        found
    }

    /// Figure 5: the median wall time of a contained run of 50 `spawn
    /// true`, alone, then beside a fork bomb at each process limit.
    fn beside_bombs(&self, scale: &Scale) -> Vec<(String, f64)> {
        let flags = ["--allow-run=true"];
        let run = "spawn true\n".repeat(50);
        let timed = || {
            let times: Vec<f64> = (0..scale.bomb_runs)
                .map(|_| {
                    let started = Instant::now();
                    self.escape(Mode::Contained, &flags, &run);
                    started.elapsed().as_secs_f64()
                })
                .collect();
            median(&times)
        };
        let mut found = vec![("alone".to_owned(), timed())];
        for &limit in scale.bomb_limits {
            let mut flags = vec!["--allow-run=sh"];
            flags.extend(limit);
            let mut bomb = self
                .command(
                    Mode::Contained,
                    &flags,
                    // bash's, which retries a refused fork: it stays at
                    // its limit (dash's dies out once forks fail).
                    "shell timeout -s KILL 120 bash -c ':(){ :|:& };:' 2>/dev/null",
                )
                .spawn()
                .expect("the bomb's run starts");
            // Until the bomb is at its limit.
            std::thread::sleep(Duration::from_secs(3));
            let beside = timed();
            // Ended as a user would (Ctrl-C): moat kills the run's cgroup.
            let _ = Command::new("kill")
                .args(["-INT", &bomb.id().to_string()])
                .status();
            let _ = bomb.wait();
            let name = match limit {
                None => "beside a fork bomb at the default limit (4096)".to_owned(),
                Some(flag) => format!("beside a fork bomb under `{flag}`"),
            };
            found.push((name, beside));
        }
        found
    }

    /// Figure 6: per-request times of one curl POSTing chat completions
    /// through the proxy, metered and not, runs alternating.
    fn model_calls(&self, scale: &Scale) -> ModelCalls {
        let url = self
            .origin
            .url(&format!("/v1/chat/completions?[1-{}]", scale.requests));
        let curl = format!(
            "curl -s -o /dev/null -w '%{{time_total}}\\n' -H 'content-type: application/json' -d '{CHAT_REQUEST}' '{url}'"
        );
        let meter = format!("--meter=127.0.0.1:{}=openai", self.origin.port);
        let flood = |metered: bool| {
            let flags: &[&str] = if metered { &[&meter] } else { &[] };
            let (times, rows) = self.contained_shell_with(flags, &curl);
            let calls: Vec<&serde_json::Value> = rows
                .iter()
                .filter(|row| row["path"] == "/v1/chat/completions")
                .collect();
            assert_eq!(calls.len(), scale.requests, "a row per request: {rows:?}");
            for row in calls {
                assert_eq!(row["status"], 200, "{row}");
                if metered {
                    assert_eq!(row["vendor"], "openai", "a model call: {row}");
                    assert_eq!(row["usage"]["inputTokens"], 10, "its usage read: {row}");
                    assert_eq!(row["usage"]["outputTokens"], 2, "its usage read: {row}");
                } else {
                    assert!(row["usage"].is_null(), "nothing read unmetered: {row}");
                }
            }
            numbers(&times)
        };
        // Warm: the proxy's first connection, curl's libraries, each side.
        flood(false);
        flood(true);
        let mut found = ModelCalls::default();
        for round in 0..scale.model_rounds {
            // Each side first in every other round.
            for metered in [round % 2 == 1, round % 2 == 0] {
                let times = flood(metered);
                let side = if metered {
                    &mut found.metered
                } else {
                    &mut found.plain
                };
                side.mean.push(mean(&times));
                side.all.extend(times);
            }
        }
        found
    }

    /// `script` in a contained `sh` of the escape component, the origin
    /// granted: its stdout lines.
    fn contained_shell(&self, script: &str) -> Vec<String> {
        self.contained_shell_with(&[], script).0
    }

    /// [`Self::contained_shell`] with more `flags`; also the run's
    /// `moat:traffic` rows.
    fn contained_shell_with(
        &self,
        flags: &[&str],
        script: &str,
    ) -> (Vec<String>, Vec<serde_json::Value>) {
        let grant = format!("--allow-net=127.0.0.1:{}", self.origin.port);
        let mut all = vec!["--allow-run=sh", "--allow-run=curl", &grant];
        all.extend(flags);
        let ran = self.escape_run(Mode::Contained, &all, &format!("shell {script}"));
        let (code, out) = exit_and_out(&ran.texts[0]);
        assert_eq!(code, "0", "the script ran: {}", ran.texts[0]);
        let lines = out
            .split('|')
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        (lines, ran.traffic)
    }
}

/// `script` in `sh` on the host, without any proxy: its stdout lines.
fn host_shell(script: &str) -> Vec<String> {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    for name in moat_contain::PROXY_VARIABLES {
        command.env_remove(name);
    }
    let output = command.output().expect("sh runs");
    assert!(output.status.success(), "{script} failed");
    String::from_utf8(output.stdout)
        .expect("text")
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The exit code and the stdout (lines joined with `|`) of a `spawn` or
/// `shell` probe's result, `exit=N out=… err=…`.
fn exit_and_out(text: &str) -> (&str, &str) {
    let rest = text.strip_prefix("exit=").expect("exit=");
    let (code, rest) = rest.split_once(" out=").expect(" out=");
    let out = rest.rsplit_once(" err=").map_or(rest, |(out, _)| out);
    (code, out)
}

/// The clock, in nanoseconds since the epoch (what `date +%s%N` prints).
fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos() as i128
}

fn numbers(lines: &[String]) -> Vec<f64> {
    lines
        .iter()
        .map(|line| line.trim().parse().expect("a number"))
        .collect()
}

/// What one run of the escape component gave.
struct Ran {
    /// The text of its events, one per probe (`ok: ` taken off).
    texts: Vec<String>,
    /// The clock (ns since the epoch) when the moat process had exited.
    ended: i128,
    /// The payloads of its `moat:traffic` events.
    traffic: Vec<serde_json::Value>,
}

/// The body of figure 6's chat completions.
const CHAT_REQUEST: &str = r#"{"model":"bench","messages":[{"role":"user","content":"hi"}]}"#;

/// The bench server's answer to a chat completion: 10 input and 2 output
/// tokens.
const CHAT_ANSWER: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#;

/// Figure 6's per-request seconds, per side.
#[derive(Default)]
struct ModelCalls {
    metered: Flood,
    plain: Flood,
}

/// One side of figure 6.
#[derive(Default)]
struct Flood {
    /// Every request's seconds.
    all: Vec<f64>,
    /// The mean of each run.
    mean: Vec<f64>,
}

/// Method 1a's figures of one mode, in seconds.
#[derive(Default)]
struct Stamps {
    /// The first program of each run, from the server's clock.
    first: Vec<f64>,
    /// Every later program, from the one before.
    each: Vec<f64>,
    /// The end of each run: from its last program's clock to the moat
    /// process's exit.
    end: Vec<f64>,
}

/// Method 1b's figures of one mode: median seconds of a long run and of a
/// one-spawn run.
struct Whole {
    long: f64,
    single: f64,
    spawns: usize,
}

impl Whole {
    /// Mean seconds per spawn, without the once-per-run cost.
    fn per_spawn(&self) -> f64 {
        (self.long - self.single) / (self.spawns.max(2) - 1) as f64
    }
}

/// Figure 2's per-request seconds.
#[derive(Default)]
struct Requests {
    proxied: Vec<f64>,
    direct: Vec<f64>,
    closing: Vec<f64>,
}

/// Figure 3's MB/s.
struct Bodies {
    forward: f64,
    tunnel: f64,
    direct: f64,
}

fn median(values: &[f64]) -> f64 {
    percentile(values, 0.5)
}

/// The nearest-rank percentile `p` (0..1) of `values`.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn report(
    scale: &Scale,
    load: &str,
    spawns: &[Stamps; 2],
    whole: &[Whole; 2],
    requests: &Requests,
    bodies: &Bodies,
) -> String {
    let ms = |seconds: f64| format!("{:.2} ms", seconds * 1e3);
    let us = |seconds: f64| format!("{:.0} µs", seconds * 1e6);
    let [stamped, stamped_off] = spawns;
    let [whole_in, whole_off] = whole;
    let mut table = format!(
        "- date: {}\n- load average before: {load}\n- network containment here: {}\n- the moat binary of this build, the testing escape component, `--no-store`\n\n",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        containment_here(),
    );

    table.push_str(&format!(
        "Containment per spawned program: {} programs in each of {} runs of `spawn date +%s%N` per mode (differences of consecutive programs' clocks), {} more runs of two for the first spawn\n\n",
        scale.stamps, scale.stamp_runs, scale.first_runs
    ));
    table.push_str(
        "| per spawn | contained | `--no-contain` | extra | ratio |\n|---|---|---|---|---|\n",
    );
    // A percentile, or the mean (`None`).
    for (name, p) in [
        ("p50", Some(0.5)),
        ("p90", Some(0.9)),
        ("p99", Some(0.99)),
        ("mean", None),
        ("max", Some(1.0)),
    ] {
        let figure = |values: &[f64]| p.map_or_else(|| mean(values), |p| percentile(values, p));
        let (inside, outside) = (figure(&stamped.each), figure(&stamped_off.each));
        table.push_str(&format!(
            "| {name} | {} | {} | {} | ×{:.2} |\n",
            ms(inside),
            ms(outside),
            ms(inside - outside),
            inside / outside
        ));
    }
    let first_in = median(&stamped.first);
    let first_off = median(&stamped_off.first);
    let later_extra = median(&stamped.each) - median(&stamped_off.each);
    table.push_str(&format!(
        "| first spawn of a run (median of {}) | {} | {} | {} | ×{:.2} |\n",
        stamped.first.len(),
        ms(first_in),
        ms(first_off),
        ms(first_in - first_off),
        first_in / first_off
    ));
    let (end_in, end_off) = (median(&stamped.end), median(&stamped_off.end));
    table.push_str(&format!(
        "| end of a run: last program → moat exited (median of {}) | {} | {} | {} | ×{:.2} |\n",
        stamped.end.len(),
        ms(end_in),
        ms(end_off),
        ms(end_in - end_off),
        end_in / end_off
    ));
    let once_start = first_in - first_off - later_extra;
    let p99_extra = percentile(&stamped.each, 0.99) - percentile(&stamped_off.each, 0.99);
    table.push_str(&format!(
        "\n- once per run: {} at the first spawn (the namespace and the proxy: the first spawn's extra less a later spawn's median extra), {} at the end\n- p99 extra per spawn ≤ 1 ms: {}\n\n",
        ms(once_start),
        ms(end_in - end_off),
        if p99_extra <= 1e-3 { "yes" } else { "**no**" },
    ));

    table.push_str(&format!(
        "Whole runs (median of {} runs of {} `spawn true`, {} of one):\n\n",
        scale.whole_runs, scale.whole_spawns, scale.single_runs
    ));
    table.push_str(
        "| whole run | contained | `--no-contain` | extra | ratio |\n|---|---|---|---|---|\n",
    );
    table.push_str(&format!(
        "| {} spawns | {} | {} | {} | ×{:.2} |\n",
        scale.whole_spawns,
        ms(whole_in.long),
        ms(whole_off.long),
        ms(whole_in.long - whole_off.long),
        whole_in.long / whole_off.long
    ));
    table.push_str(&format!(
        "| one spawn | {} | {} | {} | ×{:.2} |\n",
        ms(whole_in.single),
        ms(whole_off.single),
        ms(whole_in.single - whole_off.single),
        whole_in.single / whole_off.single
    ));
    let (each_in, each_off) = (whole_in.per_spawn(), whole_off.per_spawn());
    table.push_str(&format!(
        "| mean per spawn, (T({n}) − T(1)) / {} | {} | {} | {} | ×{:.2} |\n",
        scale.whole_spawns.max(2) - 1,
        ms(each_in),
        ms(each_off),
        ms(each_in - each_off),
        each_in / each_off,
        n = scale.whole_spawns,
    ));
    // The one-spawn runs' extra, less a spawn's, would be the once-per-run
    // cost, but as the difference of two medians of whole processes (each
    // ±5 ms) it is too noisy to report: the timestamps give it above.
    table.push('\n');

    let n = requests.proxied.len();
    table.push_str(&format!(
        "The proxy per request: curl fetching a 2-byte body {n} times (`time_total` of each)\n\n"
    ));
    table.push_str("| per request | through the proxy (contained) | direct, kept connection | ratio | direct, `Connection: close` | ratio |\n|---|---|---|---|---|---|\n");
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let proxied = percentile(&requests.proxied, p);
        let direct = percentile(&requests.direct, p);
        let closing = percentile(&requests.closing, p);
        table.push_str(&format!(
            "| {name} | {} | {} | ×{:.2} | {} | ×{:.2} |\n",
            us(proxied),
            us(direct),
            proxied / direct,
            us(closing),
            proxied / closing
        ));
    }
    let (proxied, direct, closing) = (
        mean(&requests.proxied),
        mean(&requests.direct),
        mean(&requests.closing),
    );
    table.push_str(&format!(
        "| mean | {} | {} | ×{:.2} | {} | ×{:.2} |\n",
        us(proxied),
        us(direct),
        proxied / direct,
        us(closing),
        proxied / closing
    ));
    // A response whose body waits for the head's acknowledgment (Nagle's
    // algorithm against a delayed ACK) takes about 40 ms.
    let slow = |values: &[f64]| values.iter().filter(|&&t| t > 0.02).count();
    table.push_str(&format!(
        "| over 20 ms | {} of {n} | {} | — | {} | — |\n\n",
        slow(&requests.proxied),
        slow(&requests.direct),
        slow(&requests.closing),
    ));

    table.push_str(&format!(
        "The proxy per MB: a {} MiB body, median of {} downloads each\n\n",
        scale.body_mib, scale.downloads
    ));
    table.push_str("| path | MB/s | direct MB/s | time ratio |\n|---|---|---|---|\n");
    for (name, rate) in [
        ("forwarded by the proxy (`GET http://…`)", bodies.forward),
        ("tunnel (`CONNECT`, `--proxytunnel`)", bodies.tunnel),
    ] {
        table.push_str(&format!(
            "| {name} | {rate:.0} | {:.0} | ×{:.2} |\n",
            bodies.direct,
            bodies.direct / rate
        ));
    }
    table
}

/// Figure 4's table.
fn connections_report(scale: &Scale, [contained, off]: &[Vec<f64>; 2]) -> String {
    let us = |seconds: f64| format!("{:.0} µs", seconds * 1e6);
    let mut table = format!(
        "\n\nA connection on the run's own loopback: {} connections (connect and close) in each of {} runs per mode\n\n",
        scale.connections, scale.connection_rounds
    );
    table.push_str(
        "| per connection | contained (moat connects) | `--no-contain` | extra | ratio |\n|---|---|---|---|---|\n",
    );
    let row = |name: &str, a: f64, b: f64| {
        format!(
            "| {name} | {} | {} | {} | ×{:.2} |\n",
            us(a),
            us(b),
            us(a - b),
            a / b
        )
    };
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        table.push_str(&row(name, percentile(contained, p), percentile(off, p)));
    }
    table.push_str(&row("mean", mean(contained), mean(off)));
    table
}

/// Figure 5's table.
fn bombs_report(scale: &Scale, found: &[(String, f64)]) -> String {
    let alone = found[0].1;
    let mut table = format!(
        "\n\nA run beside a fork bomb: a contained run of 50 `spawn true`, median of {} runs each\n\n| the run | wall time | ratio to alone |\n|---|---|---|\n",
        scale.bomb_runs
    );
    for (name, seconds) in found {
        table.push_str(&format!(
            "| {name} | {:.0} ms | ×{:.2} |\n",
            seconds * 1e3,
            seconds / alone
        ));
    }
    table
}

/// Figure 6's table.
fn metering_report(found: &ModelCalls) -> String {
    let us = |seconds: f64| format!("{:.0} µs", seconds * 1e6);
    let (metered, plain) = (&found.metered, &found.plain);
    let mut table = format!(
        "\n\nMetering a flood of model calls through the proxy: curl POSTing {} chat completions in each of {} runs per side (`time_total` of each), runs alternating\n\n",
        metered.all.len() / metered.mean.len().max(1),
        metered.mean.len(),
    );
    table.push_str(
        "| per request | metered (`--meter …=openai`) | not metered (rows only) | extra | ratio |\n|---|---|---|---|---|\n",
    );
    let row = |name: &str, a: f64, b: f64| {
        format!(
            "| {name} | {} | {} | {} | ×{:.3} ({:+.1} %) |\n",
            us(a),
            us(b),
            us(a - b),
            a / b,
            (a / b - 1.0) * 100.0
        )
    };
    for (name, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        table.push_str(&row(
            name,
            percentile(&metered.all, p),
            percentile(&plain.all, p),
        ));
    }
    table.push_str(&row("mean", mean(&metered.all), mean(&plain.all)));
    // Each run's mean beside the other side's run of the same round.
    let mut paired: Vec<f64> = metered
        .mean
        .iter()
        .zip(&plain.mean)
        .map(|(a, b)| a / b)
        .collect();
    paired.sort_by(f64::total_cmp);
    table.push_str(&format!(
        "\n- the runs' means, metered over not, round by round: {}\n- metering adds ≤ 3 % (mean): {}\n",
        paired
            .iter()
            .map(|r| format!("×{r:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        if mean(&metered.all) <= 1.03 * mean(&plain.all) {
            "yes"
        } else {
            "**no**"
        },
    ));
    table
}

/// What `moat inspect` says of the network containment here.
fn containment_here() -> String {
    let output = Command::new(common::moat_bin())
        .args(["inspect", ESCAPE])
        .stderr(Stdio::null())
        .output();
    output
        .ok()
        .and_then(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .find_map(|line| {
                    line.strip_prefix("network")
                        .map(str::trim)
                        .map(str::to_owned)
                })
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The bench's HTTP/1.1 server on 127.0.0.1: `/clock` answers with its
/// clock (nanoseconds since the epoch), `/large` with the large body,
/// `/v1/chat/completions` with a chat completion ([`CHAT_ANSWER`]),
/// anything else with `ok`. Keeps connections open unless asked to close.
struct Origin {
    port: u16,
    large: Arc<Vec<u8>>,
}

impl Origin {
    fn start(large: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("an address").port();
        let large = Arc::new(vec![b'x'; large]);
        let body = large.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let body = body.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &body);
                });
            }
        });
        Self { port, large }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// Answers the requests of one connection.
fn serve(stream: TcpStream, large: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let path = request.split(' ').nth(1).unwrap_or("/").to_owned();
        let mut close = false;
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let header = header.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if header == "connection: close" {
                close = true;
            }
            if let Some(value) = header.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        std::io::copy(&mut (&mut reader).take(length as u64), &mut std::io::sink())?;
        let clock;
        let mut content_type = "text/plain";
        let body: &[u8] = if path.starts_with("/clock") {
            clock = now_ns().to_string();
            clock.as_bytes()
        } else if path.starts_with("/large") {
            large
        } else if path.starts_with("/v1/chat/completions") {
            content_type = "application/json";
            CHAT_ANSWER.as_bytes()
        } else {
            b"ok"
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{}\r\n",
            body.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(body)?;
        if close {
            return Ok(());
        }
    }
}
