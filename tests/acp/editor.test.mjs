// `moat acp` driven as an editor drives it: the official ACP TypeScript SDK
// (@agentclientprotocol/sdk) as the client, the real `moat` binary as the
// agent on stdio. Every message moat sends is checked with the SDK's own
// schemas (its zod validators) as it arrives. Run by tests/all/acp.rs,
// which sets MOAT_BIN, the store, the test components and, for the openai
// part, a loopback model server.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

import { client, methods, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

import { startAgent, turn, withAgent } from "./client.mjs";

const MOAT = process.env.MOAT_BIN;
const CWD = fileURLToPath(new URL(".", import.meta.url));

/** The run's record, as `moat show --json` prints it. */
function show(run) {
  return JSON.parse(execFileSync(MOAT, ["show", run, "--json"], { encoding: "utf8" }));
}

test("two prompts in one session: the second sees the first; each a recorded run", async () => {
  await withAgent(["echo"], async (ctx) => {
    const session = await ctx.buildSession(CWD).start();
    const first = await turn(session, "first words");
    assert.equal(first.text, "first words");
    assert.equal(first.response.stopReason, "end_turn");
    const second = await turn(session, "second words");
    assert.equal(second.response.stopReason, "end_turn");
    assert.match(second.text, /User: first words\nAssistant: first words/);
    assert.match(second.text, /User: second words$/);
    const runs = [first.response._meta.moatRun, second.response._meta.moatRun];
    assert.notEqual(runs[0], runs[1]);
    for (const run of runs) assert.equal(show(run).status, "completed");
  });
});

test("a cancel mid-prompt ends the turn cancelled and the run cancelled", async () => {
  await withAgent([process.env.MOAT_TEST_COOPERATIVE], async (ctx) => {
    const session = await ctx.buildSession(CWD).start();
    let cancelled = false;
    const { response } = await turn(session, "go", {
      onUpdate: async () => {
        if (!cancelled) {
          cancelled = true;
          await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
        }
      },
    });
    assert.equal(response.stopReason, "cancelled");
    const record = show(response._meta.moatRun);
    assert.equal(record.status, "failed");
    assert.equal(record.reason, "cancelled");
    assert.equal(record.options.resume, null);

    // The session goes on from the resume token the cancelled run left.
    cancelled = false;
    const next = await turn(session, "go on", {
      onUpdate: async () => {
        if (!cancelled) {
          cancelled = true;
          await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
        }
      },
    });
    assert.equal(next.response.stopReason, "cancelled");
    assert.equal(show(next.response._meta.moatRun).options.resume, "coop-resume-token");
  });
});

test("an editor that goes away mid-prompt leaves no run running", async () => {
  const agent = startAgent([process.env.MOAT_TEST_COOPERATIVE]);
  const app = client({ name: "moat-acp-test" });
  const exited = new Promise((done) => agent.child.on("exit", done));
  await app
    .connectWith(agent.stream, async (ctx) => {
      await ctx.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION });
      const session = await ctx.buildSession(CWD).start();
      const answer = session.prompt("go");
      await session.nextUpdate();
      // The editor quits: its end of stdin closes.
      agent.child.stdin.end();
      await answer;
    })
    .catch(() => {});
  await exited;
  const record = show("@last");
  assert.equal(record.adapter, "cooperative");
  assert.equal(record.status, "failed");
  assert.equal(record.reason, "cancelled");
  assert.equal(record.done.status, "interrupted");
});

test("what moat cannot do is a JSON-RPC error saying so", async () => {
  await withAgent(["echo"], async (ctx) => {
    await assert.rejects(
      ctx.request(methods.agent.session.prompt, {
        sessionId: "nope",
        prompt: [{ type: "text", text: "hi" }],
      }),
      (error) => error.code === -32002 && /no session nope/.test(error.message),
    );
    await assert.rejects(
      ctx.request(methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] }),
      (error) => error.code === -32602 && /not an absolute path/.test(error.message),
    );
    await assert.rejects(
      ctx.request(methods.agent.session.load, { sessionId: "x", cwd: CWD, mcpServers: [] }),
      (error) => error.code === -32601,
    );
    const session = await ctx.buildSession(CWD).start();
    await assert.rejects(
      session.prompt([{ type: "image", data: "", mimeType: "image/png" }]),
      (error) => error.code === -32602 && /no image/.test(error.message),
    );
  });
});

test("a session outside the granted directories is refused, naming the flag", async () => {
  await withAgent(["echo", `--allow-read=${CWD}`], async (ctx) => {
    await assert.rejects(
      ctx.request(methods.agent.session.new, { cwd: "/", mcpServers: [] }),
      (error) => error.code === -32602 && /--allow-write=\//.test(error.message),
    );
    await ctx.buildSession(CWD).start();
  });
});

test(
  "openai: two prompts remembered, and a tool call asked of the editor and approved",
  { skip: !process.env.ACP_OPENAI_ARGS },
  async () => {
    const asked = [];
    const args = ["openai", ...JSON.parse(process.env.ACP_OPENAI_ARGS)];
    await withAgent(
      args,
      async (ctx) => {
        // The directory its grants name (--allow-write).
        const session = await ctx.buildSession(process.env.ACP_OPENAI_CWD).start();
        const first = await turn(session, "my name is Ada");
        assert.equal(first.text, "first answer");
        const second = await turn(session, "what is my name?");
        assert.equal(second.text, "second answer");
        const third = await turn(session, "use the echo tool");
        assert.equal(third.response.stopReason, "end_turn");
        assert.equal(third.text, "Let me check.finished", "the narration before the call, then the answer");
        const calls = third.updates.filter((u) => u.sessionUpdate === "tool_call");
        assert.equal(calls.length, 1);
        const results = third.updates.filter((u) => u.sessionUpdate === "tool_call_update");
        assert.equal(results.at(-1).status, "completed");
        const record = show(third.response._meta.moatRun);
        assert.equal(record.status, "completed");
        assert.equal(record.requests[0].answer.approved, true);
        assert.match(record.requests[0].answer.by, /moat-acp-test through moat acp/);
      },
      {
        onPermission: (params) => {
          asked.push(params);
          return { outcome: { outcome: "selected", optionId: "allow_once" } };
        },
      },
    );
    assert.equal(asked.length, 1);
    assert.equal(asked[0].toolCall.title, "mcp__stub__echo");
    assert.deepEqual(
      asked[0].options.map((o) => o.kind),
      ["allow_once", "allow_always", "reject_once"],
    );
  },
);

test(
  "round trip: moat acp acp runs an ACP agent in the sandbox, its questions reach the editor",
  { skip: !process.env.ACP_ROUNDTRIP_CWD },
  async () => {
    const work = process.env.ACP_ROUNDTRIP_CWD;
    const agentScript = fileURLToPath(new URL("./agent.mjs", import.meta.url));
    const args = [
      "acp",
      "--allow-run=node",
      `--allow-read=${CWD}`,
      `--allow-write=${work}`,
      "--ask",
      "--extra",
      JSON.stringify({ command: "node", args: [agentScript] }),
    ];
    const asked = [];
    await withAgent(
      args,
      async (ctx) => {
        const session = await ctx.buildSession(work).start();
        // The SDK agent asks to run a command: the acp adapter asks moat,
        // moat acp asks the editor, the editor allows, the agent is told.
        const first = await turn(session, "remember:ada permission");
        assert.equal(first.response.stopReason, "end_turn");
        assert.match(first.text, /Hello from the SDK agent\./);
        assert.match(first.text, /permission: yes\./);
        assert.match(first.text, /schema: ok/, "the agent found moat's messages valid");
        const thoughts = first.updates.filter((u) => u.sessionUpdate === "agent_thought_chunk");
        assert.ok(thoughts.length >= 1);
        // The next turn is a new run: the agent's session loaded again.
        const second = await turn(session, "recall");
        assert.equal(second.response.stopReason, "end_turn");
        assert.match(second.text, /recalled: ada\./);
        const record = show(second.response._meta.moatRun);
        assert.equal(record.status, "completed");
        assert.equal(record.adapter, "acp");
        assert.ok(record.options.resume, "the run resumed the agent's session");
      },
      {
        onPermission: (params) => {
          asked.push(params);
          return { outcome: { outcome: "selected", optionId: "allow_once" } };
        },
      },
    );
    assert.equal(asked.length, 1, "the editor was asked once");
  },
);
