// Requests and their answers against the real `moat serve` over stdio.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MoatError, isMoatError, runAgent } from '../dist/index.js';
import { COOPERATIVE, stdioServer } from './helpers.js';

test('run returns an id at once and await gives the echo result', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run('echo', 'hello');
  assert.match(id, /^r_[0-9a-z]{26}$/);
  const results = await client.await([id]);
  assert.deepEqual(Object.keys(results), [id]);
  assert.equal(results[id].status, 'success');
  assert.equal(results[id].text, 'hello');
  assert.equal(typeof results[id].usage.toolUses, 'number');
  const result = await client.awaitRun(id);
  assert.equal(result.text, 'hello');
});

test('get and list show the records; adapters and inspect describe echo', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run('echo', 'hello', { options: { model: 'm1' } });
  await client.awaitRun(id);

  const record = await client.get(id);
  assert.equal(record.id, id);
  assert.equal(record.adapter, 'echo');
  assert.equal(record.status, 'completed');
  assert.equal(record.prompt, 'hello');
  assert.equal(record.options.model, 'm1');
  assert.equal(record.result.text, 'hello');
  assert.equal(record.done.status, 'success');
  // A unique prefix names it too.
  assert.equal((await client.get(id.slice(0, -4))).id, id);

  const other = await client.run('echo', 'two');
  await client.awaitRun(other);
  const listed = await client.list({ status: ['completed'], limit: 5 });
  assert.deepEqual(
    listed.map((r) => r.id),
    [other, id],
    'newest first',
  );
  assert.equal((await client.list({ limit: 1 })).length, 1);
  assert.deepEqual(await client.list({ status: ['running'] }), []);
  // Each record says what its run was admitted with.
  assert.equal(record.trust, 'sandbox');
  assert.ok(record.limits.maxMemoryBytes > 0);

  const adapters = await client.adapters();
  const echo = adapters.find((a) => a.name === 'echo');
  assert.ok(echo, 'echo is listed');
  assert.equal(echo.builtIn, true);
  const inspected = await client.inspect('echo');
  assert.equal(inspected.name, 'echo');
  assert.match(inspected.contract, /^moat:adapter@/);
  assert.deepEqual(inspected.allowed.env, []);
});

test("a component's children are listed by their parent", async (t) => {
  const { client } = await stdioServer(t);
  const agents = [
    { adapter: 'echo', prompt: 'one' },
    { adapter: 'echo', prompt: 'two' },
  ];
  const fanout = await client.run('fanout', 'x', { options: { extra: { agents } } });
  const result = await client.awaitRun(fanout);
  assert.equal(result.status, 'success');
  const children = await client.list({ parent: fanout });
  assert.deepEqual(children.map((r) => r.prompt).sort(), ['one', 'two']);
  assert.ok(children.every((r) => r.parent === fanout));
  assert.deepEqual((await client.list({ adapter: 'fanout' })).map((r) => r.id), [fanout]);
});

test('errors carry the protocol codes', async (t) => {
  const { client } = await stdioServer(t);

  // INVALID_REQUEST: only through the low-level request, with a bad field.
  const invalid = await client.request('get', { run: 7 }).catch((e) => e);
  assert.ok(invalid instanceof MoatError, String(invalid));
  assert.equal(invalid.code, 'INVALID_REQUEST');
  assert.match(invalid.message, /get/);
  // The connection stays usable.
  assert.deepEqual(await client.list({ limit: 1 }), []);

  // NOT_FOUND
  await assert.rejects(client.get('r_00000000000000000000000000'), (e) => isMoatError(e, 'NOT_FOUND'));
  await assert.rejects(client.run('no-such-adapter', 'x'), (e) => isMoatError(e, 'NOT_FOUND'));
  await assert.rejects(client.inspect('no-such-adapter'), (e) => isMoatError(e, 'NOT_FOUND'));

  // BOUNDARY_VIOLATION: the server was started without --allow-env.
  const beyond = await client.run('echo', 'x', { grants: { env: ['PATH'] } }).catch((e) => e);
  assert.ok(isMoatError(beyond, 'BOUNDARY_VIOLATION'), String(beyond));
  assert.match(beyond.message, /--allow-env=PATH/);
  // Asking for nothing beyond is fine.
  const narrow = await client.run('echo', 'x', { grants: { env: [] } });
  assert.deepEqual((await client.get(narrow)).grants.env, []);

  // RUN_FAILED: awaiting a cancelled run; the results come in `data`.
  const long = await client.run(COOPERATIVE, 'go');
  await client.cancel(long);
  const failed = await client.awaitRun(long).catch((e) => e);
  assert.ok(isMoatError(failed, 'RUN_FAILED'), String(failed));
  assert.equal(failed.data.results[long].status, 'interrupted');
  assert.equal(failed.results[long].status, 'interrupted');
});

test('cancel is idempotent', async (t) => {
  const { client } = await stdioServer(t);
  await client.cancel('r_nosuchrun'); // unknown: a success
  const id = await client.run(COOPERATIVE, 'go');
  const record = await client.get(id);
  assert.ok(['pending', 'running'].includes(record.status), record.status);
  assert.equal(record.result, null);
  await client.cancel(id);
  await client.cancel(id);
  await assert.rejects(client.awaitRun(id), (e) => isMoatError(e, 'RUN_FAILED'));
  const ended = await client.get(id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.reason, 'cancelled');
  assert.equal(ended.result.status, 'interrupted');
  await client.cancel(id); // ended: still a success
});

test('answers are matched by id: a long await holds up nothing else', async (t) => {
  const { client } = await stdioServer(t);
  const long = await client.run(COOPERATIVE, 'go');
  let settled = false;
  const waiting = client.awaitRun(long).finally(() => (settled = true));
  waiting.catch(() => {});
  // Requests sent after the await are answered before it.
  const [echo, listed] = await Promise.all([client.run('echo', 'x'), client.list()]);
  assert.equal((await client.awaitRun(echo)).text, 'x');
  assert.ok(listed.some((r) => r.id === long));
  assert.equal(settled, false, 'the await is still waiting');
  await client.cancel(long);
  await assert.rejects(waiting, (e) => isMoatError(e, 'RUN_FAILED'));
});

test('runAgent yields every event of a new run until done, as cligent does', async (t) => {
  const { client } = await stdioServer(t);
  const events = [];
  for await (const event of client.runAgent('echo', 'hi', { model: 'flat-model' })) {
    events.push(event);
  }
  assert.deepEqual(
    events.map((e) => e.type),
    ['init', 'text_delta', 'text', 'done'],
  );
  for (const event of events) {
    assert.equal(event.agent, 'echo');
    assert.equal(typeof event.timestamp, 'number');
    assert.equal(typeof event.sessionId, 'string');
  }
  const done = events.at(-1);
  assert.equal(done.payload.status, 'success');
  assert.equal(done.payload.result, 'hi');
  // The flat options went into the run's options.
  const [record] = await client.list({ limit: 1 });
  assert.equal(record.options.model, 'flat-model');

  // The free function takes the client where cligent takes its registry.
  const types = [];
  for await (const event of runAgent('echo', 'again', undefined, client)) {
    types.push(event.type);
  }
  assert.deepEqual(types, ['init', 'text_delta', 'text', 'done']);
});
