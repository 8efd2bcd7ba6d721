// What `moat ui` shows of runs' traffic, for tests/all/ui.rs: each run's
// Network tab in Chromium (its rows, cell by cell, and its metered line)
// and what its API endpoint answers with and without the token, printed
// as JSON for the test to compare with the runs it made.
//
//   MOAT_BIN             the moat binary (its MOAT_STORE etc. from the env)
//   MOAT_UI_RUNS         the run ids, comma-separated
//   MOAT_UI_SCREENSHOTS  where ui-network.png (the first run's tab) goes
//   CHROMIUM             the browser (default /usr/bin/chromium)
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
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
const base = url.replace(/\/\?token=.*/, '');
const token = url.split('token=')[1];

/// A raw request (Node's fetch would not send a foreign Origin).
function get(path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const text = async (locator) => ((await locator.count()) ? (await locator.first().textContent()).replace(/\s+/g, ' ').trim() : null);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
const shown = {};
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 600 } });
  page.on('pageerror', (error) => { console.error('page error:', error); });
  for (const [index, id] of ids.entries()) {
    await page.goto(`${url}#/run/${id}`);
    await page.locator('#run-status:is([data-status="completed"], [data-status="failed"])').waitFor({ timeout: 15000 });
    await page.click('#tab-network');
    await page.locator('#traffic, #traffic-none').first().waitFor({ timeout: 15000 });
    const rows = [];
    for (const row of await page.locator('#traffic tbody tr').all()) {
      const cell = (name) => text(row.locator(`td[data-col="${name}"]`));
      rows.push({
        refused: await row.getAttribute('data-refused'),
        who: await row.getAttribute('data-who'),
        what: await cell('what'),
        outcome: await cell('outcome'),
        model: await cell('model'),
        tokens: await cell('tokens'),
        allowedBy: await cell('allowed-by'),
        text: (await row.textContent()).replace(/\s+/g, ' ').trim(),
      });
    }
    const api = (headers, query = `?token=${token}`) => get(`/api/runs/${id}/traffic${query}`, headers);
    const answered = await api({});
    shown[id] = {
      hash: new URL(page.url()).hash,
      rows,
      metered: await text(page.locator('#traffic-metered')),
      none: await text(page.locator('#traffic-none')),
      api: {
        withToken: answered.status,
        rows: answered.status === 200 ? JSON.parse(answered.body).rows.length : null,
        withoutToken: (await api({}, '')).status,
        otherOrigin: (await api({ Origin: 'http://evil.example' })).status,
      },
    };
    if (index === 0 && process.env.MOAT_UI_SCREENSHOTS) {
      await page.screenshot({ path: join(process.env.MOAT_UI_SCREENSHOTS, 'ui-network.png') });
    }
    // Back to its events: the tab does not lose them.
    await page.click('#tab-events');
    await page.locator('#done').waitFor({ timeout: 15000 });
  }
  shown.missing = (await get(`/api/runs/r_00000000000000000000000000/traffic?token=${token}`)).status;
  shown.badId = (await get(`/api/runs/..%2Fx/traffic?token=${token}`)).status;
} finally {
  await browser.close();
  child.kill('SIGTERM');
}
console.log(JSON.stringify(shown));
