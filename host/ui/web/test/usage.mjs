// What `moat ui` shows of runs' usage, for tests/all/cli/usage.rs: the
// tokens and cost of each run given, on its row of the runs page and on
// its run page's `done` line, printed as JSON for the test to compare
// with the figures of the run itself.
//
//   MOAT_BIN        the moat binary (its MOAT_STORE etc. from the env)
//   MOAT_UI_RUNS    the run ids, comma-separated
//   CHROMIUM        the browser (default /usr/bin/chromium)
import { spawn } from 'node:child_process';
import { chromium } from 'playwright-core';

const ids = (process.env.MOAT_UI_RUNS || '').split(',').filter(Boolean);
const child = spawn(process.env.MOAT_BIN, ['ui', '--no-open'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += chunk;
    const found = out.match(/moat ui: (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/);
    if (found) resolve(found[1]);
  });
  child.on('exit', (code) => reject(new Error(`moat ui exited (${code})`)));
});
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
const shown = {};
try {
  const page = await browser.newPage();
  await page.goto(url);
  for (const id of ids) {
    const row = page.locator(`tr[data-run-id="${id}"]`);
    await row.waitFor({ timeout: 15000 });
    shown[id] = {
      rowTokens: (await row.locator('td[data-col="tokens"]').textContent()).trim(),
      rowCost: (await row.locator('td[data-col="cost"]').textContent()).trim(),
    };
  }
  for (const id of ids) {
    await page.goto(`${url}#/run/${id}`);
    const done = page.locator('#done');
    await done.waitFor({ timeout: 15000 });
    shown[id].done = (await done.textContent()).replace(/\s+/g, ' ').trim();
  }
} finally {
  await browser.close();
  child.kill('SIGTERM');
}
console.log(JSON.stringify(shown));
