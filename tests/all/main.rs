//! moat's end-to-end tests: one test binary, one module per area (as
//! wasmtime's `tests/all`). Real components (`adapters/testing/` and the
//! built-ins) run through the real host; the `cli` modules run the real
//! `moat` binary. Shared helpers are in `moat-testkit` (tests/testkit).

mod acp;
mod acp_adapter;
mod anthropic;
mod architecture;
mod capabilities;
mod claude_code;
mod cli;
mod clients;
mod cluster;
mod codex;
mod containment;
mod contract_packages;
mod echo;
mod egress;
mod engine;
mod gemini;
mod launch;
mod limits;
mod llm_agent;
mod loading;
mod mcp_client;
mod metering;
mod misbehaving;
mod openai;
mod otel;
mod own_network;
mod parallel_runs;
mod processes;
mod program_limits;
mod protected;
mod real_clis;
mod results;
mod resume;
mod sdk_python;
mod sdk_typescript;
mod secrets;
mod serve;
mod ui;
mod workflow;
