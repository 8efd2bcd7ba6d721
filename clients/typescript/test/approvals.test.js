// Approvals against the real `moat serve`: a run started with `ask` that
// reaches for a host its grants do not cover waits for an answer, which a
// permission handler, another client or the API gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MoatClient, isMoatError } from '../dist/index.js';
import { ESCAPE, eventually, loopbackServer, noUnhandledRejections, sleep, socketServer, stdioServer } from './helpers.js';

/** The escape component's probe of `url`. */
const probe = (url) => `http GET ${url}`;

/** The events of a run, to its done. */
async function eventsOf(client, id, options = {}) {
  const events = [];
  for await (const event of client.events(id, options)) events.push(event);
  return events;
}

test('a permission request arrives at the client callback, the client approves, the run completes', async (t) => {
  const loopback = await loopbackServer(t);
  const { client } = await stdioServer(t, [`--allow-net=127.0.0.1:${loopback.port}`]);
  const asked = [];
  client.onPermissionRequest(async (runId, request, context) => {
    asked.push({ runId, request, signal: context.signal });
    return { behavior: 'allow' };
  });

  const id = await client.run(ESCAPE, probe(loopback.url), { grants: { net: [] }, ask: {} });
  const events = await eventsOf(client, id);

  assert.equal(asked.length, 1, 'the handler is called once');
  const [{ runId, request }] = asked;
  assert.equal(runId, id);
  assert.equal(request.requestId, '1');
  assert.equal(request.number, 1);
  assert.equal(request.kind, 'net');
  assert.equal(request.toolName, 'moat:net');
  assert.deepEqual(request.input, { host: '127.0.0.1', port: loopback.port });
  assert.match(request.reason, /not granted/);
  assert.equal(request.event.type, 'permission_request');

  const types = events.map((e) => e.type);
  assert.ok(types.indexOf('permission_request') < types.indexOf('moat:permission_answer'), types.join(' '));
  const answer = events.find((e) => e.type === 'moat:permission_answer').payload;
  assert.equal(answer.requestId, '1');
  assert.equal(answer.decision, 'approved');
  assert.equal(answer.approved, true);
  assert.match(answer.by, /a client of moat serve/);
  assert.equal(asked[0].signal.aborted, true, 'once the run ended, an answer is no longer wanted');

  const result = await client.awaitRun(id);
  assert.equal(result.status, 'success');
  assert.equal(result.text, 'ok: 200 hello from loopback');
  assert.equal(loopback.hits, 1, 'the loopback server got the request');
  const record = await client.get(id);
  assert.equal(record.status, 'completed');
  assert.equal(record.requests.length, 1);
  assert.equal(record.requests[0].answer.approved, true);
  assert.equal(record.requests[0].request.port, loopback.port);
});

test('kill the approving client while waiting, another client answers', async (t) => {
  const loopback = await loopbackServer(t);
  const server = await socketServer(t, [`--allow-net=127.0.0.1:${loopback.port}`]);
  const a = await MoatClient.connect(server.socket);
  const b = await MoatClient.connect(server.socket);
  t.after(() => Promise.all([a.close(), b.close()]));

  // A follows the run, and its handler never answers.
  let seen;
  a.onPermissionRequest((runId, request, context) => {
    seen = { runId, request, signal: context.signal };
    return new Promise(() => {});
  });
  const id = await a.run(ESCAPE, probe(loopback.url), { grants: { net: [] }, ask: {} });
  const following = eventsOf(a, id).catch((error) => error);
  await eventually(() => seen !== undefined, 10_000, "A's handler");
  assert.equal(seen.request.kind, 'net');

  // A goes away as a killed client does: its socket dropped, not closed politely.
  await a.close({ timeoutMs: 50 });
  assert.ok(isMoatError(await following, 'CONNECTION_CLOSED'));
  assert.equal(seen.signal.aborted, true, "A's handler is told its answer is no longer wanted");

  // The run goes on waiting in the server; B sees the open request and approves it.
  assert.equal((await b.get(id)).status, 'waiting');
  const [open] = await b.approvals(id);
  assert.equal(open.number, 1);
  assert.equal(open.request.kind, 'net');
  assert.equal(open.request.host, '127.0.0.1');
  assert.equal(open.request.port, loopback.port);
  assert.equal(open.answer, null);
  const approved = await b.approve(id); // the run's only open request
  assert.equal(approved.number, 1);
  assert.equal(approved.answer.approved, true);
  assert.equal(approved.answer.always, false);

  const result = await b.awaitRun(id);
  assert.equal(result.status, 'success');
  assert.equal(result.text, 'ok: 200 hello from loopback');
  assert.equal(loopback.hits, 1);

  // Answered once: again is INVALID_REQUEST (the run has ended too); an unknown run is NOT_FOUND.
  await assert.rejects(b.approve(id, { request: 1 }), (e) => isMoatError(e, 'INVALID_REQUEST'));
  await assert.rejects(b.deny('r_00000000000000000000000000'), (e) => isMoatError(e, 'NOT_FOUND'));
  // A late follower's handler is never asked about a request answered already.
  const late = await MoatClient.connect(server.socket);
  t.after(() => late.close());
  let lateCalls = 0;
  late.onPermissionRequest(() => {
    lateCalls += 1;
    return { behavior: 'deny' };
  });
  const replayed = await eventsOf(late, id, { fromSeq: 0 });
  assert.ok(replayed.some((e) => e.type === 'permission_request'), 'the stored request replays');
  await sleep(100);
  assert.equal(lateCalls, 0);
});

test('deny with a reason through the callback: the run reports the denial, the record keeps the reason', async (t) => {
  const loopback = await loopbackServer(t);
  const { client } = await stdioServer(t, [`--allow-net=127.0.0.1:${loopback.port}`]);
  const events = [];
  // runAgent's own handler: `ask` is implied.
  for await (const event of client.runAgent(ESCAPE, probe(loopback.url), {
    grants: { net: [] },
    onPermissionRequest: (_runId, request) => {
      assert.equal(request.kind, 'net');
      return { behavior: 'deny', message: 'not this host' };
    },
  })) {
    events.push(event);
  }
  const [{ id }] = await client.list({ limit: 1 });
  const answer = events.find((e) => e.type === 'moat:permission_answer').payload;
  assert.equal(answer.decision, 'denied');
  assert.equal(answer.reason, 'not this host');
  // The adapter's request was refused, the error saying who denied it and why.
  const denied = events.find((e) => e.type === 'error');
  assert.equal(denied?.payload.code, 'CAPABILITY_DENIED');
  assert.match(denied.payload.message, /denied by a client of moat serve .*: not this host/);
  const text = events.find((e) => e.type === 'text').payload.content;
  assert.match(text, /^denied: /);
  assert.equal(loopback.hits, 0, 'nothing reached the loopback server');

  const record = await client.get(id);
  assert.match(record.result.text, /^denied: /);
  assert.equal(record.requests.length, 1);
  assert.equal(record.requests[0].answer.approved, false);
  assert.equal(record.requests[0].answer.reason, 'not this host');
});

test('an answer that comes second is dropped without an error; a throwing handler denies', async (t) => {
  const unhandled = noUnhandledRejections(t);
  const loopback = await loopbackServer(t);
  const server = await socketServer(t, [`--allow-net=127.0.0.1:${loopback.port}`]);
  const slow = await MoatClient.connect(server.socket);
  const fast = await MoatClient.connect(server.socket);
  t.after(() => Promise.all([slow.close(), fast.close()]));
  const errors = [];
  slow.on('permissionError', (error) => errors.push(error));
  fast.on('permissionError', (error) => errors.push(error));

  // Both follow the run; the fast one answers first, the slow one's answer comes too late.
  let slowSignal;
  slow.onPermissionRequest(async (_runId, _request, { signal }) => {
    slowSignal = signal;
    await eventually(() => signal.aborted, 10_000, 'the answer of the fast client');
    return { behavior: 'deny', message: 'too late' };
  });
  fast.onPermissionRequest(async () => {
    await eventually(() => slowSignal !== undefined, 10_000, "the slow client's handler");
    return { behavior: 'allow', always: true };
  });
  const id = await slow.run(ESCAPE, probe(loopback.url), { grants: { net: [] }, ask: {} });
  const [slowEvents, fastEvents] = await Promise.all([eventsOf(slow, id), eventsOf(fast, id)]);
  assert.equal(slowSignal?.aborted, true);
  for (const events of [slowEvents, fastEvents]) {
    assert.equal(events.find((e) => e.type === 'moat:permission_answer').payload.decision, 'approved always');
  }
  assert.equal((await fast.awaitRun(id)).text, 'ok: 200 hello from loopback');

  // A handler that throws: the request is denied, the error reported.
  fast.onPermissionRequest(() => {
    throw new Error('no UI here');
  });
  const second = await fast.run(ESCAPE, probe(loopback.url), { grants: { net: [] }, ask: {} });
  const events = await eventsOf(fast, second);
  assert.match(events.find((e) => e.type === 'moat:permission_answer').payload.reason, /handler failed: no UI here/);
  assert.equal(errors.length, 1, String(errors));
  assert.match(errors[0].message, /no UI here/);
  await sleep(50);
  assert.deepEqual(unhandled, []);
});

test('runParallel tasks answer their own requests', async (t) => {
  const loopback = await loopbackServer(t);
  const { client } = await stdioServer(t, [`--allow-net=127.0.0.1:${loopback.port}`]);
  const allowed = [];
  const texts = {};
  for await (const event of client.runParallel([
    {
      adapter: ESCAPE,
      prompt: probe(loopback.url),
      role: 'writer',
      options: {
        grants: { net: [] },
        onPermissionRequest: (runId) => {
          allowed.push(runId);
          return { behavior: 'allow' };
        },
      },
    },
    {
      adapter: ESCAPE,
      prompt: probe(loopback.url),
      role: 'reviewer',
      options: { grants: { net: [] }, onPermissionRequest: async () => ({ behavior: 'deny', message: 'not for the reviewer' }) },
    },
  ])) {
    if (event.type === 'text') texts[event.role] = event.payload.content;
  }
  assert.equal(texts.writer, 'ok: 200 hello from loopback');
  assert.match(texts.reviewer, /^denied: /);
  assert.equal(allowed.length, 1);
  assert.equal((await client.get(allowed[0])).requests[0].answer.approved, true);
  assert.equal(loopback.hits, 1);
});
