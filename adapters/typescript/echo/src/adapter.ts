/**
 * The `echo-ts` adapter: streams the prompt back, word by word.
 *
 * The TypeScript twin of the built-in `echo` (adapters/echo): an `init`,
 * one `text_delta` per word (each with the whitespace after it, so the
 * deltas concatenate back to the prompt), the whole prompt as `text`, then
 * `done` success with the prompt as its result. It has no backend: it
 * needs nothing from the host and reports no tokens (absent, not zero).
 * Interruption needs no code here: the SDK looks at the abort flag between
 * events and ends the run with `done` interrupted.
 */

import { defineAdapter, done, init, text, textDelta } from "@moat/adapter";
import { words } from "./words.js";

export const adapter = defineAdapter({
  info: {
    name: "echo-ts",
    version: "0.1.0",
    description: "Streams the prompt back (TypeScript); needs nothing",
  },
  async *run(prompt, options) {
    yield init({ model: "echo", cwd: options.cwd, tools: [] });
    for (const word of words(prompt)) {
      yield textDelta(word);
    }
    yield text(prompt);
    yield done("success", { result: prompt, toolUses: 0 });
  },
});
