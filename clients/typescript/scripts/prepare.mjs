// npm's `prepare`: npm runs it here after `npm install` / `npm ci` in this
// directory, and also when another project installs this package from a
// folder (`npm install ./clients/typescript`) or a git checkout. In that
// last case npm does not install this package's devDependencies, so there
// is no TypeScript compiler to run — which is why dist/ (the compiled
// JavaScript and its .d.ts types) is committed to the repository, the way
// packages meant to install from source do it: it is always there.
//
// - typescript installed here (a development checkout after `npm ci`):
//   build dist/ from src/, as `npm run build` does;
// - otherwise: use the committed dist/, and fail, saying so, only if it is
//   missing.
//
// Only this directory's own node_modules counts: a compiler found further
// up (the installing project's, another version) could build a different
// dist/.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

if (existsSync(tsc)) {
  const built = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
  process.exit(built.status ?? 1);
}
const shipped = ['index.js', 'index.d.ts'].every((file) => existsSync(join(root, 'dist', file)));
if (!shipped) {
  process.stderr.write(
    `@moat/client: ${join(root, 'dist')} is missing and typescript is not installed to build it; ` +
      `run \`npm ci\` in ${root} (it builds dist/), then install again\n`,
  );
  process.exit(1);
}
