//! A run's traffic for people: `moat show --net`'s table, `moat logs
//! --net`'s lines, and the line that says what its calls used, metered
//! and reported. The flag that would allow a refused request is named in
//! the CLI's words (`--allow-net`, `--allow-unmetered`).

use moat_runs::{RunTraffic, UsageCount};
use serde_json::Value;

use super::safe;

/// One row as one line: `12:00:01 curl[4711] POST
/// http://api.openai.com:80/v1/responses 200 …`.
pub fn line(row: &Value) -> String {
    let at = row["at"].as_u64().map(super::time).unwrap_or_default();
    format!("{at} {}", cells(row).join(" "))
}

/// The rows as a table, with what the run did past them.
pub fn table(traffic: &RunTraffic) -> String {
    if traffic.rows.is_empty() && traffic.overflow.is_none() {
        return "no requests or connections through moat\n".into();
    }
    let mut out = String::from("WHO               WHAT\n");
    for row in &traffic.rows {
        let mut cells = cells(row);
        let who = cells.remove(0);
        out.push_str(&format!("{who:<17} {}\n", cells.join(" ")));
    }
    if let Some(Value::Object(overflow)) = &traffic.overflow {
        out.push_str(&format!(
            "past the {} rows kept, counted per destination:\n",
            moat_contain::traffic::MAX_EXCHANGES
        ));
        for (destination, counts) in overflow {
            out.push_str(&format!(
                "  {} {} allowed, {} refused, {} sent, {} received\n",
                safe::text(destination),
                counts["allowed"],
                counts["refused"],
                bytes(counts["sent"].as_u64().unwrap_or(0)),
                bytes(counts["received"].as_u64().unwrap_or(0)),
            ));
        }
    }
    out
}

/// What a row says, cell by cell, `who` first: the program and its pid
/// (`curl[4711]`) when moat knows them, else `component` or `program`.
fn cells(row: &Value) -> Vec<String> {
    let text = |name: &str| safe::text(row[name].as_str().unwrap_or("")).into_owned();
    let who = match (row["program"].as_str(), row["pid"].as_u64()) {
        (Some(program), Some(pid)) => format!("{}[{pid}]", safe::text(program)),
        _ => text("who"),
    };
    let destination = format!("{}://{}:{}", text("scheme"), text("host"), row["port"]);
    let mut cells = vec![who];
    match row["kind"].as_str() {
        Some("tunnel") => cells.push(format!("CONNECT {destination}")),
        _ => cells.push(format!("{} {destination}{}", text("method"), text("path"))),
    }
    if let Some(secret) = row["secret"].as_str() {
        cells.push(format!("(secret {})", safe::text(secret)));
    }
    if let Some(reason) = row["refused"].as_str() {
        let flag = match (row["wouldAllow"].as_str(), row["unmetered"] == true) {
            (_, true) => " — allow with --allow-unmetered".to_owned(),
            (Some(rule), _) => format!(" — allow with --allow-net={}", safe::text(rule)),
            (None, _) => String::new(),
        };
        cells.push(format!("REFUSED: {}{flag}", safe::text(reason)));
        return cells;
    }
    if let Some(status) = row["status"].as_u64() {
        cells.push(status.to_string());
    }
    if let Some(error) = row["error"].as_str() {
        cells.push(format!("failed: {}", safe::text(error)));
    }
    cells.push(format!(
        "{} sent, {} received, {} ms",
        bytes(row["sent"].as_u64().unwrap_or(0)),
        bytes(row["received"].as_u64().unwrap_or(0)),
        row["ms"].as_u64().unwrap_or(0)
    ));
    if let Some(vendor) = row["vendor"].as_str() {
        let model = row["model"].as_str().map(safe::text).unwrap_or_default();
        let usage = match row.get("usage") {
            Some(usage) => format!(
                "{} in + {} out tokens",
                usage["inputTokens"], usage["outputTokens"]
            ),
            None => "usage unknown".into(),
        };
        cells.push(format!("[{vendor} {model} {usage}]"));
    }
    if let Some(rule) = row["allowedBy"].as_str() {
        cells.push(format!("(by {})", safe::text(rule)));
    }
    cells
}

/// What a run's calls used as moat's meter read them, beside what its
/// adapter reported; `None` when the meter read none.
pub fn spend_line(traffic: &RunTraffic) -> Option<String> {
    if traffic.metered.calls == 0 {
        return None;
    }
    let counted = |usage: &UsageCount| {
        let calls = match usage.calls {
            1 => "1 model call".to_owned(),
            n => format!("{n} model calls"),
        };
        let unknown = match usage.usage_unknown {
            0 => String::new(),
            n => format!(", {n} of unknown usage"),
        };
        format!("{} tokens in {calls}{unknown}", usage.tokens())
    };
    Some(format!(
        "{}, as moat read them; the adapter reported {}",
        counted(&traffic.metered),
        match traffic.reported.tokens() {
            0 if traffic.reported.calls == 0 => "nothing".to_owned(),
            tokens => format!("{tokens} tokens"),
        }
    ))
}

fn bytes(n: u64) -> String {
    bytesize::ByteSize(n).to_string()
}
