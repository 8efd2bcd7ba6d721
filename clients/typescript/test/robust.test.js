// A server that dies: pending requests reject, iterators end with an error,
// nothing is left unhandled.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MAX_REQUEST_BYTES, MoatClient, isMoatError } from '../dist/index.js';
import { COOPERATIVE, noUnhandledRejections, sleep, stdioServer } from './helpers.js';

test('a killed server rejects pending requests and ends streams with an error', async (t) => {
  const unhandled = noUnhandledRejections(t);
  const { client } = await stdioServer(t);
  const id = await client.run(COOPERATIVE, 'go');
  const stream = client.events(id);
  assert.equal((await stream.next()).value.type, 'text_delta');
  const agent = client.runAgent(COOPERATIVE, 'go');
  assert.equal((await agent.next()).value.type, 'text_delta');
  const waiting = client.awaitRun(id);
  // Requests nobody awaits yet, and events nobody reads.
  const ignored = client.awaitRun(id);

  client.process.kill('SIGKILL');

  await assert.rejects(waiting, (e) => isMoatError(e, 'CONNECTION_CLOSED') && /SIGKILL/.test(e.message));
  await assert.rejects(async () => {
    for await (const _event of stream);
  }, (e) => isMoatError(e, 'CONNECTION_CLOSED'));
  await assert.rejects(async () => {
    for await (const _event of agent);
  }, (e) => isMoatError(e, 'CONNECTION_CLOSED'));
  await assert.rejects(ignored, (e) => isMoatError(e, 'CONNECTION_CLOSED'));
  // Later requests fail at once.
  await assert.rejects(client.list(), (e) => isMoatError(e, 'CONNECTION_CLOSED'));
  assert.equal((await client.exited).signal, 'SIGKILL');
  await client.close(); // still fine
  await sleep(50);
  assert.deepEqual(unhandled, []);
});

test('a missing binary fails to spawn with a clear error', async () => {
  await assert.rejects(
    MoatClient.spawn({ bin: '/nonexistent/moat' }),
    (e) => isMoatError(e, 'CONNECTION_CLOSED') && /nonexistent/.test(e.message),
  );
});

test('a request line over the limit is refused before it is sent', async (t) => {
  const { client } = await stdioServer(t);
  await assert.rejects(
    client.run('echo', 'x'.repeat(MAX_REQUEST_BYTES)),
    (e) => isMoatError(e, 'INVALID_REQUEST'),
  );
  assert.equal((await client.awaitRun(await client.run('echo', 'ok'))).text, 'ok');
});
