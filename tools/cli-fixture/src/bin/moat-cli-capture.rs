//! `moat-cli-capture`: runs a command and records its output as a fixture.
//!
//! ```text
//! moat-cli-capture --out tests/fixtures/cli/claude/text.jsonl \
//!     --cli claude --cli-version 2.1.197 --scenario text \
//!     [--requests stub-log.jsonl] [--timeout-secs 120] -- claude -p hi …
//! ```
//!
//! Stdin is closed (`/dev/null`); the environment is inherited. Every
//! stdout and stderr line is written with the milliseconds since the start;
//! the metadata goes beside it (`text.meta.json`).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use moat_cli_fixture::{Line, Meta, Stream, meta_path};

/// Records a CLI run as a fixture.
#[derive(Parser)]
struct Cli {
    /// The fixture to write (`<scenario>.jsonl`).
    #[arg(long)]
    out: PathBuf,
    /// The CLI's short name, for the metadata.
    #[arg(long)]
    cli: String,
    /// The CLI's version, for the metadata.
    #[arg(long)]
    cli_version: String,
    /// The backend scenario, for the metadata.
    #[arg(long)]
    scenario: String,
    /// The backend stub's request log (JSON lines) to copy into the
    /// metadata once the run is over.
    #[arg(long)]
    requests: Option<PathBuf>,
    /// Kill the command after this long.
    #[arg(long, default_value_t = 180)]
    timeout_secs: u64,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// The longest line kept; a longer one is cut (fixtures stay readable).
const MAX_LINE: usize = 4 * 1024 * 1024;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (program, args) = cli.command.split_first().context("no command")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {program}"))?;
    let (sender, receiver) = mpsc::channel::<Line>();
    let readers = [
        (
            Stream::Stdout,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            Stream::Stderr,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ]
    .into_iter()
    .filter_map(|(stream, pipe)| Some((stream, pipe?)))
    .map(|(stream, pipe)| {
        let sender = sender.clone();
        thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                match reader.read_until(b'\n', &mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let ms = started.elapsed().as_millis() as u64;
                let partial = !buffer.ends_with(b"\n");
                let text = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
                let text = String::from_utf8_lossy(&text[..text.len().min(MAX_LINE)]);
                let text = text.strip_suffix('\r').unwrap_or(&text).to_owned();
                if sender.send(Line::new(ms, stream, text, partial)).is_err() {
                    return;
                }
            }
        })
    })
    .collect::<Vec<_>>();
    drop(sender);

    let deadline = started + Duration::from_secs(cli.timeout_secs);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            // The recording is still useful: it shows where the CLI hung.
            let _ = child.kill();
            break child.wait()?;
        }
        thread::sleep(Duration::from_millis(20));
    };
    for reader in readers {
        let _ = reader.join();
    }
    let mut lines: Vec<Line> = receiver.into_iter().collect();
    // Both readers stamp their lines; merge them in time order (stable, so
    // lines of one stream keep their order).
    lines.sort_by_key(|line| line.ms);

    let mut out = Vec::new();
    for line in &lines {
        serde_json::to_writer(&mut out, line)?;
        out.push(b'\n');
    }
    std::fs::File::create(&cli.out)
        .and_then(|mut file| file.write_all(&out))
        .with_context(|| format!("write {}", cli.out.display()))?;

    let requests = match &cli.requests {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("read {}", path.display()))?
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect(),
        None => Vec::new(),
    };
    let meta = Meta {
        cli: cli.cli,
        cli_version: cli.cli_version,
        scenario: cli.scenario,
        args: args.to_vec(),
        exit_code: status.code(),
        signal: status.signal(),
        duration_ms: started.elapsed().as_millis() as u64,
        requests,
    };
    let meta_file = meta_path(&cli.out);
    let mut text = serde_json::to_string_pretty(&meta)?;
    text.push('\n');
    std::fs::write(&meta_file, text).with_context(|| format!("write {}", meta_file.display()))?;
    if lines.iter().all(|line| line.stdout.is_none()) && status.code() == Some(127) {
        bail!("{program} was not found");
    }
    Ok(())
}
