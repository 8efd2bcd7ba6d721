#!/usr/bin/env node
// @ts-check
/**
 * `moat-adapter build ENTRY.ts -o OUT.wasm`: an adapter's TypeScript, with
 * this SDK, into a WebAssembly component of the moat contract.
 *
 * 1. esbuild bundles the entry module and everything it imports (this SDK
 *    included) into one ES module; the contract's imports (`moat:*`) and
 *    WASI stay imports of the component.
 * 2. componentize-js embeds it in its JavaScript engine (StarlingMonkey)
 *    against this package's `wit/` world `adapter` (the contract's
 *    `adapter-world` plus `wasi:cli/environment`), with the `fetch-event`
 *    feature off: an adapter serves no incoming HTTP.
 *
 * Both tools come from the adapter project's own node_modules (its
 * devDependencies), found through `node_modules/.bin` from the working
 * directory up, then PATH: the SDK installs nothing and uses nothing
 * global. Type-checking is the project's own step (`tsc --noEmit`).
 */

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const USAGE = "usage: moat-adapter build ENTRY.ts -o OUT.wasm";

/** The WIT of the contract this SDK builds against. */
const WIT = resolve(dirname(fileURLToPath(import.meta.url)), "../wit");

/**
 * The path of the tool `name`: the nearest `node_modules/.bin/NAME` from
 * the working directory up, else the bare name (looked up on PATH).
 * @param {string} name
 */
function tool(name) {
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", ".bin", name);
    if (existsSync(candidate)) {
      return candidate;
    }
    if (dirname(dir) === dir) {
      return name;
    }
  }
}

/**
 * Runs `name` with `args`; exits with its status when it fails.
 * @param {string} name
 * @param {string[]} args
 */
function run(name, args) {
  const result = spawnSync(tool(name), args, { stdio: "inherit" });
  if (result.error) {
    console.error(
      `moat-adapter: cannot run ${name} (${result.error.message}); ` +
        "add it to the project's devDependencies and run npm install",
    );
    process.exit(1);
  }
  if (result.status !== 0) {
    console.error(`moat-adapter: ${name} failed`);
    process.exit(result.status ?? 1);
  }
}

/**
 * The entry and output of `build ENTRY -o OUT`.
 * @param {string[]} args
 * @returns {{ entry: string, out: string }}
 */
function parseBuild(args) {
  /** @type {string | undefined} */
  let entry;
  /** @type {string | undefined} */
  let out;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "-o" || arg === "--out") {
      out = args[++i];
    } else if (entry === undefined && arg !== undefined && !arg.startsWith("-")) {
      entry = arg;
    } else {
      fail(`unexpected argument ${arg}`);
    }
  }
  if (entry === undefined || out === undefined) {
    fail("an entry module and -o OUT.wasm are required");
  }
  return { entry, out };
}

/**
 * @param {string} message
 * @returns {never}
 */
function fail(message) {
  console.error(`moat-adapter: ${message}\n${USAGE}`);
  process.exit(2);
}

function main() {
  const [command, ...rest] = process.argv.slice(2);
  if (command !== "build") {
    fail(command === undefined ? "no command" : `unknown command ${command}`);
  }
  const { entry, out } = parseBuild(rest);
  if (!existsSync(join(WIT, "deps/moat-adapter/adapter.wit"))) {
    fail(`the contract's WIT is missing at ${WIT}`);
  }
  const bundle = out.replace(/\.wasm$/, "") + ".bundle.js";
  mkdirSync(dirname(resolve(out)), { recursive: true });
  run("esbuild", [
    entry,
    "--bundle",
    "--format=esm",
    "--platform=neutral",
    "--target=es2022",
    // Imports of the component, satisfied by the host.
    "--external:moat:*",
    "--external:wasi:*",
    "--log-level=warning",
    `--outfile=${bundle}`,
  ]);
  run("componentize-js", [
    bundle,
    "--wit",
    WIT,
    "--world-name",
    "adapter",
    "--disable",
    "fetch-event",
    "--out",
    out,
  ]);
  const size = statSync(out).size;
  console.log(`moat-adapter: built ${out} (${(size / 1024 / 1024).toFixed(1)} MiB)`);
}

main();
