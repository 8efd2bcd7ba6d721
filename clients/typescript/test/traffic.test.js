// A run's traffic against the real `moat serve`: the underreporter
// component calls a loopback OpenAI stand-in, reports a tenth of what each
// answer says it used, and `traffic` shows every call as moat metered it
// beside what the adapter reported — and never a body.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';

import { isMoatError } from '../dist/index.js';
import { UNDERREPORTER, stdioServer } from './helpers.js';

/** What the stand-in answers every POST with. */
const ANSWER = {
  id: 'x',
  model: 'gpt-test',
  choices: [{ message: { role: 'assistant', content: 'ok' } }],
  usage: { prompt_tokens: 1000, completion_tokens: 100 },
};

/** An OpenAI stand-in on 127.0.0.1 (a free port), closed after the test; `bodies` are the requests' bodies. */
async function openAiStandIn(t) {
  const served = { port: 0, bodies: [] };
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      served.bodies.push(body);
      if (request.method !== 'POST') {
        response.writeHead(405);
        response.end();
        return;
      }
      const answer = JSON.stringify(ANSWER);
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      response.end(answer);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  served.port = server.address().port;
  t.after(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return served;
}

/** The events of a run, to its done. */
async function eventsOf(client, id) {
  const events = [];
  for await (const event of client.events(id)) events.push(event);
  return events;
}

test("traffic: each model call as moat metered it, beside the adapter's under-report, without a body", async (t) => {
  const standIn = await openAiStandIn(t);
  const destination = `127.0.0.1:${standIn.port}`;
  const { client } = await stdioServer(t, [`--allow-net=${destination}`]);
  const prompt = JSON.stringify({ url: `http://${destination}/v1/chat/completions`, calls: 3, share: 0.1 });
  const id = await client.run(UNDERREPORTER, prompt, {
    grants: { net: [destination], meter: [`${destination}=openai`] },
  });
  const result = await client.awaitRun(id);
  assert.equal(result.status, 'success', JSON.stringify(result));
  assert.equal(standIn.bodies.length, 3, 'the stand-in answered three calls');
  assert.match(standIn.bodies[0], /"content":"hi"/, 'the calls carried a body');

  const traffic = await client.traffic(id);
  assert.equal(traffic.rows.length, 3, JSON.stringify(traffic.rows));
  for (const row of traffic.rows) {
    assert.equal(row.who, 'component');
    assert.equal(row.kind, 'request');
    assert.equal(row.method, 'POST');
    assert.equal(row.path, '/v1/chat/completions');
    assert.equal(row.host, '127.0.0.1');
    assert.equal(row.port, standIn.port);
    assert.equal(row.status, 200);
    assert.equal(row.vendor, 'openai');
    assert.equal(row.model, 'gpt-test');
    assert.deepEqual(row.usage, { inputTokens: 1000, outputTokens: 100 });
    assert.ok(row.sent > 0 && row.received > 0, JSON.stringify(row));
    assert.equal(row.refused, undefined);
  }
  assert.deepEqual(traffic.metered, { calls: 3, inputTokens: 3000, outputTokens: 300 });
  assert.equal(traffic.reported.inputTokens, 300);
  assert.equal(traffic.reported.outputTokens, 30);
  assert.equal(traffic.overflow, undefined, 'three rows are far under the cap');
  // Never a body, nor a header's value: not the request's, not the answer's.
  const rows = JSON.stringify(traffic.rows);
  for (const text of ['"content"', '"messages"', '"hi"', 'application/json', 'choices']) {
    assert.ok(!rows.includes(text), `a row holds ${text}: ${rows}`);
  }

  // The same rows are the run's moat:traffic events; its moat:usage events say whose count they are.
  const events = await eventsOf(client, id);
  const rowEvents = events.filter((e) => e.type === 'moat:traffic').map((e) => e.payload);
  assert.deepEqual(rowEvents, traffic.rows);
  const usage = events.filter((e) => e.type === 'moat:usage').map((e) => e.payload);
  const metered = usage.filter((u) => u.source === 'metered');
  assert.equal(metered.length, 3);
  for (const call of metered) {
    assert.equal(call.vendor, 'openai');
    assert.equal(call.destination, destination);
    assert.equal(call.model, 'gpt-test');
    assert.equal(call.inputTokens, 1000);
    assert.equal(call.outputTokens, 100);
  }
  assert.deepEqual(
    usage.filter((u) => u.source === 'reported').map((u) => u.inputTokens),
    [100, 100, 100],
  );

  // A prefix names the run; an unknown run is NOT_FOUND.
  assert.deepEqual(await client.traffic(id.slice(0, 12)), traffic);
  await assert.rejects(client.traffic('r_00000000000000000000000000'), (e) => isMoatError(e, 'NOT_FOUND'));
});

test('traffic: a refused request is a row with why, and the grant that would allow it', async (t) => {
  const standIn = await openAiStandIn(t);
  const granted = `127.0.0.1:${standIn.port}`;
  const { client } = await stdioServer(t, [`--allow-net=${granted}`]);
  // Port 1 is not granted: the component's call is refused before it leaves.
  const prompt = JSON.stringify({ url: 'http://127.0.0.1:1/v1/chat/completions', calls: 1, share: 0.1 });
  const id = await client.run(UNDERREPORTER, prompt, {
    grants: { net: [granted], meter: [`${granted}=openai`] },
  });
  const events = await eventsOf(client, id);
  assert.equal(events.at(-1).type, 'done');
  const codes = events.filter((e) => e.type === 'error').map((e) => e.payload.code);
  assert.ok(codes.includes('CAPABILITY_DENIED') && codes.includes('CALL_FAILED'), codes.join(' '));

  const traffic = await client.traffic(id);
  assert.equal(traffic.rows.length, 1, JSON.stringify(traffic.rows));
  const [row] = traffic.rows;
  assert.equal(row.who, 'component');
  assert.equal(row.method, 'POST');
  assert.equal(row.path, '/v1/chat/completions');
  assert.equal(row.host, '127.0.0.1');
  assert.equal(row.port, 1);
  assert.equal(typeof row.refused, 'string');
  assert.ok(row.refused.length > 0);
  assert.equal(row.wouldAllow, '127.0.0.1:1');
  assert.equal(row.status, undefined, 'it never left');
  assert.equal(row.allowedBy, undefined);
  assert.equal(traffic.metered.calls, 0);
  assert.equal(standIn.bodies.length, 0, 'nothing reached the stand-in');
});
