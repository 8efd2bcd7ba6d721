//! `moat-backend-stub`: serves one scenario on a loopback port until killed.
//!
//! Prints its base URL (`http://127.0.0.1:PORT`) as the first line of
//! stdout, so a script can start it on port 0 and read where it listens.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use moat_backend_stub::{Scenario, StubConfig, StubServer};

/// Loopback stand-in for the Anthropic, OpenAI Responses and Gemini APIs.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// What every model call gets: text, tool-use, thinking,
    /// permission-denial, tool-error, api-error, mid-turn-failure.
    #[arg(long)]
    scenario: Scenario,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Pause after each streamed event, in milliseconds.
    #[arg(long, default_value_t = 15)]
    event_delay_ms: u64,
    /// Append one JSON line per request received to this file.
    #[arg(long)]
    log: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let hook: Option<moat_backend_stub::RequestHook> = match &cli.log {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("open the log {}", path.display()))?;
            let file = Mutex::new(file);
            Some(Box::new(move |request| {
                if let Ok(mut file) = file.lock() {
                    // Losing a log line must not take the server down.
                    let _ = writeln!(file, "{}", request.to_json());
                }
            }))
        }
        None => None,
    };
    let config =
        StubConfig::new(cli.scenario).with_event_delay(Duration::from_millis(cli.event_delay_ms));
    let server = StubServer::start_with_hook(cli.listen.as_str(), config, hook)
        .with_context(|| format!("listen on {}", cli.listen))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", server.base_url())?;
    stdout.flush()?;
    loop {
        std::thread::park();
    }
}
