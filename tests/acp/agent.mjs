// A deterministic ACP agent on stdio, written with the official ACP
// TypeScript SDK (@agentclientprotocol/sdk), for the `acp` adapter's tests
// (tests/all/acp_adapter.rs). What it does depends on words in the prompt:
//
//   always         a thought, then text in two chunks; last, "schema: ok" or
//                  the problems the SDK's own schemas found in what the
//                  client (moat) sent
//   tool           a read tool call, pending → in_progress → completed
//   plan           a plan
//   write:PATH     asks the client to write PATH (fs/write_text_file)
//   read:PATH      asks the client to read PATH (fs/read_text_file)
//   permission     asks permission for an execute call (allow_once /
//                  reject_once), then reports the call completed or failed
//   terminal       asks the client for a terminal
//   remember:WORD  keeps WORD in the session; "recall" answers the words kept
//   hang           waits until the prompt is cancelled
//   garbage        writes a line that is not JSON-RPC to stdout
//   refuse         ends the turn with stop reason refusal
//
// Sessions are kept as files in `<cwd>/.sdk-agent/` so a later process can
// load them (agentCapabilities.loadSession), replaying their history as
// session/update notifications as ACP says. ACP_AGENT_NO_LOAD=1 turns
// loading off.

import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import { agent, methods, ndJsonStream, RequestError, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const validate = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url)
);

/** What the client may send, by method: requests, notifications. */
const FROM_CLIENT = {
  initialize: validate.zInitializeRequest,
  "session/new": validate.zNewSessionRequest,
  "session/load": validate.zLoadSessionRequest,
  "session/prompt": validate.zPromptRequest,
  "session/cancel": validate.zCancelNotification,
};
/** What the client answers, by the method of the agent's request. */
const ANSWERS = {
  "fs/write_text_file": validate.zWriteTextFileResponse,
  "fs/read_text_file": validate.zReadTextFileResponse,
  "session/request_permission": validate.zRequestPermissionResponse,
};

const problems = [];
const asked = new Map();
const canLoad = process.env.ACP_AGENT_NO_LOAD !== "1";

/** The SDK's stream, every message of the client's checked on the way. */
function checkedStream() {
  const raw = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const checked = new TransformStream({
    transform(message, controller) {
      let schema;
      let value;
      if ("method" in message) {
        schema = FROM_CLIENT[message.method];
        value = message.params;
        if (!schema) problems.push(`unexpected method ${message.method}`);
      } else if ("error" in message) {
        schema = validate.zError;
        value = message.error;
      } else {
        schema = ANSWERS[asked.get(message.id)];
        value = message.result;
      }
      if (schema) {
        const result = schema.safeParse(value);
        if (!result.success) problems.push(`${JSON.stringify(message)}: ${result.error.message}`);
      }
      controller.enqueue(message);
    },
  });
  const out = raw.writable.getWriter();
  const writable = new WritableStream({
    async write(message) {
      if ("method" in message && "id" in message) asked.set(message.id, message.method);
      await out.write(message);
    },
    async close() {
      await out.close();
    },
  });
  return { readable: raw.readable.pipeThrough(checked), writable };
}

function sessionFile(cwd, id) {
  return path.join(cwd, ".sdk-agent", `${id}.json`);
}

function save(session) {
  fs.mkdirSync(path.dirname(sessionFile(session.cwd, session.id)), { recursive: true });
  fs.writeFileSync(sessionFile(session.cwd, session.id), JSON.stringify(session));
}

const sessions = new Map();
const cancels = new Map();

function text(t) {
  return { type: "text", text: t };
}

async function say(client, sessionId, update) {
  await client.notify(methods.client.session.update, { sessionId, update });
}

async function message(client, sessionId, t) {
  await say(client, sessionId, { sessionUpdate: "agent_message_chunk", content: text(t) });
}

const app = agent({ name: "moat-sdk-test-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: canLoad },
    agentInfo: { name: "moat-sdk-test-agent", version: "1.0.0" },
    authMethods: [],
  }))
  .onRequest(methods.agent.session.new, ({ params }) => {
    const session = { id: randomUUID(), cwd: params.cwd, words: [], history: [] };
    sessions.set(session.id, session);
    save(session);
    return { sessionId: session.id };
  })
  .onRequest(methods.agent.session.load, async ({ params, client }) => {
    let session;
    try {
      session = JSON.parse(fs.readFileSync(sessionFile(params.cwd, params.sessionId), "utf8"));
    } catch {
      throw RequestError.sessionNotFound(params.sessionId);
    }
    sessions.set(session.id, session);
    // ACP: the agent replays the conversation before answering.
    for (const [role, t] of session.history) {
      const sessionUpdate = role === "user" ? "user_message_chunk" : "agent_message_chunk";
      await say(client, session.id, { sessionUpdate, content: text(t) });
    }
    return {};
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    cancels.get(params.sessionId)?.();
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) throw RequestError.sessionNotFound(params.sessionId);
    const prompt = params.prompt.map((block) => block.text ?? "").join("");
    const id = session.id;
    const reply = [];
    const answer = async (t) => {
      reply.push(t);
      await message(client, id, t);
    };

    await say(client, id, { sessionUpdate: "agent_thought_chunk", content: text(`thinking about: ${prompt}`) });
    await answer("Hello from ");
    await answer("the SDK agent.");

    if (prompt.includes("garbage")) {
      process.stdout.write("this line is not JSON-RPC\n");
    }
    if (prompt.includes("plan")) {
      await say(client, id, {
        sessionUpdate: "plan",
        entries: [{ content: "answer the prompt", priority: "high", status: "in_progress" }],
      });
    }
    if (prompt.includes("tool")) {
      await say(client, id, {
        sessionUpdate: "tool_call",
        toolCallId: "call-read",
        title: "Reading notes.txt",
        kind: "read",
        status: "pending",
        rawInput: { path: "notes.txt" },
      });
      await say(client, id, { sessionUpdate: "tool_call_update", toolCallId: "call-read", status: "in_progress" });
      await say(client, id, {
        sessionUpdate: "tool_call_update",
        toolCallId: "call-read",
        status: "completed",
        content: [{ type: "content", content: text("the notes") }],
      });
    }
    for (const [, target] of prompt.matchAll(/write:(\S+)/g)) {
      try {
        await client.request(methods.client.fs.writeTextFile, {
          sessionId: id,
          path: target,
          content: "written by the SDK agent\n",
        });
        await answer(` write ok: ${target}.`);
      } catch (error) {
        await answer(` write failed: ${error.message}.`);
      }
    }
    for (const [, target] of prompt.matchAll(/read:(\S+)/g)) {
      try {
        const { content } = await client.request(methods.client.fs.readTextFile, { sessionId: id, path: target });
        await answer(` read: ${content.trim()}.`);
      } catch (error) {
        await answer(` read failed: ${error.message}.`);
      }
    }
    if (prompt.includes("permission")) {
      const toolCall = {
        toolCallId: "call-exec",
        title: "Run `touch done`",
        kind: "execute",
        status: "pending",
        rawInput: { command: "touch done" },
      };
      await say(client, id, { sessionUpdate: "tool_call", ...toolCall });
      const { outcome } = await client.request(methods.client.session.requestPermission, {
        sessionId: id,
        toolCall,
        options: [
          { optionId: "yes", name: "Allow", kind: "allow_once" },
          { optionId: "no", name: "Reject", kind: "reject_once" },
        ],
      });
      const allowed = outcome.outcome === "selected" && outcome.optionId === "yes";
      await say(client, id, {
        sessionUpdate: "tool_call_update",
        toolCallId: "call-exec",
        status: allowed ? "completed" : "failed",
        content: [{ type: "content", content: text(allowed ? "ran" : "not run") }],
      });
      await answer(` permission: ${outcome.outcome === "selected" ? outcome.optionId : outcome.outcome}.`);
    }
    if (prompt.includes("terminal")) {
      try {
        await client.request(methods.client.terminal.create, { sessionId: id, command: "ls" });
        await answer(" terminal: created.");
      } catch (error) {
        await answer(` terminal refused: ${error.message}.`);
      }
    }
    for (const [, word] of prompt.matchAll(/remember:(\S+)/g)) session.words.push(word);
    if (prompt.includes("recall")) await answer(` recalled: ${session.words.join(",") || "nothing"}.`);

    session.history.push(["user", prompt], ["agent", reply.join("")]);
    save(session);

    if (prompt.includes("hang")) {
      await answer(" waiting.");
      await new Promise((resolve) => cancels.set(id, resolve));
      return { stopReason: "cancelled" };
    }
    await answer(problems.length ? ` schema: ${problems.join("; ")}` : " schema: ok");
    if (prompt.includes("refuse")) return { stopReason: "refusal" };
    return { stopReason: "end_turn" };
  });

const connection = app.connect(checkedStream());
await connection.closed;
