// Regenerates src/wit/ (the contract's TypeScript declarations) with jco's
// guest-types generator, as `jco guest-types WIT -n adapter-world -o src/wit`
// would: jco 1.35's command cannot read any WIT path (its WASI shim starts
// with no preopened directories), so this calls the generator it wraps,
// `generateGuestTypes` of @bytecodealliance/jco-transpile, after giving the
// shim the root directory. Offline: the tools come from an npm install that
// has them, adapters/typescript/node_modules by default.
//
//   node scripts/wit-types.mjs [WIT_FOLDER] [NODE_MODULES]
//
// WIT_FOLDER defaults to wit/deps/moat-adapter (the contract this SDK builds
// against). Writes src/wit/adapter-world.d.ts and src/wit/interfaces/;
// src/wit/wasi-cli-environment.d.ts is hand-written and left alone.

import { mkdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const wit = resolve(process.argv[2] ?? join(sdk, "wit/deps/moat-adapter"));
const modules = resolve(process.argv[3] ?? join(sdk, "../../adapters/typescript/node_modules"));

// The shim jco-transpile's generator imports (resolved from jco-transpile,
// so it is the same module instance), then the generator.
const transpile = join(modules, "@bytecodealliance/jco-transpile/package.json");
const fromTranspile = createRequire(transpile);
const filesystem = await import(
  pathToFileURL(fromTranspile.resolve("@bytecodealliance/preview2-shim/filesystem")).href
);
filesystem._setPreopens({ "/": "/" });
const { generateGuestTypes } = await import(
  pathToFileURL(join(dirname(transpile), "dist/index.js")).href
);

const files = await generateGuestTypes(wit, { worldName: "adapter-world", name: "adapter-world" });
const out = join(sdk, "src/wit");
await rm(join(out, "interfaces"), { recursive: true, force: true });
await rm(join(out, "adapter-world.d.ts"), { force: true });
for (const [name, bytes] of Object.entries(files)) {
  const path = join(out, name);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, bytes);
  console.log(`wrote src/wit/${name}`);
}
