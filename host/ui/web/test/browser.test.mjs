// `moat ui` in real Chromium (playwright-core driving Debian's chromium),
// through the real `moat` binary: run by tests/all/ui.rs, which gives the
// binary, the testing components and where screenshots go.
//
//   MOAT_BIN              the moat binary
//   MOAT_TEST_FLOOD       the flood testing component (N text deltas)
//   MOAT_TEST_SLEEPY      the sleepy testing component (a tick per sleep)
//   MOAT_TEST_ESCAPE      the escape testing component (reaches for hosts)
//   MOAT_TEST_TOOL_USER   the tool-user testing component (calls the tools named)
//   MOAT_UI_EXAMPLE       examples/workflows/pipeline
//   MOAT_UI_SCREENSHOTS   where ui-*.png are written (docs/images)
//   MOAT_UI_NATS          optional: a NATS URL with one worker on it
//   CHROMIUM              the browser (default /usr/bin/chromium)
//   MOAT_STORE etc.       the environment of every moat started here
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BIN = process.env.MOAT_BIN;
const FLOOD = process.env.MOAT_TEST_FLOOD;
const SLEEPY = process.env.MOAT_TEST_SLEEPY;
const ESCAPE = process.env.MOAT_TEST_ESCAPE;
const TOOL_USER = process.env.MOAT_TEST_TOOL_USER;
const SHOTS = process.env.MOAT_UI_SCREENSHOTS;
const NATS = process.env.MOAT_UI_NATS || '';
for (const [name, value] of Object.entries({ BIN, FLOOD, SLEEPY, ESCAPE, TOOL_USER, SHOTS })) {
  if (!value) throw new Error(`${name} is not set: run this suite from tests/all/ui.rs`);
}

function moat(args, options = {}) {
  return execFileSync(BIN, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });
}

/// Starts `moat ui`, resolving with its process and URL once it prints it.
function startUi(extra = []) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, ['ui', '--no-open', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/moat ui: (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/);
      if (found) resolve({ child, url: found[1] });
    });
    child.stderr.on('data', (chunk) => { err += chunk; });
    child.on('exit', (code) => reject(new Error(`moat ui exited (${code}): ${err}`)));
    setTimeout(() => reject(new Error(`moat ui printed no URL: ${out} ${err}`)), 30000).unref();
  });
}

/// A raw request (Node's fetch would not send a foreign Origin or Host).
function get(url, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const detached = (args) => moat(['run', ...args, '--detach']).trim().split(/\s+/).pop();

describe('moat ui', () => {
  let ui;
  let browser;
  let page;
  before(async () => {
    ui = await startUi();
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
    page = await browser.newPage({ viewport: { width: 1360, height: 820 } });
    page.on('pageerror', (error) => { console.error('page error:', error); });
  });
  after(async () => {
    await browser?.close();
    ui?.child.kill('SIGTERM');
  });

  test('every request needs the token, from this origin', async () => {
    const base = ui.url.replace(/\/\?token=.*/, '');
    const token = ui.url.split('token=')[1];
    assert.equal((await get(`${base}/`)).status, 403);
    assert.equal((await get(`${base}/api/runs`)).status, 403);
    assert.equal((await get(`${base}/api/runs/stream`)).status, 403);
    // One character off (never the same character: a token ending in 0
    // would have been given back unchanged).
    const wrong = token.slice(0, -1) + (token.endsWith('0') ? '1' : '0');
    assert.equal((await get(`${base}/api/runs?token=${wrong}`)).status, 403);
    assert.equal((await get(`${base}/api/runs?token=${token}`, { Origin: 'http://evil.example' })).status, 403);
    assert.equal((await get(`${base}/api/runs?token=${token}`, { Host: `evil.example:${new URL(base).port}` })).status, 403);
    assert.equal((await get(`${base}/api/runs?token=${token}`, { Origin: base })).status, 200);
    assert.equal((await get(`${base}/api/runs?token=${token}&status=sleeping`)).status, 400);
    assert.equal((await get(`${base}/api/runs/not-a-run?token=${token}`)).status, 400);
    // The browser too: the page without the token is refused.
    const refused = await page.goto(`${base}/`);
    assert.equal(refused.status(), 403);
  });

  test('the runs page shows a run started from the CLI within a second, then completed', async () => {
    await page.goto(ui.url);
    await page.waitForSelector('#runs');
    // About two seconds of ticks: seen running, then completed.
    const id = detached([SLEEPY, '2']);
    const started = Date.now();
    const row = page.locator(`tr[data-run-id="${id}"]`);
    await row.waitFor({ timeout: 5000 });
    const seenAfter = Date.now() - started;
    assert.ok(seenAfter < 1000, `the run appeared after ${seenAfter} ms`);
    await page.locator(`tr[data-run-id="${id}"][data-status="completed"]`).waitFor({ timeout: 30000 });
    // Filters: only completed runs of this adapter.
    await page.selectOption('#filter-status', 'failed');
    await row.waitFor({ state: 'detached', timeout: 5000 });
    await page.selectOption('#filter-status', 'completed');
    await row.waitFor({ timeout: 5000 });
    await page.selectOption('#filter-status', '');
    console.log(`# the run appeared on the page ${seenAfter} ms after moat run --detach returned`);
  });

  test('a run page shows a flood\'s events arriving and the final answer', async () => {
    const count = 20000;
    const id = detached([FLOOD, String(count)]);
    await page.goto(`${ui.url}#/run/${id}`);
    const counts = [];
    const sampler = setInterval(async () => {
      try { counts.push(Number(await page.locator('#event-count').getAttribute('data-count', { timeout: 200 }))); } catch {}
    }, 20);
    await page.locator('#done').waitFor({ timeout: 30000 });
    clearInterval(sampler);
    const answer = await page.locator('#answer').textContent();
    assert.equal(answer, 'x'.repeat(count));
    // The deltas and done.
    const total = Number(await page.locator('#event-count').getAttribute('data-count'));
    assert.equal(total, count + 1);
    assert.match(await page.locator('#done').textContent(), /done: success/);
    await page.locator('#run-status[data-status="completed"]').waitFor({ timeout: 10000 });
    // Seen arriving: the page showed some of them before all.
    assert.ok(counts.some((n) => n > 0 && n < count + 1), `counts seen: ${counts}`);
    console.log(`# counts seen while it streamed: ${[...new Set(counts)].slice(0, 8).join(', ')}…`);
    await page.screenshot({ path: join(SHOTS, 'ui-run.png') });
  });

  test('cancel on the page ends a live run', async () => {
    const id = detached([SLEEPY, '200 cooperate']);
    await page.goto(`${ui.url}#/run/${id}`);
    await page.locator('#run-status[data-status="running"]').waitFor({ timeout: 15000 });
    // A tick or two on the page first.
    await page.waitForFunction(() => document.querySelector('#answer')?.textContent.includes('tick'), null, { timeout: 15000 });
    await page.click('#cancel');
    await page.locator('#run-status[data-status="cancelled"]').waitFor({ timeout: 15000 });
    const shown = JSON.parse(moat(['show', id, '--json']));
    assert.equal(shown.status ?? shown.record?.status, 'failed');
    assert.equal(shown.reason ?? shown.record?.reason, 'cancelled');
    assert.ok(await page.locator('#cancel').isDisabled());
  });

  test('a workflow page shows the example pipeline\'s DAG, every task completed', async () => {
    // Run as the README runs it: the file named by a path relative to
    // where moat runs, not to the workflow's own directory.
    const parent = mkdtempSync(join(tmpdir(), 'moat-ui-pipeline-'));
    const project = join(parent, 'examples', 'pipeline');
    mkdirSync(project, { recursive: true });
    const example = process.env.MOAT_UI_EXAMPLE;
    for (const name of readdirSync(example)) {
      if (statSync(join(example, name)).isFile()) cpSync(join(example, name), join(project, name));
    }
    moat(['workflow', 'run', 'examples/pipeline/workflow.toml', '--output', 'ndjson'], { cwd: parent });
    const runs = JSON.parse(moat(['ps', '--all', '--output', 'json']));
    const record = runs.find((run) => run.adapter === 'workflow');
    assert.ok(record, 'the workflow is recorded');
    // Its tasks' runs are listed by the task they are an attempt of.
    const attempts = runs.filter((run) => run.parent === record.id);
    assert.deepEqual([...new Set(attempts.map((run) => run.role))].sort(), ['design', 'implement', 'requirements', 'review']);
    await page.goto(ui.url);
    for (const attempt of attempts) {
      const role = page.locator(`tr[data-run-id="${attempt.id}"] b.role`);
      await role.waitFor({ timeout: 10000 });
      assert.equal(await role.textContent(), attempt.role);
    }
    await page.click(`tr[data-run-id="${record.id}"] a`);
    await page.waitForSelector('#dag g.node');
    const tasks = page.locator('#dag g.node');
    assert.equal(await tasks.count(), 4);
    await page.locator('#dag g.node[data-status="completed"]').nth(3).waitFor({ timeout: 10000 });
    assert.equal(await page.locator('#dag g.node:not([data-status="completed"])').count(), 0);
    assert.equal(await page.locator('#dag path').count() >= 3, true);
    await page.locator('#workflow-status[data-status="completed"]').waitFor({ timeout: 10000 });
    await page.screenshot({ path: join(SHOTS, 'ui-workflow.png') });
    // A task's box opens its run.
    await page.click('#dag g.node[data-task="design"]');
    await page.locator('#run-status[data-status="completed"]').waitFor({ timeout: 10000 });
    assert.match(page.url(), /#\/run\/r_/);
  });

  test('a waiting run\'s request is approved from its page', async () => {
    // A host it was not granted, with --ask: it waits for an answer.
    const id = detached([ESCAPE, 'http GET http://127.0.0.1:9/', '--ask']);
    await page.goto(`${ui.url}#/run/${id}`);
    await page.locator('#run-status[data-status="waiting"]').waitFor({ timeout: 15000 });
    const request = page.locator('#approvals .approval[data-number="1"]');
    await request.locator('button.ok').waitFor({ timeout: 10000 });
    assert.match(await request.textContent(), /net.*127\.0\.0\.1:9/);
    await page.screenshot({ path: join(SHOTS, 'ui-approval.png') });
    await request.locator('button.ok').click();
    await request.locator('text=approved by moat ui').waitFor({ timeout: 10000 });
    await page.locator('#run-status:not([data-status="waiting"])').waitFor({ timeout: 15000 });
    const shown = JSON.parse(moat(['show', id, '--json']));
    assert.equal(shown.requests[0].answer.approved, true);
    assert.match(shown.requests[0].answer.by, /^moat ui \(pid \d+/);
  });

  test('a run\'s workspace diff shows on its page', async () => {
    const project = mkdtempSync(join(tmpdir(), 'moat-ui-project-'));
    const git = (...args) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd: project });
    writeFileSync(join(project, 'a.txt'), 'a\n');
    git('init', '-q', '.');
    git('add', 'a.txt');
    git('commit', '-qm', 'init');
    moat(['run', 'echo', 'hi', '--workspace', 'copy', `--allow-write=${project}`], { cwd: project });
    const id = JSON.parse(moat(['ps', '--all', '--output', 'json']))[0].id;
    // What an agent would have written in its copy.
    writeFileSync(join(process.env.MOAT_WORKSPACE_DIR, id, 'b.txt'), 'written by the run\n');
    await page.goto(`${ui.url}#/run/${id}`);
    await page.click('#show-diff');
    const diff = page.locator('pre.diff');
    await diff.waitFor({ timeout: 10000 });
    assert.match(await diff.textContent(), /\+\+\+ b\/b\.txt.*\+written by the run/s);
  });

  test('a workflow file started from the page runs, is recorded, and resumes from its page', async () => {
    const project = mkdtempSync(join(tmpdir(), 'moat-ui-start-'));
    cpSync(SLEEPY, join(project, 'sleepy.wasm'));
    const file = join(project, 'flow.toml');
    writeFileSync(file, [
      'name = "paged"',
      '[[task]]', 'id = "A"', 'adapter = "echo"', 'prompt = "first"',
      '[[task]]', 'id = "B"', 'adapter = "sleepy.wasm"', 'prompt = "sleep 2 ms a tick, cooperate"', 'depends_on = ["A"]',
      '[[task]]', 'id = "C"', 'adapter = "echo"', 'prompt = "last"', 'depends_on = ["B"]',
    ].join('\n') + '\n');
    await page.goto(ui.url);
    // A path the page cannot place is refused, saying why.
    await page.fill('#workflow-file', 'flow.toml');
    await page.click('#workflow-start');
    await page.locator('#workflow-error').waitFor({ timeout: 10000 });
    assert.match(await page.locator('#workflow-error').textContent(), /absolute/);
    // Started: its page, its record, its tasks' runs its children.
    await page.fill('#workflow-file', file);
    await page.click('#workflow-start');
    await page.waitForURL(/#\/workflow\/r_/, { timeout: 15000 });
    const first = page.url().split('#/workflow/')[1];
    await page.locator('#dag g.node[data-task="B"][data-status="running"]').waitFor({ timeout: 15000 });
    const record = JSON.parse(moat(['show', first, '--json']));
    assert.equal(record.adapter, 'workflow');
    // Cancelled from elsewhere, then resumed from its page: A is skipped.
    moat(['cancel', first]);
    await page.locator('#workflow-status[data-status="cancelled"]').waitFor({ timeout: 15000 });
    await page.locator('#workflow-resume').waitFor({ timeout: 10000 });
    await page.click('#workflow-resume');
    await page.waitForURL((url) => /#\/workflow\/r_/.test(url.hash) && !url.hash.endsWith(first), { timeout: 15000 });
    const second = page.url().split('#/workflow/')[1];
    await page.locator('#workflow-status[data-status="completed"]').waitFor({ timeout: 30000 });
    const runs = JSON.parse(moat(['ps', '--all', '--output', 'json']));
    const resumed = runs.filter((run) => run.parent === second).map((run) => run.role).sort();
    assert.deepEqual(resumed, ['B', 'C']);
    const state = JSON.parse(moat(['workflow', 'status', file, '--output', 'json']));
    assert.deepEqual(state.runs, [first, second]);
    assert.equal(state.status, 'completed');
  });

  test('a run\'s page counts its tool calls in words and offers no diff without a workspace', async () => {
    const id = detached([TOOL_USER, 'Read']);
    await page.goto(`${ui.url}#/run/${id}`);
    const done = page.locator('#done');
    await done.waitFor({ timeout: 15000 });
    assert.match(await done.textContent(), /· 1 tool call ·/);
    await page.locator('#run-status[data-status="completed"]').waitFor({ timeout: 10000 });
    assert.equal(await page.locator('#show-diff').count(), 0, 'no workspace, no diff to show');
  });

  test('moat ui ends at once on SIGTERM with pages connected', async () => {
    const other = await startUi();
    const live = detached([SLEEPY, '300 cooperate']);
    const pages = [];
    try {
      for (const hash of ['', `#/run/${live}`]) {
        const open = await browser.newPage();
        await open.goto(`${other.url}${hash}`);
        pages.push(open);
      }
      await pages[1].locator('#run-status[data-status="running"]').waitFor({ timeout: 15000 });
      const ended = new Promise((resolve) => other.child.on('exit', resolve));
      const asked = Date.now();
      other.child.kill('SIGTERM');
      await ended;
      const took = Date.now() - asked;
      // Its shutdown waits up to 2 s for what is left: nothing should be.
      assert.ok(took < 1500, `moat ui took ${took} ms to end`);
      console.log(`# moat ui ended ${took} ms after SIGTERM, two pages connected`);
    } finally {
      for (const open of pages) await open.close();
      moat(['cancel', live]);
    }
  });

  test('the runs page, with a workflow, its tasks and a live run', async () => {
    const live = detached([SLEEPY, '300 cooperate']);
    await page.goto(ui.url);
    await page.locator(`tr[data-run-id="${live}"][data-status="running"]`).waitFor({ timeout: 15000 });
    await page.screenshot({ path: join(SHOTS, 'ui-runs.png') });
    moat(['cancel', live]);
    await page.locator(`tr[data-run-id="${live}"][data-status="cancelled"]`).waitFor({ timeout: 15000 });
  });

  test('the runs page with --nats: a cluster\'s runs', { skip: !NATS && 'no MOAT_UI_NATS' }, async () => {
    const cluster = await startUi(['--nats', NATS]);
    try {
      const other = await browser.newPage({ viewport: { width: 1360, height: 600 } });
      await other.goto(cluster.url);
      await other.waitForSelector('#runs');
      const id = moat(['run', 'echo', 'hello cluster', '--nats', NATS, '--detach']).trim().split(/\s+/).pop();
      await other.locator(`tr[data-run-id="${id}"][data-status="completed"]`).waitFor({ timeout: 20000 });
      await other.goto(`${cluster.url}#/run/${id}`);
      await other.locator('#done').waitFor({ timeout: 10000 });
      assert.equal(await other.locator('#answer').textContent(), 'hello cluster');
      await other.close();
    } finally {
      cluster.child.kill('SIGTERM');
    }
  });
});
