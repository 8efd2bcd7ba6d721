//! The fake CLI (`moat-fake-cli`): stands in for an agent CLI by replaying
//! a fixture.
//!
//! Copied or linked into a directory under the CLI's name (`claude`,
//! `codex`, `gemini`), it ignores its arguments (it records them) and
//! replays a recorded run: each line on stdout or stderr at its recorded
//! time, then exits with the recorded code. Like the real CLIs it dies on
//! SIGTERM (the default disposition), unless told to ignore it.
//!
//! It reads its configuration, a JSON object, from the file named by
//! `MOAT_FAKE_CLI_CONFIG`, else from `fake-cli.json` beside its own
//! executable (so a copy named `claude` in a directory of its own needs no
//! environment):
//!
//! ```json
//! {"fixture": "tests/fixtures/cli/claude/text.jsonl",
//!  "speed": 1.0,              // time scale: 2.0 replays twice as fast, 0 without pauses
//!  "hang_after": 3,           // stop after this many stdout lines and wait for a signal
//!  "ignore_sigterm": false,   // survive SIGTERM (only SIGKILL ends it)
//!  "spawn_grandchild": false, // start a sleeping grandchild first (orphan tests)
//!  "record": "/tmp/x.json",   // write argv, pids, cwd and environment here
//!  "exit_code": null,         // override the recorded exit code
//!  "then": ["tests/fixtures/cli/claude/text.jsonl"]}
//!                             // what the 2nd, 3rd… start replays (the last
//!                             // one again after that)
//! ```
//!
//! With `then`, each start counts itself in `fake-cli.starts` beside the
//! record (else the configuration), and `record` gets the start's number appended (`x.json`,
//! `x.json.2`, …) so every start's arguments stay readable.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{Stream, meta_path, read_lines, read_meta};
use anyhow::Context as _;
use serde::Deserialize;
use serde_json::json;

/// The first argument that makes the program the sleeping grandchild.
const GRANDCHILD_ARG: &str = "--moat-fake-cli-grandchild";

/// How long a grandchild or a hung replay waits for its signal.
const WAIT_FOR_SIGNAL: Duration = Duration::from_secs(600);

/// The replay's configuration.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    fixture: PathBuf,
    #[serde(default = "real_time")]
    speed: f64,
    #[serde(default)]
    hang_after: Option<usize>,
    #[serde(default)]
    ignore_sigterm: bool,
    #[serde(default)]
    spawn_grandchild: bool,
    #[serde(default)]
    record: Option<PathBuf>,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    then: Vec<PathBuf>,
}

fn real_time() -> f64 {
    1.0
}

/// A process as a program reports it: its pid as it sees it, and the PID
/// namespace it sees it in (the inode of `/proc/self/ns/pid`). moat starts
/// contained programs in PID namespaces of their own, where pids mean
/// nothing outside; written `PID@NAMESPACE` (or `PID` alone: ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedPid {
    pub pid: u32,
    pub namespace: Option<u64>,
}

impl ReportedPid {
    /// The calling process, as it would report itself.
    pub fn own(pid: u32) -> Self {
        Self {
            pid,
            namespace: pid_namespace("self"),
        }
    }

    /// Whether the process is gone (or a zombie nobody has reaped yet).
    pub fn gone(&self) -> bool {
        self.host_pid().is_none()
    }

    /// Its pid in our PID namespace, while it lives.
    pub fn host_pid(&self) -> Option<u32> {
        match self.namespace {
            Some(namespace) if Some(namespace) != pid_namespace("self") => {
                find_in_namespace(self.pid, namespace)
            }
            _ => (!process_gone(self.pid)).then_some(self.pid),
        }
    }
}

impl std::str::FromStr for ReportedPid {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text.split_once('@') {
            Some((pid, namespace)) => Self {
                pid: pid.parse()?,
                namespace: Some(namespace.parse()?),
            },
            None => Self {
                pid: text.parse()?,
                namespace: None,
            },
        })
    }
}

/// The PID namespace of `/proc/<process>`, as its inode.
fn pid_namespace(process: &str) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{process}/ns/pid")).ok()?;
    let link = link.to_string_lossy();
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Our pid of the live process of PID namespace `namespace` whose pid
/// there is `pid`.
fn find_in_namespace(pid: u32, namespace: u64) -> Option<u32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.flatten().find_map(|entry| {
        let host: u32 = entry.file_name().to_str()?.parse().ok()?;
        if pid_namespace(&host.to_string()) != Some(namespace) {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{host}/status")).ok()?;
        let local = status
            .lines()
            .find_map(|line| line.strip_prefix("NSpid:"))
            .and_then(|pids| pids.split_whitespace().last())
            .and_then(|pid| pid.parse::<u32>().ok());
        (local == Some(pid) && !process_gone(host)).then_some(host)
    })
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet): how
/// tests check that the fake and the grandchild it may start (both in its
/// record) were not left behind.
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                == Some("Z")
        }
    }
}

/// This start's number (from 1), counted in the file `counter`.
fn count_start(counter: &Path) -> anyhow::Result<usize> {
    let before: usize = std::fs::read_to_string(counter)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0);
    std::fs::write(counter, (before + 1).to_string())
        .with_context(|| format!("write {}", counter.display()))?;
    Ok(before + 1)
}

/// Runs the fake CLI with the process's arguments: replays, then exits the
/// process with the recorded code.
pub fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(GRANDCHILD_ARG) {
        thread::sleep(WAIT_FOR_SIGNAL);
        return Ok(());
    }
    let config_path = match std::env::var_os("MOAT_FAKE_CLI_CONFIG") {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .context("find the fake CLI's own path")?
            .with_file_name("fake-cli.json"),
    };
    let config: Config = serde_json::from_str(
        &std::fs::read_to_string(&config_path)
            .with_context(|| format!("read {}", config_path.display()))?,
    )
    .with_context(|| format!("parse {}", config_path.display()))?;
    // Relative fixture paths are relative to the configuration file.
    let dir = config_path.parent().unwrap_or(Path::new("."));
    let start = if config.then.is_empty() {
        1
    } else {
        // Beside the record when there is one: the one place a contained
        // fake may write.
        let counter_dir = config
            .record
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(dir);
        count_start(&counter_dir.join("fake-cli.starts"))?
    };
    let fixture = match start {
        1 => dir.join(&config.fixture),
        n => dir.join(&config.then[(n - 2).min(config.then.len() - 1)]),
    };
    let record = config.record.as_ref().map(|record| match start {
        1 => record.clone(),
        n => PathBuf::from(format!("{}.{n}", record.display())),
    });

    if config.ignore_sigterm {
        // SAFETY: setting a signal to SIG_IGN installs no handler code; it
        // only changes the disposition, at start-up, before any thread.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    let grandchild = if config.spawn_grandchild {
        let exe = std::env::current_exe().context("find the fake CLI's own path")?;
        let child = Command::new(exe)
            .arg(GRANDCHILD_ARG)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start the grandchild")?;
        Some(child.id())
    } else {
        None
    };
    if let Some(record) = &record {
        let env: serde_json::Map<String, serde_json::Value> = std::env::vars()
            .map(|(name, value)| (name, json!(value)))
            .collect();
        let cwd = std::env::current_dir().ok();
        let report = json!({
            "args": &args[1..], "pid": std::process::id(), "grandchild_pid": grandchild,
            "pid_namespace": pid_namespace("self"), "cwd": cwd, "env": env,
        });
        std::fs::write(record, report.to_string())
            .with_context(|| format!("write {}", record.display()))?;
    }

    let lines = read_lines(&fixture)?;
    let exit_code = match config.exit_code.filter(|_| start == 1) {
        Some(code) => code,
        None => read_meta(&meta_path(&fixture))?.exit_code.unwrap_or(1),
    };
    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let mut stdout_lines = 0;
    for line in &lines {
        let Some((stream, text)) = line.output() else {
            continue;
        };
        if config.speed > 0.0 {
            let due = Duration::from_secs_f64(line.ms as f64 / 1000.0 / config.speed);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                thread::sleep(wait);
            }
        }
        let out: &mut dyn Write = match stream {
            Stream::Stdout => &mut stdout,
            Stream::Stderr => &mut stderr,
        };
        // A reader that went away ends the replay, as it would end a CLI.
        let written = out
            .write_all(text.as_bytes())
            .and_then(|()| {
                if line.partial {
                    Ok(())
                } else {
                    out.write_all(b"\n")
                }
            })
            .and_then(|()| out.flush());
        if written.is_err() {
            std::process::exit(141);
        }
        if stream == Stream::Stdout {
            stdout_lines += 1;
            if config.hang_after == Some(stdout_lines) {
                // Wait mid-stream, as a CLI does while a tool runs or the
                // model thinks, until a signal ends the process.
                loop {
                    thread::sleep(WAIT_FOR_SIGNAL);
                }
            }
        }
    }
    std::process::exit(exit_code);
}
