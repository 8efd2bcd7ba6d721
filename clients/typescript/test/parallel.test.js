// runParallel (cligent's): several runs, one merged stream, each event with
// its task's role; abort, refusals and early exits. And cligent's guard.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isAgentEvent, isMoatError, runParallel } from '../dist/index.js';
import { COOPERATIVE, noUnhandledRejections, sleep, stdioServer } from './helpers.js';

/** The events of `events` whose role is `role` (`undefined`: those without one). */
function ofRole(events, role) {
  return events.filter((e) => e.role === role);
}

test('runParallel merges every task into one stream, each event with its role, until every done', async (t) => {
  const { client } = await stdioServer(t);
  const events = [];
  for await (const event of client.runParallel([
    { adapter: 'echo', prompt: 'one', role: 'first' },
    { adapter: 'echo', prompt: 'two', role: 'second', options: { model: 'm2' } },
    { adapter: 'echo', prompt: 'three' },
  ])) {
    events.push(event);
  }
  assert.equal(events.length, 12, JSON.stringify(events.map((e) => [e.role, e.type])));
  for (const [role, text] of [['first', 'one'], ['second', 'two'], [undefined, 'three']]) {
    const mine = ofRole(events, role);
    assert.deepEqual(mine.map((e) => e.type), ['init', 'text_delta', 'text', 'done'], `role ${role}`);
    assert.equal(mine.at(-1).payload.result, text);
    assert.equal(mine.at(-1).payload.status, 'success');
    assert.ok(mine.every((e) => e.agent === 'echo' && e.sessionId === mine[0].sessionId));
  }
  // A task without a role: its events have none (not even an undefined one).
  assert.ok(ofRole(events, undefined).every((e) => !('role' in e)));
  // The role sits where `moat parallel` prints it: before the payload.
  const keys = Object.keys(ofRole(events, 'first')[0]);
  assert.ok(keys.indexOf('role') < keys.indexOf('payload'), keys.join(','));
  assert.equal(events.filter((e) => e.type === 'done').length, 3);

  // Each task is a run of its own, with its options.
  const records = await client.list();
  assert.deepEqual(records.map((r) => r.prompt).sort(), ['one', 'three', 'two']);
  assert.equal(records.find((r) => r.prompt === 'two').options.model, 'm2');

  // The free function takes the client last; no tasks, no events.
  const types = [];
  for await (const event of runParallel([{ adapter: 'echo', prompt: 'again', role: 'r' }], client)) {
    types.push([event.role, event.type]);
  }
  assert.deepEqual(types, [['r', 'init'], ['r', 'text_delta'], ['r', 'text'], ['r', 'done']]);
  for await (const _event of runParallel([], client)) assert.fail('no event');
});

test("runParallel: aborting any task's signal cancels every run, each ends interrupted", async (t) => {
  const { client } = await stdioServer(t);
  const controller = new AbortController();
  const events = [];
  for await (const event of client.runParallel([
    { adapter: COOPERATIVE, prompt: 'go', role: 'a', options: { abortSignal: controller.signal } },
    { adapter: COOPERATIVE, prompt: 'go', role: 'b' },
  ])) {
    events.push(event);
    // Once both have started, abort.
    if (ofRole(events, 'a').length > 0 && ofRole(events, 'b').length > 0 && !controller.signal.aborted) {
      controller.abort();
    }
  }
  for (const role of ['a', 'b']) {
    const dones = ofRole(events, role).filter((e) => e.type === 'done');
    assert.equal(dones.length, 1, `one done for ${role}`);
    assert.equal(ofRole(events, role).at(-1), dones[0], 'the done is last');
    assert.equal(dones[0].payload.status, 'interrupted');
  }
  const records = await client.list();
  assert.equal(records.length, 2);
  assert.ok(records.every((r) => r.reason === 'cancelled'), JSON.stringify(records.map((r) => r.reason)));
});

test('runParallel aborted before the start: no run, one done interrupted per task', async (t) => {
  const { client } = await stdioServer(t);
  const events = [];
  for await (const event of client.runParallel([
    { adapter: 'echo', prompt: 'x', role: 'a', options: { resume: 'tok' } },
    { adapter: 'echo', prompt: 'y', role: 'b', options: { abortSignal: AbortSignal.abort() } },
  ])) {
    events.push(event);
  }
  assert.deepEqual(events.map((e) => [e.role, e.type, e.payload.status]), [
    ['a', 'done', 'interrupted'],
    ['b', 'done', 'interrupted'],
  ]);
  assert.equal(events[0].payload.resumeToken, 'tok');
  assert.deepEqual(events[0].payload.usage, { toolUses: 0 });
  assert.deepEqual(await client.list(), [], 'no run was started');
});

test('runParallel: a task the server refuses ends with an error and a done error; the others go on', async (t) => {
  const { client } = await stdioServer(t);
  const events = [];
  for await (const event of client.runParallel([
    { adapter: 'no-such-adapter', prompt: 'x', role: 'unknown' },
    { adapter: 'echo', prompt: 'x', role: 'beyond', options: { grants: { env: ['PATH'] } } },
    { adapter: 'echo', prompt: 'fine', role: 'fine' },
  ])) {
    events.push(event);
  }
  for (const [role, code] of [['unknown', 'NOT_FOUND'], ['beyond', 'BOUNDARY_VIOLATION']]) {
    const mine = ofRole(events, role);
    assert.deepEqual(mine.map((e) => e.type), ['error', 'done'], role);
    assert.equal(mine[0].payload.code, code);
    assert.equal(mine[0].payload.recoverable, false);
    assert.ok(mine[0].payload.message.length > 0);
    assert.equal(mine[1].payload.status, 'error');
    assert.equal(mine[0].sessionId, mine[1].sessionId);
  }
  assert.equal(ofRole(events, 'fine').at(-1).payload.result, 'fine');
});

test('leaving a runParallel loop early cancels every run', async (t) => {
  const { client } = await stdioServer(t);
  for await (const event of client.runParallel([
    { adapter: COOPERATIVE, prompt: 'go', role: 'a' },
    { adapter: COOPERATIVE, prompt: 'go', role: 'b' },
  ])) {
    assert.equal(event.type, 'text_delta');
    break;
  }
  // Both runs were started (the second one perhaps after the loop was left).
  let records = [];
  for (let i = 0; i < 200 && records.length < 2; i++) {
    records = await client.list();
    if (records.length < 2) await sleep(10);
  }
  assert.equal(records.length, 2);
  for (const { id } of records) {
    await assert.rejects(client.awaitRun(id), (e) => isMoatError(e, 'RUN_FAILED'));
    assert.equal((await client.get(id)).reason, 'cancelled');
  }
});

test('runParallel ends with CONNECTION_CLOSED when the server dies', async (t) => {
  const unhandled = noUnhandledRejections(t);
  const { client } = await stdioServer(t);
  const stream = client.runParallel([
    { adapter: COOPERATIVE, prompt: 'go', role: 'a' },
    { adapter: COOPERATIVE, prompt: 'go', role: 'b' },
  ]);
  assert.equal((await stream.next()).value.type, 'text_delta');
  client.process.kill('SIGKILL');
  await assert.rejects(async () => {
    for await (const _event of stream);
  }, (e) => isMoatError(e, 'CONNECTION_CLOSED'));
  await sleep(50);
  assert.deepEqual(unhandled, []);
});

test("isAgentEvent is cligent's guard", async (t) => {
  const { client } = await stdioServer(t);
  for await (const event of client.runAgent('echo', 'hi')) {
    assert.equal(isAgentEvent(event), true, JSON.stringify(event));
  }
  const event = { type: 'x:y', agent: 'a', timestamp: 1, sessionId: 's', payload: null };
  assert.equal(isAgentEvent(event), true);
  assert.equal(isAgentEvent({ ...event, role: 'r', metadata: {} }), true);
  for (const value of [null, undefined, 'init', 1, [], {}]) {
    assert.equal(isAgentEvent(value), false, String(value));
  }
  const { payload: _payload, ...noPayload } = event;
  assert.equal(isAgentEvent(noPayload), false);
  assert.equal(isAgentEvent({ ...event, timestamp: '1' }), false);
  assert.equal(isAgentEvent({ ...event, sessionId: undefined }), false);
  assert.equal(isAgentEvent({ ...event, agent: 7 }), false);
});
