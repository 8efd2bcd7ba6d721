//! The fuzz targets: every parser of input moat does not control, each fed
//! the bytes it would be fed, with seeds from the tests' fixtures and the
//! docs' examples. A target passes an input when it returns, whatever it
//! returns (a refusal is the right answer to garbage); it fails when it
//! panics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_cli_support::{Exit, Translator};
use moat_engine::{AdapterEvent, AdapterEventKind, DoneInfo, DoneStatus, ErrorInfo, ToolStatus};
use moat_guest::sse::SseParser;
use moat_llm_support::Translate;

/// One parser under test.
pub struct Target {
    /// Its name, as `--target` takes it.
    pub name: &'static str,
    /// What it parses.
    pub what: &'static str,
    /// Its seed inputs.
    pub seeds: fn(&Path) -> Vec<Vec<u8>>,
    /// Feeds it one input (`scratch`: a directory of its own for file
    /// inputs).
    pub run: fn(&[u8], &Path),
}

/// Every target.
pub const ALL: &[Target] = &[
    Target {
        name: "guest-events",
        what: "events a guest component emits, validated by the engine",
        seeds: json_seeds,
        run: guest_events,
    },
    Target {
        name: "stored-events",
        what: "events read back from the store or the cluster",
        seeds: json_seeds,
        run: stored_events,
    },
    Target {
        name: "protocol",
        what: "moat serve's request lines",
        seeds: protocol_seeds,
        run: protocol,
    },
    Target {
        name: "workflow",
        what: "workflow files (TOML and JSON)",
        seeds: workflow_seeds,
        run: workflow,
    },
    Target {
        name: "policy",
        what: "policy files",
        seeds: policy_seeds,
        run: policy,
    },
    Target {
        name: "manifest",
        what: "installed adapters' manifests",
        seeds: manifest_seeds,
        run: manifest,
    },
    Target {
        name: "mcp-config",
        what: "--mcp-config files",
        seeds: mcp_config_seeds,
        run: mcp_config,
    },
    Target {
        name: "sse",
        what: "server-sent events through the OpenAI and Anthropic translators",
        seeds: sse_seeds,
        run: sse,
    },
    Target {
        name: "claude-code",
        what: "Claude Code's stream-json lines",
        seeds: |repo| cli_seeds(repo, "claude"),
        run: claude_code,
    },
    Target {
        name: "codex",
        what: "Codex's JSON lines",
        seeds: |repo| cli_seeds(repo, "codex"),
        run: codex,
    },
    Target {
        name: "gemini",
        what: "Gemini CLI's stream-json lines",
        seeds: |repo| cli_seeds(repo, "gemini"),
        run: gemini,
    },
    Target {
        name: "mcp",
        what: "MCP servers' JSON-RPC replies",
        seeds: mcp_seeds,
        run: mcp,
    },
    Target {
        name: "cluster",
        what: "the cluster's job and record messages",
        seeds: cluster_seeds,
        run: cluster,
    },
    Target {
        name: "usage",
        what: "model answers' bytes read by the usage meter",
        seeds: usage_seeds,
        run: usage,
    },
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file under `dir` whose name ends in one of `extensions`.
fn files(dir: &Path, extensions: &[&str]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            found.extend(files(&path, extensions));
        } else if extensions
            .iter()
            .any(|ext| path.to_string_lossy().ends_with(ext))
            && let Ok(bytes) = std::fs::read(&path)
        {
            found.push(bytes);
        }
    }
    found
}

fn lines_of(files: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    files
        .iter()
        .flat_map(|file| file.split(|b| *b == b'\n').map(<[u8]>::to_vec))
        .filter(|line| !line.is_empty())
        .collect()
}

fn json_seeds(repo: &Path) -> Vec<Vec<u8>> {
    let mut seeds = lines_of(files(&repo.join("tests/fixtures/cli"), &[".jsonl"]));
    seeds.extend(
        [
            r#"{"type":"text","content":"hi","agent":"echo","timestamp":1,"sessionId":"s"}"#,
            r#"{"type":"done","payload":{"status":"success","usage":{"toolUses":0}}}"#,
            r#"{"path":"/tmp","recursive":true,"n":[1,2.5,-3e10]}"#,
            r#""a string""#,
            "[]",
        ]
        .map(|s| s.as_bytes().to_vec()),
    );
    seeds
}

/// The input cut in two at its first NUL (or its middle): two strings.
fn halves(bytes: &[u8]) -> (String, String) {
    let at = bytes
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(bytes.len() / 2);
    (
        text(&bytes[..at]),
        text(&bytes[(at + 1).min(bytes.len())..]),
    )
}

fn guest_events(bytes: &[u8], _: &Path) {
    let Some((&which, rest)) = bytes.split_first() else {
        return;
    };
    let (a, b) = halves(rest);
    let raw = text(rest);
    let kind = match which % 10 {
        0 => AdapterEventKind::Init {
            model: Some(a),
            cwd: Some(b),
            tools: raw.split(',').map(str::to_owned).collect(),
            capabilities: Some(raw.clone()),
        },
        1 => AdapterEventKind::Text(raw),
        2 => AdapterEventKind::TextDelta(raw),
        3 => AdapterEventKind::Thinking(raw),
        4 => AdapterEventKind::ToolUse {
            tool_name: a,
            tool_use_id: b,
            input: raw,
            description: None,
        },
        5 => AdapterEventKind::ToolResult {
            tool_use_id: a,
            tool_name: b,
            status: ToolStatus::Success,
            output: raw,
            duration_ms: Some(u64::from(which) << 40),
        },
        6 => AdapterEventKind::Error(ErrorInfo {
            code: Some(a),
            message: b,
            recoverable: which % 2 == 0,
        }),
        7 => AdapterEventKind::PermissionRequest {
            tool_name: a,
            tool_use_id: b,
            input: raw,
            reason: None,
        },
        8 => AdapterEventKind::Done(DoneInfo {
            status: DoneStatus::Success,
            result: Some(a),
            resume_token: Some(b),
            usage: serde_json::from_slice(rest).unwrap_or_default(),
            duration_ms: None,
            metadata: Some(raw),
        }),
        _ => AdapterEventKind::Extension {
            name: a,
            payload: b,
        },
    };
    let _ = moat_engine::validate_event(AdapterEvent::new(kind), 1024 * 1024, || Duration::ZERO);
}

fn stored_events(bytes: &[u8], _: &Path) {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        let _ = moat_engine::parse_event(&value);
    }
}

fn protocol_seeds(_: &Path) -> Vec<Vec<u8>> {
    [
        r#"{"id":1,"op":"run","adapter":"echo","prompt":"hi","options":{"cwd":"/tmp","maxTurns":3},"grants":{"net":["api.openai.com"],"read":["/tmp"]},"limits":{"timeoutMs":1000,"maxMemoryBytes":1048576},"workspace":{"mode":"worktree","base":"HEAD"}}"#,
        r#"{"id":"a","op":"subscribe","runs":["r_01m8g0w4k0ezysmbp41et3y81p"],"fromSeq":4}"#,
        r#"{"id":2,"op":"await","runs":["r_01m8"]}"#,
        r#"{"id":3,"op":"list","status":["running"],"limit":10,"parent":"r_1"}"#,
        r#"{"id":4,"op":"diff","run":"r_1","stat":true}"#,
        r#"{"id":5,"op":"cancel","run":"r_1"}"#,
        r#"{"id":6,"op":"unsubscribe","subscriptionId":"s_1"}"#,
        r#"{"id":7,"op":"inspect","adapter":"echo"}"#,
        r#"{"id":8,"op":"shutdown"}"#,
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

fn protocol(bytes: &[u8], _: &Path) {
    let _ = moat_serve::protocol::parse(&text(bytes));
}

fn workflow_seeds(repo: &Path) -> Vec<Vec<u8>> {
    let mut seeds = files(&repo.join("examples/workflows"), &[".toml"]);
    seeds.push(
        br#"name = "w"
workspace = "worktree"
[[task]]
id = "a"
adapter = "echo"
prompt = "hi {{inputs.b}}"
inputs = ["brief.md"]
retries = 2
backoff = "1s"
grants = { net = ["example.com:443"], read = ["."] }
[task.loop]
max_iterations = 3
until = { command = "true", grants = { write = ["."] } }
[[hook]]
on = "post-task"
command = ["sh", "-c", "exit 0"]
unsandboxed = true
"#
        .to_vec(),
    );
    seeds
}

fn workflow(bytes: &[u8], scratch: &Path) {
    let json = bytes.first().is_some_and(|b| *b == b'{');
    let path = scratch.join(if json { "flow.json" } else { "flow.toml" });
    if std::fs::write(&path, bytes).is_ok() {
        let _ = moat_workflow::load(&path);
    }
}

fn policy_seeds(_: &Path) -> Vec<Vec<u8>> {
    vec![
        br#"allow-net = ["api.openai.com", "localhost:11434"]
allow-read = ["."]
allow-env = ["HOME"]
allow-run = ["git"]
secret = ["OPENAI_API_KEY@api.openai.com"]
grant-declared = true
[adapters.claude-code]
allow-run = ["claude"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
"#
        .to_vec(),
    ]
}

fn policy(bytes: &[u8], scratch: &Path) {
    let _ = moat_launch::Policy::parse(&text(bytes), &scratch.join("policy.toml"));
}

fn manifest_seeds(_: &Path) -> Vec<Vec<u8>> {
    vec![
        br#"name = "a"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
source = "https://example.com/a.wasm"
installed = "2026-11-27T00:00:00Z"
[grants]
net = ["example.com"]
"#
        .to_vec(),
    ]
}

fn manifest(bytes: &[u8], scratch: &Path) {
    let dir = scratch.join("installed");
    let entry = dir.join("a");
    if std::fs::create_dir_all(&entry).is_ok()
        && std::fs::write(entry.join("adapter.toml"), bytes).is_ok()
    {
        let catalog = moat_installed::Catalog::new(&dir);
        let _ = catalog.get("a");
        let _ = catalog.list();
    }
}

fn mcp_config_seeds(_: &Path) -> Vec<Vec<u8>> {
    vec![
        br#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/data"], "env": {"A": "1"}}, "docs": {"url": "https://mcp.example.com/mcp", "headers": {"x": "y"}}}}"#.to_vec(),
    ]
}

fn mcp_config(bytes: &[u8], _: &Path) {
    let _ = moat_engine::McpServers::from_json(&text(bytes));
}

fn sse_seeds(repo: &Path) -> Vec<Vec<u8>> {
    let mut seeds = files(&repo.join("adapters/openai/fixtures"), &[".sse"]);
    seeds.extend(files(&repo.join("adapters/anthropic/fixtures"), &[".sse"]));
    seeds
}

/// The body fed to `translator` through the SDK's SSE parser in chunks of
/// a size the input's first byte chooses.
fn through_sse(mut translator: impl Translate, bytes: &[u8]) {
    let Some((&size, body)) = bytes.split_first() else {
        return;
    };
    let mut parser = SseParser::new();
    for chunk in body.chunks(usize::from(size).max(1)) {
        for item in parser.feed(chunk).into_iter().flatten() {
            let _ = translator.on_event(&item);
        }
    }
    if let Some(last) = parser.finish() {
        let _ = translator.on_event(&last);
    }
    let _ = translator.end_of_body();
}

fn sse(bytes: &[u8], _: &Path) {
    through_sse(moat_adapter_openai::stream::Translator::default(), bytes);
    through_sse(moat_adapter_anthropic::stream::Translator::default(), bytes);
}

fn cli_seeds(repo: &Path, cli: &str) -> Vec<Vec<u8>> {
    // Each recorded run's stdout, its lines as the CLI printed them.
    files(&repo.join("tests/fixtures/cli").join(cli), &[".jsonl"])
        .iter()
        .map(|file| {
            let mut out = Vec::new();
            for line in file.split(|b| *b == b'\n') {
                if let Ok(entry) = serde_json::from_slice::<serde_json::Value>(line)
                    && let Some(stdout) = entry["stdout"].as_str()
                {
                    out.extend_from_slice(stdout.as_bytes());
                    out.push(b'\n');
                }
            }
            out
        })
        .collect()
}

/// The input's lines through `translator`, then the CLI's end.
fn through_cli(mut translator: impl Translator, bytes: &[u8]) {
    for line in text(bytes).lines() {
        let _ = translator.line(line);
    }
    let _ = translator.finish(Exit::code(1), "stderr: the CLI's last words");
    let _ = translator.interrupted();
}

fn claude_code(bytes: &[u8], _: &Path) {
    through_cli(
        moat_adapter_claude_code::translate::ClaudeTranslator::new(),
        bytes,
    );
}

fn codex(bytes: &[u8], _: &Path) {
    through_cli(
        moat_adapter_codex::translate::CodexTranslator::default(),
        bytes,
    );
}

fn gemini(bytes: &[u8], _: &Path) {
    through_cli(
        moat_adapter_gemini::translate::GeminiTranslator::default(),
        bytes,
    );
}

fn mcp_seeds(_: &Path) -> Vec<Vec<u8>> {
    [
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read","description":"Reads","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"},{"type":"text","text":"world"}],"isError":false}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

fn mcp(bytes: &[u8], _: &Path) {
    if let Some(reply) = moat_llm_support::mcp::reply_to(&text(bytes), 1) {
        let _ = moat_llm_support::mcp::listed_tools("server", &reply["result"]);
        let _ = moat_llm_support::mcp::call_outcome(&reply["result"]);
    }
}

fn cluster_seeds(_: &Path) -> Vec<Vec<u8>> {
    let job = moat_cluster::Job::new(
        moat_cluster::ComponentRef::Builtin {
            name: "echo".into(),
        },
        "echo",
        "hi",
    );
    let record = moat_cluster::ClusterRun::submitted(job.clone());
    vec![
        serde_json::to_vec(&job).unwrap_or_default(),
        record.to_bytes().to_vec(),
    ]
}

fn cluster(bytes: &[u8], _: &Path) {
    if let Ok(job) = moat_cluster::Job::from_bytes(bytes) {
        let _ = serde_json::to_vec(&job);
    }
    if let Ok(record) = moat_cluster::ClusterRun::from_bytes(bytes) {
        let _ = record.to_run_record();
    }
}

fn usage_seeds(_: &Path) -> Vec<Vec<u8>> {
    moat_meter::sample_answers()
        .into_iter()
        .map(|(_, _, body)| body.to_vec())
        .collect()
}

/// The input read as an answer of every vendor, as JSON and as an event
/// stream, whole and in chunks: it must return, and read the same in
/// every chunking.
fn usage(bytes: &[u8], _: &Path) {
    let size = 1 + usize::from(bytes.first().copied().unwrap_or_default() % 64);
    // One byte at a time costs a call a byte: only for short inputs.
    let sizes: &[usize] = if bytes.len() <= 4096 {
        &[size, 1]
    } else {
        &[size]
    };
    for vendor in moat_meter::Vendor::ALL {
        for content_type in [&b"application/json"[..], b"text/event-stream"] {
            let reader = || moat_meter::UsageReader::new(vendor, Some(content_type), None);
            let mut whole = reader();
            whole.feed(bytes);
            let reading = whole.reading();
            for size in sizes {
                let mut chunked = reader();
                for chunk in bytes.chunks(*size) {
                    chunked.feed(chunk);
                }
                assert_eq!(chunked.reading(), reading, "read in chunks of {size}");
            }
        }
    }
}
