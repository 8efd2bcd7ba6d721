// One prompt through `moat acp`, as an editor sends it: the official ACP SDK
// as the client (client.mjs, every message moat sends checked with the
// SDK's schemas). For tests that set up an agent's world themselves
// (tests/all/acp_adapter.rs: the real Gemini CLI through `moat acp acp`).
//
//   node prompt.mjs CWD PROMPT [MOAT_ACP_ARGS…]
//
// Prints one JSON line: the answer's text, the stop reason, the moat run,
// the kinds of updates seen and the permission requests answered (each
// allowed once).

import { turn, withAgent } from "./client.mjs";

const [cwd, prompt, ...args] = process.argv.slice(2);
const asked = [];
const outcome = await withAgent(
  args,
  async (ctx) => {
    const session = await ctx.buildSession(cwd).start();
    const { text, updates, response } = await turn(session, prompt);
    return {
      text,
      stopReason: response.stopReason,
      run: response._meta?.moatRun,
      updates: updates.map((update) => update.sessionUpdate),
    };
  },
  {
    onPermission: (params) => {
      asked.push(params.toolCall.title);
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    },
  },
);
console.log(JSON.stringify({ ...outcome, asked }));
