// Shared by the tests: the real `moat` binary, a server per test with a
// store of its own.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { MoatClient } from '../dist/index.js';

/** A path tests/all/clients.rs passes in (scripts/test runs it). */
function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: run this suite through scripts/test ` +
        '(or cargo test -p moat --test all clients::), which sets it',
    );
  }
  return value;
}

export const BIN = required('MOAT_BIN');
export const COOPERATIVE = required('MOAT_TEST_COOPERATIVE');
export const FLOOD = required('MOAT_TEST_FLOOD');
export const ESCAPE = required('MOAT_TEST_ESCAPE');
export const UNDERREPORTER = required('MOAT_TEST_UNDERREPORTER');

/**
 * An HTTP server on 127.0.0.1 (a free port), closed after the test,
 * answering every request with `body`; `hits` counts the requests.
 */
export async function loopbackServer(t, body = 'hello from loopback') {
  const server = createServer((request, response) => {
    served.hits += 1;
    response.writeHead(200, { 'content-type': 'text/plain' });
    response.end(body);
  });
  const served = { hits: 0, port: 0, url: '' };
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  served.port = server.address().port;
  served.url = `http://127.0.0.1:${served.port}/`;
  t.after(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return served;
}

/** A fresh directory, removed after the test. */
export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'moat-client-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The environment of a server recording into `store` (MOAT_CACHE_DIR passes through). */
export function serverEnv(store) {
  return { MOAT_STORE: store, MOAT_LOG: undefined };
}

/**
 * A client of a `moat serve` (stdio) of its own, with a fresh store; closed
 * after the test. Returns the client and the store's path.
 */
export async function stdioServer(t, args = []) {
  const dir = tempDir(t);
  const store = join(dir, 'moat.db');
  const client = await MoatClient.spawn({ bin: BIN, args, env: serverEnv(store) });
  t.after(() => client.close());
  return { client, store, dir };
}

/** A `moat serve --socket` of its own; resolves once the socket accepts. */
export async function socketServer(t, args = []) {
  const dir = tempDir(t);
  const socket = join(dir, 'moat.sock');
  const store = join(dir, 'moat.db');
  const child = spawn(BIN, ['serve', '--socket', socket, ...args], {
    env: { ...process.env, MOAT_STORE: store },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (await canConnect(socket)) break;
    if (child.exitCode !== null) throw new Error(`moat serve --socket exited: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`moat serve never listened on ${socket}: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { child, exited, socket, store, dir };
}

function canConnect(path) {
  return new Promise((resolve) => {
    const socket = createConnection(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Waits until `predicate()` holds (polled), or fails after `ms`. */
export async function eventually(predicate, ms = 10_000, what = 'a condition') {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fails the test on any unhandled rejection while it runs. */
export function noUnhandledRejections(t) {
  const seen = [];
  const onRejection = (reason) => seen.push(reason);
  process.on('unhandledRejection', onRejection);
  t.after(() => process.off('unhandledRejection', onRejection));
  return seen;
}
