// A socket server with several clients; shutdown and close end servers.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { MoatClient, isMoatError } from '../dist/index.js';
import { COOPERATIVE, socketServer, stdioServer } from './helpers.js';

test('a socket server serves two clients at once', async (t) => {
  const server = await socketServer(t);
  const one = await MoatClient.connect(server.socket);
  const two = await MoatClient.connect(server.socket);
  t.after(() => Promise.all([one.close(), two.close()]));

  const long = await one.run(COOPERATIVE, 'go');
  const stream = one.events(long);
  const first = await stream.next();
  assert.equal(first.value.type, 'text_delta');
  const waiting = one.awaitRun(long);
  waiting.catch(() => {});

  // The other client is not held up by the first's await, and sees its runs.
  const short = await two.run('echo', 'two');
  assert.equal((await two.awaitRun(short)).text, 'two');
  assert.equal((await two.get(long)).adapter, 'cooperative');
  assert.equal((await one.get(short)).adapter, 'echo');

  await two.cancel(long);
  await assert.rejects(waiting, (e) => isMoatError(e, 'RUN_FAILED'));
  let last;
  for await (const event of stream) last = event;
  assert.equal(last.type, 'done');
  assert.equal(last.payload.status, 'interrupted');

  // Shutdown from one: the server exits 0, both connections end, the socket goes.
  await one.shutdown();
  assert.deepEqual(await server.exited, { code: 0, signal: null });
  assert.equal((await two.closed).code, 'CONNECTION_CLOSED');
  assert.equal(existsSync(server.socket), false);
  await assert.rejects(two.list(), (e) => isMoatError(e, 'CONNECTION_CLOSED'));
});

test('connecting to no server fails with CONNECTION_CLOSED', async (t) => {
  await assert.rejects(MoatClient.connect('/nonexistent/moat.sock'), (e) => isMoatError(e, 'CONNECTION_CLOSED'));
});

test('shutdown ends live runs with done interrupted and the child exits 0', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run(COOPERATIVE, 'go');
  const stream = client.events(id);
  assert.equal((await stream.next()).value.type, 'text_delta');
  await client.shutdown();
  let last;
  for await (const event of stream) last = event;
  assert.equal(last.type, 'done');
  assert.equal(last.payload.status, 'interrupted');
  assert.deepEqual(await client.exited, { code: 0, signal: null });
  assert.equal(client.process.exitCode, 0);
  assert.equal((await client.closed).code, 'CONNECTION_CLOSED');
  assert.equal(client.isClosed, true);
});

test('close ends the child: stdin closes, the server exits 0', async (t) => {
  const { client } = await stdioServer(t);
  const id = await client.run(COOPERATIVE, 'go');
  const waiting = client.awaitRun(id).catch((e) => e);
  await client.close();
  const error = await waiting;
  assert.ok(isMoatError(error, 'CONNECTION_CLOSED') && /client was closed/.test(error.message), String(error));
  assert.deepEqual(await client.exited, { code: 0, signal: null });
  await assert.rejects(client.get(id), (e) => isMoatError(e, 'CONNECTION_CLOSED'));
});
