// Event streams: replay then live, each event once and in order, across
// lags; early exits unsubscribe; runAgent's abort.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

import { isMoatError } from '../dist/index.js';
import { BIN, COOPERATIVE, FLOOD, sleep, stdioServer } from './helpers.js';

/** Reads `stream` to its end, checking seqs; the events. */
async function drain(stream, firstSeq = 0, onEvent = () => {}) {
  const events = [];
  for await (const event of stream) {
    assert.equal(stream.seq, firstSeq + events.length, 'seq order, no gap, no duplicate');
    events.push(event);
    onEvent(event, events.length);
  }
  return events;
}

test('events of a flood of 100000 come whole and in order across a lag', async (t) => {
  const { client, store } = await stdioServer(t);
  const raw = { lagged: 0, runEvents: 0 };
  client.on('event', (message) => {
    if (message.event === 'lagged') raw.lagged += 1;
    else raw.runEvents += 1;
  });
  // More than the server queues for one client (8 MiB): however it
  // batches the events, the queue fills.
  const id = await client.run(FLOOD, '100000');
  const stream = client.events(id);
  const events = await drain(stream, 0, (_event, count) => {
    if (count === 1) {
      // Stop reading until the run has ended (this blocks the event loop):
      // the server's queue for this client overflows and it says `lagged`.
      execFileSync(BIN, ['wait', id], { env: { ...process.env, MOAT_STORE: store }, timeout: 30_000 });
    }
  });
  assert.equal(events.length, 100001);
  assert.equal(events.filter((e) => e.type === 'text_delta').length, 100000);
  assert.equal(events.at(-1).type, 'done');
  assert.equal(events.at(-1).payload.status, 'success');
  assert.equal(events.filter((e) => e.type === 'done').length, 1);
  assert.ok(raw.lagged >= 1, `the server said lagged (${raw.lagged})`);
  assert.equal(stream.lags, raw.lagged);
  assert.ok(stream.resubscriptions >= 1);
  // After the end, the iterator stays ended.
  assert.deepEqual(await stream.next(), { value: undefined, done: true });
});

test('a consumer slower than its buffer still gets every event once', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run(FLOOD, '5000');
  // A small buffer: the client drops and renews its subscription itself.
  const stream = client.events(id, { highWaterMark: 200 });
  const events = await drain(stream, 0, async (_event, count) => {
    if (count % 500 === 0) await sleep(20);
  });
  assert.equal(events.length, 5001);
  assert.equal(events.filter((e) => e.type === 'text_delta').length, 5000);
  assert.equal(events.at(-1).type, 'done');
});

test('events from a seq after the end: the stored rest', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run('echo', 'hello');
  await client.awaitRun(id);
  const all = await drain(client.events(id));
  assert.deepEqual(
    all.map((e) => e.type),
    ['init', 'text_delta', 'text', 'done'],
  );
  const rest = await drain(client.events(id, { fromSeq: 2 }), 2);
  assert.deepEqual(rest, all.slice(2));
});

test('breaking out of events() unsubscribes', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run(COOPERATIVE, 'go');
  let delivered = 0;
  client.on('event', (message) => {
    if (message.run === id) delivered += 1;
  });
  const stream = client.events(id);
  let taken = 0;
  for await (const event of stream) {
    assert.equal(event.type, 'text_delta');
    if (++taken === 3) break;
  }
  // The unsubscribe is answered when the loop has left: after a pause, no
  // more events come (the run emits one every 5 ms).
  await sleep(100);
  const after = delivered;
  await sleep(300);
  assert.equal(delivered, after, 'no events after the unsubscribe');
  assert.deepEqual(await stream.next(), { value: undefined, done: true });
  await client.cancel(id);
});

test('events of an unknown run fail with NOT_FOUND', async (t) => {
  const { client } = await stdioServer(t);
  await assert.rejects(async () => {
    for await (const _event of client.events('r_nosuchrun')) {
      assert.fail('no event');
    }
  }, (e) => isMoatError(e, 'NOT_FOUND'));
});

test('runAgent: an abort after the first event ends the stream with done interrupted', async (t) => {
  const { client } = await stdioServer(t);
  const controller = new AbortController();
  const events = [];
  for await (const event of client.runAgent(COOPERATIVE, 'go', { abortSignal: controller.signal })) {
    events.push(event);
    if (events.length === 1) controller.abort();
  }
  assert.ok(events.length >= 2, `${events.length} events`);
  const done = events.at(-1);
  assert.equal(done.type, 'done');
  assert.equal(done.payload.status, 'interrupted');
  assert.equal(events.filter((e) => e.type === 'done').length, 1);
  const [record] = await client.list({ limit: 1 });
  assert.equal(record.adapter, 'cooperative');
  assert.equal(record.reason, 'cancelled');

  // Aborted before the start: no run, one done interrupted (as cligent).
  const before = await client.list();
  const aborted = [];
  for await (const event of client.runAgent('echo', 'x', { abortSignal: AbortSignal.abort() })) {
    aborted.push(event);
  }
  assert.equal(aborted.length, 1);
  assert.equal(aborted[0].type, 'done');
  assert.equal(aborted[0].payload.status, 'interrupted');
  assert.equal((await client.list()).length, before.length, 'no run was started');
});

test('leaving a runAgent loop early cancels its run', async (t) => {
  const { client } = await stdioServer(t);
  let id;
  for await (const event of client.runAgent(COOPERATIVE, 'go')) {
    assert.equal(event.type, 'text_delta');
    break;
  }
  [{ id }] = await client.list({ limit: 1 });
  await assert.rejects(client.awaitRun(id), (e) => isMoatError(e, 'RUN_FAILED'));
  assert.equal((await client.get(id)).reason, 'cancelled');
});
