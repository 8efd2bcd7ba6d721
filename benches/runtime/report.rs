//! The summary table: one row per figure, Wasm beside native.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::common::bench_dir;

/// One line of the table.
pub struct Row {
    pub figure: String,
    pub wasm: String,
    pub native: String,
    /// What the sandbox adds: a difference and a ratio.
    pub overhead: String,
    pub target: String,
    /// `None` when the figure could not be measured.
    pub met: Option<bool>,
}

impl Row {
    /// A row for a figure that did not produce numbers, saying why.
    pub fn not_measured(figure: &str, target: &str, why: &str) -> Self {
        Self {
            figure: figure.to_owned(),
            wasm: why.to_owned(),
            native: "—".into(),
            overhead: "—".into(),
            target: target.to_owned(),
            met: None,
        }
    }
}

/// The table, with the date, machine and any notes the figures left.
pub fn render(rows: &[Row], notes: &[String]) -> String {
    let mut out = String::new();
    let date = humantime::format_rfc3339_seconds(SystemTime::now());
    let _ = writeln!(out, "# moat runtime benchmark\n");
    let _ = writeln!(
        out,
        "- command: `cargo bench -p moat-benches --bench runtime`"
    );
    let _ = writeln!(out, "- date: {date}");
    let _ = writeln!(out, "- machine: {}\n", machine());
    let _ = writeln!(
        out,
        "| figure | wasm | native | ratio/overhead | target | met? |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for row in rows {
        let met = match row.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {met} |",
            row.figure, row.wasm, row.native, row.overhead, row.target
        );
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNotes:\n");
        for note in notes {
            let _ = writeln!(out, "- {note}");
        }
    }
    out
}

/// Writes the summary to `target/moat-bench/summary.md`.
pub fn save(markdown: &str) -> std::io::Result<PathBuf> {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("summary.md");
    std::fs::write(&path, markdown)?;
    Ok(path)
}

/// The CPU model and the number of cores the process may use, since every
/// figure depends on both.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!("{cpu}, {cores} cores, {}", std::env::consts::OS)
}

/// A duration given in nanoseconds, in the unit that reads best.
pub fn duration(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e4 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A count with thousands separators: 100,000.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// "+12.3 µs (×4.2)": what Wasm adds over native, and the ratio.
pub fn overhead(wasm_ns: f64, native_ns: f64) -> String {
    let diff = wasm_ns - native_ns;
    let sign = if diff < 0.0 { "−" } else { "+" };
    format!(
        "{sign}{} (×{:.1})",
        duration(diff.abs()),
        wasm_ns / native_ns
    )
}
