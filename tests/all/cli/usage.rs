//! The guard of a run's usage figures: every built-in adapter that
//! reports usage runs against its stand-in (the LLM APIs' recorded
//! streams, the agent CLIs' recordings), then the tokens and cost of its
//! own `done` must read the same in every place that shows them: `moat
//! ps`, `moat ps --output json`, `moat show` and `--json`, `-o json`,
//! `moat logs`, the protocol's `get`, both clients' `get`, and the UI's
//! runs page and run page (in Chromium). A place that reads another shape
//! of usage than the one runs store shows nothing, or zero, and fails
//! here.

use std::path::Path;
use std::process::{Command, Output};

use moat_engine::Usage;
use moat_testkit::llm_server::{LlmServer, Reply};
use serde_json::{Value, json};

use super::adapters::StandIn;
use super::common::{fed, moat_in, ok_in};

/// A run's figures as its own result gave them.
#[derive(Debug, Clone, PartialEq)]
struct Figures {
    input: u64,
    output: u64,
    /// Dollars, as the run's `done` says (priced when the backend gave
    /// none).
    cost: Option<f64>,
}

impl Figures {
    fn of(usage: &Usage) -> Self {
        let tokens = usage.tokens.expect("the run reported tokens");
        Figures {
            input: tokens.input.total,
            output: tokens.output.total,
            cost: usage.cost.map(|cost| cost.usd),
        }
    }

    /// Of a `usage` object anywhere in JSON.
    fn of_json(usage: &Value) -> Self {
        Self::of(&serde_json::from_value(usage.clone()).expect("a usage object"))
    }

    /// As the UI shows a cost: `$0.0037`, or `-`.
    fn cost_shown(&self) -> String {
        self.cost
            .map_or_else(|| "-".to_owned(), |usd| format!("${usd:.4}"))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Prices for the models the stand-ins name, so that every run has a
/// cost (the CLIs' own costs, where they report one, win).
fn price_table(dir: &Path) -> String {
    let price = json!({"inputPerMTok": 3.0, "outputPerMTok": 15.0});
    let models: serde_json::Map<String, Value> = [
        "gpt-4o-mini-2024-07-18",
        "claude-sonnet-4-5-20250929",
        "gemini-2.5-flash",
        "gpt-5-codex",
        "gpt-5",
        "m",
    ]
    .into_iter()
    .map(|model| (model.to_owned(), price.clone()))
    .collect();
    let path = dir.join("prices.json");
    std::fs::write(&path, json!({ "models": models }).to_string()).unwrap();
    path.display().to_string()
}

/// Runs every built-in that reports usage, in `store`: each one's id and
/// figures, from its own `-o json` result.
fn runs_with_usage(store: &Path) -> Vec<(String, String, Figures)> {
    let prices = price_table(store);
    let mut runs = Vec::new();
    let mut record = |adapter: &str, output: Output| {
        let result: Value = serde_json::from_str(&succeeded(&output)).unwrap();
        let id = result["runId"].as_str().expect("the result names its run");
        runs.push((
            adapter.to_owned(),
            id.to_owned(),
            Figures::of_json(&result["usage"]),
        ));
    };
    for (adapter, url_variable, key_variable, base) in [
        ("openai", "OPENAI_BASE_URL", "OPENAI_API_KEY", "/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", ""),
    ] {
        let fixture = moat_testkit::repo_root()
            .join("adapters")
            .join(adapter)
            .join("fixtures/text_usage.sse");
        let server = LlmServer::start(Reply::sse(&std::fs::read(fixture).unwrap()));
        let output = moat_in(store)
            .env(url_variable, format!("{}{base}", server.url()))
            .env(key_variable, "sk-moat-usage-test")
            .args(["run", adapter, "Say hello", "--model", "m"])
            .arg(format!("--allow-net={}", server.grant()))
            .args(["--price-table", &prices, "--output", "json"])
            .output()
            .unwrap();
        record(adapter, output);
    }
    // Each with the model its recording was made with: what a price is
    // looked up by when the CLI names none.
    for (cli, adapter, model) in [
        ("claude", "claude-code", "claude-sonnet-4-5-20250929"),
        ("codex", "codex", "gpt-5-codex"),
        ("gemini", "gemini", "gemini-2.5-flash"),
    ] {
        let stand_in = StandIn::new(cli, cli, "text", None, "exit 0");
        let output = moat_in(store)
            .args(["run", adapter, "Do it.", "--trust", "unrestricted"])
            .args(["--model", model])
            .args(stand_in.grant_flags())
            .args(["--extra", &stand_in.extra()])
            .args(["--price-table", &prices, "--output", "json"])
            .output()
            .unwrap();
        record(adapter, output);
    }
    runs
}

#[test]
fn every_place_that_shows_a_runs_usage_shows_the_runs_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let runs = runs_with_usage(store);
    assert_eq!(runs.len(), 5);
    for (adapter, _, figures) in &runs {
        assert!(
            figures.input > 0 && figures.output > 0,
            "{adapter}: {figures:?}"
        );
        assert!(figures.cost.is_some(), "{adapter}: priced or reported");
    }

    // moat ps: the TOKENS column, input and output together.
    let table = ok_in(store, &["ps", "--all", "--no-trunc"]);
    for (adapter, id, figures) in &runs {
        let row = table
            .lines()
            .find(|line| line.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("{adapter} not listed: {table}"));
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert!(
            columns.contains(&(figures.input + figures.output).to_string().as_str()),
            "{adapter}: {row}"
        );
    }
    // moat ps --output json: each record's done.
    let listed: Vec<Value> =
        serde_json::from_str(&ok_in(store, &["ps", "--all", "--output", "json"])).unwrap();
    for (adapter, id, figures) in &runs {
        let record = listed.iter().find(|r| r["id"] == id.as_str()).unwrap();
        assert_eq!(
            &Figures::of_json(&record["done"]["usage"]),
            figures,
            "{adapter}: ps json"
        );
    }

    for (adapter, id, figures) in &runs {
        // moat show: a usage line.
        let shown = ok_in(store, &["show", id]);
        let usage_line = shown
            .lines()
            .find(|line| line.starts_with("usage"))
            .unwrap_or_else(|| panic!("{adapter}: no usage line in {shown}"));
        assert!(
            usage_line.contains(&format!(
                "{} in / {} out tokens",
                figures.input, figures.output
            )),
            "{adapter}: {usage_line}"
        );
        assert!(
            usage_line.contains(&figures.cost_shown()),
            "{adapter}: {usage_line}"
        );
        // moat show --json: the record's done and the result.
        let shown: Value = serde_json::from_str(&ok_in(store, &["show", id, "--json"])).unwrap();
        assert_eq!(
            &Figures::of_json(&shown["done"]["usage"]),
            figures,
            "{adapter}: show done"
        );
        assert_eq!(
            &Figures::of_json(&shown["result"]["usage"]),
            figures,
            "{adapter}: show result"
        );
        // moat logs: the stored done.
        let logs = ok_in(store, &["logs", id, "--output", "ndjson"]);
        let done: Value = serde_json::from_str(logs.lines().last().unwrap()).unwrap();
        assert_eq!(done["type"], "done");
        assert_eq!(
            &Figures::of_json(&done["payload"]["usage"]),
            figures,
            "{adapter}: logs"
        );
    }

    // The protocol's get, through the real `moat serve`.
    let requests: String = runs
        .iter()
        .enumerate()
        .map(|(n, (_, id, _))| format!("{}\n", json!({"id": n + 1, "op": "get", "run": id})))
        .collect();
    let served = serve(store, &requests);
    for (n, (adapter, _, figures)) in runs.iter().enumerate() {
        let answer = served
            .iter()
            .find(|a| a["id"] == n + 1)
            .unwrap_or_else(|| panic!("no answer to get {adapter}: {served:?}"));
        assert_eq!(
            &Figures::of_json(&answer["result"]["done"]["usage"]),
            figures,
            "{adapter}: protocol get {answer}"
        );
    }

    clients_agree(store, &runs);
    ui_agrees(store, &runs);
}

/// `requests` (JSON lines) answered by `moat serve --stdio` on `store`.
fn serve(store: &Path, requests: &str) -> Vec<Value> {
    let output = fed(
        moat_in(store).args(["serve", "--stdio"]),
        requests.as_bytes(),
    );
    text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Whether a client's tools are installed (`scripts/test` installs them);
/// required under `MOAT_REQUIRE_CLIENTS`.
fn installed(name: &str, present: bool, install: &str) -> bool {
    if !present {
        assert!(
            std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() != Ok("1"),
            "{name} is not installed: {install}"
        );
        eprintln!("skipped {name}: not installed ({install})");
    }
    present
}

/// The TypeScript and Python clients' `get` of each run: the same figures.
fn clients_agree(store: &Path, runs: &[(String, String, Figures)]) {
    let root = moat_testkit::repo_root();
    let ids: Vec<&str> = runs.iter().map(|(_, id, _)| id.as_str()).collect();
    let ids = serde_json::to_string(&ids).unwrap();
    let mut answers = Vec::new();
    let typescript = root.join("clients/typescript/dist/index.js");
    if installed(
        "the TypeScript client",
        root.join("clients/typescript/node_modules").exists(),
        "npm ci --prefix clients/typescript",
    ) {
        let script = format!(
            "import {{ MoatClient }} from {entry};\n\
             const client = await MoatClient.spawn({{ bin: process.env.MOAT_BIN }});\n\
             const usage = {{}};\n\
             for (const id of {ids}) usage[id] = (await client.get(id)).done.usage;\n\
             await client.close();\n\
             console.log(JSON.stringify(usage));\n",
            entry = json!(typescript.display().to_string()),
        );
        answers.push((
            "TypeScript",
            client(
                store,
                Command::new("node").args(["--input-type=module", "-e", &script]),
            ),
        ));
    }
    let python = std::env::var("MOAT_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_python = Command::new(&python)
        .args(["-c", "import moat_client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if installed(
        "the Python client",
        has_python,
        "python3 -m pip install -e clients/python",
    ) {
        let script = format!(
            "import asyncio, json, os\n\
             from moat_client import MoatClient\n\
             async def main():\n\
             \x20   async with await MoatClient.spawn(bin=os.environ['MOAT_BIN']) as client:\n\
             \x20       print(json.dumps({{i: (await client.get(i))['done']['usage'] for i in {ids}}}))\n\
             asyncio.run(main())\n"
        );
        answers.push((
            "Python",
            client(store, Command::new(&python).args(["-c", &script])),
        ));
    }
    for (name, usage) in answers {
        for (adapter, id, figures) in runs {
            assert_eq!(
                &Figures::of_json(&usage[id.as_str()]),
                figures,
                "{name} client, {adapter}"
            );
        }
    }
}

/// What a client's script printed (one JSON line), run against `store`.
fn client(store: &Path, command: &mut Command) -> Value {
    let output = command
        .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_STORE", store.join("moat.db"))
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env_remove("MOAT_LOG")
        .output()
        .unwrap();
    serde_json::from_str(succeeded(&output).trim()).unwrap()
}

/// The UI's runs page and each run's page, in Chromium: the same figures.
fn ui_agrees(store: &Path, runs: &[(String, String, Figures)]) {
    let web = moat_testkit::repo_root().join("host/ui/web");
    let chromium =
        std::env::var("MOAT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if !installed(
        "the browser suite",
        web.join("node_modules/playwright-core").exists() && Path::new(&chromium).exists(),
        "npm ci --prefix host/ui/web; apt-get install chromium",
    ) {
        return;
    }
    let ids: Vec<&str> = runs.iter().map(|(_, id, _)| id.as_str()).collect();
    let shown = client(
        store,
        Command::new("node")
            .arg("test/usage.mjs")
            .current_dir(&web)
            .env("MOAT_UI_RUNS", ids.join(","))
            .env("CHROMIUM", &chromium),
    );
    for (adapter, id, figures) in runs {
        let page = &shown[id.as_str()];
        let tokens = format!("{} → {}", figures.input, figures.output);
        assert_eq!(
            page["rowTokens"],
            tokens.as_str(),
            "{adapter}: runs page {page}"
        );
        assert_eq!(
            page["rowCost"],
            figures.cost_shown().as_str(),
            "{adapter}: runs page {page}"
        );
        let done = page["done"].as_str().unwrap();
        assert!(
            done.contains(&format!("tokens {tokens}"))
                && done.contains(&format!("cost {}", figures.cost_shown())),
            "{adapter}: run page: {done}"
        );
    }
}
