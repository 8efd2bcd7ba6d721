/**
 * `ask-ts`: a test adapter that asks the run's user before made-up tool
 * calls, through the SDK's `requestApproval` (the contract's
 * `request-approval`, 0.4.0), and says what it was answered
 * (tests/all/sdk_typescript.rs). Each line of the prompt is one probe:
 *
 * - `TOOL INPUT`: asks about a call `call-N` (N: the line's number, from 1)
 *   of TOOL with INPUT, parsed as JSON, reported as `ok: allowed`,
 *   `denied: <message>` or `invalid: <why the SDK refused the request>`;
 *   answered `interrupted`, the run ends with `done` interrupted;
 * - `ask-tools`: the tools the run puts under `ask`, as
 *   `ask-tools: A,B` (`askTools()`).
 */

import {
  askTools,
  defineAdapter,
  done,
  init,
  type JsonObject,
  requestApproval,
  text,
} from "@moat/adapter";

export const adapter = defineAdapter({
  info: {
    name: "ask-ts",
    version: "0.1.0",
    description: "Test adapter: asks before made-up tool calls and says what it was answered",
  },
  async *run(prompt, options) {
    yield init({ model: "ask", cwd: options.cwd, tools: [] });
    const lines = prompt.split("\n").filter((line) => line.trim() !== "");
    for (const [index, line] of lines.entries()) {
      if (line.trim() === "ask-tools") {
        yield text(`ask-tools: ${askTools().join(",")}`);
        continue;
      }
      const space = line.indexOf(" ");
      const tool = space < 0 ? line : line.slice(0, space);
      let answer;
      try {
        const input = JSON.parse(space < 0 ? "{}" : line.slice(space + 1)) as JsonObject;
        answer = requestApproval({
          toolName: tool,
          toolUseId: `call-${index + 1}`,
          input,
          reason: "the ask-ts test adapter asks",
        });
      } catch (error) {
        yield text(`invalid: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      switch (answer.behavior) {
        case "allow":
          yield text("ok: allowed");
          break;
        case "deny":
          yield text(`denied: ${answer.message}`);
          break;
        case "interrupted":
          yield done("interrupted");
          return;
      }
    }
    yield done("success");
  },
});
