/**
 * `spin-ts`: a misbehaving test adapter. It sends `init`, then spins in a
 * busy loop forever inside one step of its generator, never yielding and
 * never looking at the abort flag: neither the SDK (which only acts
 * between events and during its own waits) nor the adapter will end the
 * run. The host must: its abort drain and epoch interruption, or the run's
 * timeout, stop it with exactly one `done` (tests/all/sdk_typescript.rs).
 */

import { defineAdapter, init } from "@moat/adapter";

/** Work the optimizer cannot drop. */
let counter = 0;

export const adapter = defineAdapter({
  info: {
    name: "spin-ts",
    version: "0.1.0",
    description: "Test adapter: spins forever after init, ignoring interruption",
  },
  async *run() {
    yield init({ tools: [] });
    for (;;) {
      counter = (counter + 1) % 1_000_003;
    }
  },
});
