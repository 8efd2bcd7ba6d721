// Driving `moat acp` as an editor does, with the official ACP TypeScript
// SDK (@agentclientprotocol/sdk) as the client: every message moat sends is
// checked with the SDK's own schemas (its zod validators) as it arrives.
// Shared by editor.test.mjs (the suite) and prompt.mjs (one prompt, for
// tests that set up an agent's world in Rust: tests/all/acp_adapter.rs).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import { client, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

// The SDK's validators, by file: its package exports them to itself only.
const validate = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url)
);

const MOAT = process.env.MOAT_BIN;

/** What moat may send, by method (requests and notifications to the client). */
const INCOMING = {
  "session/update": validate.zSessionNotification,
  "session/request_permission": validate.zRequestPermissionRequest,
};
/** What moat answers, by the method of the client's request. */
const ANSWERS = {
  initialize: validate.zInitializeResponse,
  "session/new": validate.zNewSessionResponse,
  "session/prompt": validate.zPromptResponse,
};

/**
 * Starts `moat acp ...args` and connects the SDK to it through a stream
 * that checks every message moat sends. Returns the child, the stream and
 * the problems found so far.
 */
export function startAgent(args) {
  const child = spawn(MOAT, ["acp", ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const raw = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const asked = new Map();
  const problems = [];
  const checked = new TransformStream({
    transform(message, controller) {
      const schema =
        "method" in message ? INCOMING[message.method] : ANSWERS[asked.get(message.id)];
      if ("method" in message && !schema) {
        problems.push(`moat sent an unexpected method: ${message.method}`);
      }
      if (schema && "error" in message === false) {
        const result = schema.safeParse("method" in message ? message.params : message.result);
        if (!result.success) {
          problems.push(`${JSON.stringify(message)}: ${result.error.message}`);
        }
      }
      controller.enqueue(message);
    },
  });
  const outgoing = raw.writable.getWriter();
  const writable = new WritableStream({
    async write(message) {
      if ("method" in message && "id" in message) asked.set(message.id, message.method);
      await outgoing.write(message);
    },
    async close() {
      await outgoing.close();
    },
  });
  return { child, stream: { readable: raw.readable.pipeThrough(checked), writable }, problems };
}

/** Runs `op` with a connected, initialized client; checks what moat sent. */
export async function withAgent(args, op, { onPermission } = {}) {
  const agent = startAgent(args);
  const app = client({ name: "moat-acp-test" });
  if (onPermission) {
    app.onRequest(methods.client.session.requestPermission, ({ params }) => onPermission(params));
  }
  try {
    return await app.connectWith(agent.stream, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "moat-acp-test", version: "1.0.0" },
      });
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.agentCapabilities.loadSession, false);
      return await op(ctx, init);
    });
  } finally {
    agent.child.stdin.end();
    await new Promise((done) => (agent.child.exitCode !== null ? done() : agent.child.on("exit", done)));
    assert.deepEqual(agent.problems, [], "every message moat sent passes the SDK's schemas");
  }
}

/** Reads one turn's updates to its stop: the text, the updates, the answer. */
export async function turn(session, prompt, { onUpdate } = {}) {
  const answer = session.prompt(prompt);
  let text = "";
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") break;
    updates.push(message.update);
    if (message.update.sessionUpdate === "agent_message_chunk") {
      text += message.update.content.text;
    }
    if (onUpdate) await onUpdate(message.update);
  }
  return { text, updates, response: await answer };
}
