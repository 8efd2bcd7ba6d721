// The shapes moat's server sends are cligent's: every event type-checks as
// cligent's CligentEvent (tests/fixtures/cligent/check-events.mjs), moat's
// own additions sit in `metadata`, and an EngineResult's usage is its done's.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { COOPERATIVE, stdioServer, tempDir } from './helpers.js';

const CHECK_EVENTS = fileURLToPath(new URL('../../../tests/fixtures/cligent/check-events.mjs', import.meta.url));

/** The events of a run, to its done. */
async function eventsOf(client, id) {
  const events = [];
  for await (const event of client.events(id)) events.push(event);
  return events;
}

/** Runs check-events.mjs on `events` (written as ndjson); fails with its report. */
function assertCligentAccepts(t, events) {
  const dir = tempDir(t);
  const file = join(dir, 'events.ndjson');
  writeFileSync(file, events.map((e) => `${JSON.stringify(e)}\n`).join(''));
  const checked = spawnSync(process.execPath, [CHECK_EVENTS, join(dir, 'check'), file], { encoding: 'utf8' });
  assert.equal(checked.status, 0, `cligent's types refuse moat's events:\n${checked.stdout}${checked.stderr}`);
}

const DONE_PAYLOAD_KEYS = ['durationMs', 'result', 'resumeToken', 'status', 'usage'];
const USAGE_KEYS = ['cost', 'toolUses', 'tokens'];

test("every event a server sends is one cligent's types accept", async (t) => {
  const { client } = await stdioServer(t);
  const events = [];
  // A run, a parallel run's (with roles), and an interrupted one.
  events.push(...(await eventsOf(client, await client.run('echo', 'hello', { options: { model: 'm1', cwd: '/tmp' } }))));
  for await (const event of client.runParallel([
    { adapter: 'echo', prompt: 'a', role: 'writer' },
    { adapter: 'echo', prompt: 'b', role: 'reviewer' },
  ])) {
    events.push(event);
  }
  const long = await client.run(COOPERATIVE, 'go');
  const stream = client.events(long);
  events.push((await stream.next()).value);
  await client.cancel(long);
  for await (const event of stream) events.push(event);
  assert.equal(events.at(-1).payload.status, 'interrupted');
  assertCligentAccepts(t, events);
});

test("init: model and cwd always; moat's runId and containment in its metadata, not its payload", async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run('echo', 'hello');
  const [init] = await eventsOf(client, id);
  assert.equal(init.type, 'init');
  assert.equal(typeof init.payload.model, 'string');
  assert.ok(init.payload.model.length > 0);
  assert.equal(typeof init.payload.cwd, 'string');
  assert.ok(Array.isArray(init.payload.tools));
  assert.equal(init.metadata?.runId, id, 'the run is recorded: its id');
  assert.ok(
    init.metadata.containment === undefined || typeof init.metadata.containment === 'string',
    JSON.stringify(init.metadata),
  );
  for (const key of ['runId', 'containment']) {
    assert.equal(key in init.payload, false, `${key} is not in the payload`);
    assert.equal(key in init, false, `${key} is not beside the payload`);
  }
});

test("done: usage is cligent's DoneUsage, the adapter's details in the event's metadata", async (t) => {
  const { client } = await stdioServer(t);
  const events = await eventsOf(client, await client.run('echo', 'hello'));
  const done = events.at(-1);
  assert.equal(done.type, 'done');
  for (const key of Object.keys(done.payload)) {
    assert.ok(DONE_PAYLOAD_KEYS.includes(key), `done payload has no ${key}`);
  }
  assert.equal(typeof done.payload.durationMs, 'number');
  assert.equal(typeof done.payload.usage.toolUses, 'number');
  for (const key of Object.keys(done.payload.usage)) {
    assert.ok(USAGE_KEYS.includes(key), `usage has no ${key}`);
  }
  assert.ok(done.metadata === undefined || typeof done.metadata === 'object');
});

test('the EngineResult: the done\'s usage; durationMs, turns and runId beside it', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run('echo', 'hello');
  const events = await eventsOf(client, id);
  const done = events.at(-1);
  const result = await client.awaitRun(id);
  assert.equal(result.status, 'success');
  assert.equal(result.text, 'hello');
  assert.equal(result.runId, id);
  assert.equal(result.sessionId, done.sessionId);
  assert.deepEqual(result.usage, done.payload.usage, 'one usage shape everywhere');
  assert.equal(result.durationMs, done.payload.durationMs);
  assert.equal(result.turns, done.metadata?.turns);
  for (const gone of ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens', 'costUsd', 'costSource', 'durationMs', 'turns']) {
    assert.equal(gone in result.usage, false, `usage has no ${gone}`);
  }
  // The record keeps the same result and the done's payload.
  const record = await client.get(id);
  assert.deepEqual(record.result, result);
  assert.deepEqual(record.done, done.payload);
});
