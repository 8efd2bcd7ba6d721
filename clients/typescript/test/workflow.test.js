// Workflow files run by the server (docs/workflows.md): `workflowRun`
// starts one — its own record, its tasks' runs its children, its state file
// in its project — and `workflowStatus` reads its state, against the real
// `moat serve`.
import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

import { isMoatError } from '../dist/index.js';
import { COOPERATIVE, eventually, stdioServer, tempDir } from './helpers.js';

/** Two echo tasks, `b` after `a`. */
const TWO = `name = "two"
[[task]]
id = "a"
adapter = "echo"
prompt = "first"
[[task]]
id = "b"
adapter = "echo"
prompt = "second"
depends_on = ["a"]
`;

/** `text` as `name` in a fresh project directory; its absolute path. */
function workflowFile(t, text, name = 'flow.toml') {
  const file = join(tempDir(t), name);
  writeFileSync(file, text);
  return file;
}

/** The roles of a run's children, sorted, each child completed. */
async function childRoles(client, run) {
  const children = await client.list({ parent: run });
  for (const child of children) {
    assert.equal(child.status, 'completed', JSON.stringify(child));
    assert.equal(child.parent, run);
  }
  return children.map((child) => child.role).sort();
}

test("a workflow runs in the server: its record, its tasks' runs its children, its state; resumed, nothing runs again", async (t) => {
  const { client } = await stdioServer(t);
  const file = workflowFile(t, TWO);
  assert.deepEqual(await client.workflowStatus(file), { workflow: 'two', state: null }, 'not run here yet');

  const run = await client.workflowRun(file, { maxParallel: 2 });
  assert.equal(typeof run, 'string');
  const results = await client.await([run]);
  assert.deepEqual(Object.keys(results), [run]);
  assert.equal(results[run].status, 'success');

  const record = await client.get(run);
  assert.equal(record.status, 'completed', JSON.stringify(record));
  assert.equal(record.adapter, 'workflow');
  assert.equal(record.options.file, file);
  assert.deepEqual(await childRoles(client, run), ['a', 'b']);

  const status = await client.workflowStatus(file);
  assert.equal(status.workflow, 'two');
  assert.equal(status.state.status, 'completed', JSON.stringify(status));
  assert.equal(status.state.tasks.a.status, 'COMPLETED');
  assert.equal(status.state.tasks.b.status, 'COMPLETED');
  assert.deepEqual(status.state.runs, [run]);

  // Resumed: a new record of the workflow, every task skipped (completed).
  const resumed = await client.workflowRun(file, { resume: true });
  assert.equal(typeof resumed, 'string');
  assert.notEqual(resumed, run);
  assert.equal((await client.awaitRun(resumed)).status, 'success');
  const again = await client.get(resumed);
  assert.equal(again.status, 'completed');
  assert.equal(again.adapter, 'workflow');
  assert.deepEqual(await client.list({ parent: resumed }), [], 'no task ran again');
  const after = await client.workflowStatus(file);
  assert.equal(after.state.status, 'completed');
  assert.deepEqual(after.state.runs, [run, resumed]);
});

test('a workflow that cannot start says why: a relative path, a mistake in the file, nothing to resume', async (t) => {
  const { client } = await stdioServer(t);
  const file = workflowFile(t, TWO);

  for (const refused of [(f) => client.workflowRun(f), (f) => client.workflowStatus(f)]) {
    const error = await refused('flow.toml').catch((e) => e);
    assert.ok(isMoatError(error, 'INVALID_REQUEST'), String(error));
    assert.match(error.message, /absolute/);
  }

  const nothing = await client.workflowRun(file, { resume: true }).catch((e) => e);
  assert.ok(isMoatError(nothing, 'NOT_FOUND'), String(nothing));
  assert.equal((await client.workflowStatus(file)).state, null, 'a refused resume leaves no state');

  const both = await client.workflowRun(file, { resume: true, fresh: true }).catch((e) => e);
  assert.ok(isMoatError(both, 'INVALID_REQUEST'), String(both));

  // The file's line, as `moat workflow validate` says it.
  const broken = workflowFile(t, '[[task]]\nid = "a"\nadapter = "echo"\npromt = "hi"\n', 'broken.toml');
  for (const refused of [(f) => client.workflowRun(f), (f) => client.workflowStatus(f)]) {
    const error = await refused(broken).catch((e) => e);
    assert.ok(isMoatError(error, 'INVALID_REQUEST'), String(error));
    assert.match(error.message, /broken\.toml:4/);
  }

  // Not a number of tasks: refused before it is sent.
  for (const maxParallel of [0, 1.5]) {
    const error = await client.workflowRun(file, { maxParallel }).catch((e) => e);
    assert.ok(isMoatError(error, 'INVALID_REQUEST'), String(error));
  }
  assert.equal((await client.workflowStatus(file)).state, null, 'nothing ran');
});

test("cancel of a workflow's record stops it; started again it is refused until resumed or started fresh", async (t) => {
  const { client } = await stdioServer(t);
  const file = workflowFile(t, TWO.replace('adapter = "echo"\nprompt = "second"', 'adapter = "cooperative.wasm"\nprompt = "go"'));
  // A task's component is a path inside the project.
  copyFileSync(COOPERATIVE, join(dirname(file), 'cooperative.wasm'));

  const run = await client.workflowRun(file);
  await eventually(
    async () => (await client.workflowStatus(file)).state?.tasks.b.status === 'RUNNING',
    20_000,
    'task b running',
  );
  await client.cancel(run);
  const failed = await client.awaitRun(run).catch((e) => e);
  assert.ok(isMoatError(failed, 'RUN_FAILED'), String(failed));
  assert.equal(failed.results[run].status, 'interrupted');
  const record = await client.get(run);
  assert.equal(record.status, 'failed');
  assert.equal(record.reason, 'cancelled');
  const cancelled = await client.workflowStatus(file);
  assert.equal(cancelled.state.status, 'cancelled');
  assert.equal(cancelled.state.tasks.a.status, 'COMPLETED');
  assert.notEqual(cancelled.state.tasks.b.status, 'COMPLETED');

  // It did not finish: a plain start is refused, pointing at resume.
  const unfinished = await client.workflowRun(file).catch((e) => e);
  assert.ok(isMoatError(unfinished, 'CONFLICT'), String(unfinished));
  assert.match(unfinished.message, /"resume": true/);

  // The file changed since: a resume needs force.
  appendFileSync(file, '\n# changed\n');
  const changed = await client.workflowRun(file, { resume: true }).catch((e) => e);
  assert.ok(isMoatError(changed, 'CONFLICT'), String(changed));
  assert.match(changed.message, /"force": true/);

  // Forced: a goes on completed, b runs again, as the new record's only child.
  const resumed = await client.workflowRun(file, { resume: true, force: true });
  assert.notEqual(resumed, run);
  let children = [];
  await eventually(
    async () => (children = await client.list({ parent: resumed })).length > 0,
    20_000,
    'a task of the resumed workflow',
  );
  assert.deepEqual(children.map((child) => child.role), ['b']);
  const going = (await client.workflowStatus(file)).state;
  assert.equal(going.status, 'running');
  assert.deepEqual(going.runs, [run, resumed]);
  assert.equal(going.tasks.a.status, 'COMPLETED');
  await client.cancel(resumed);
  await assert.rejects(client.awaitRun(resumed), (e) => isMoatError(e, 'RUN_FAILED'));

  // Fresh: started over, every task again.
  const fresh = await client.workflowRun(file, { fresh: true });
  await eventually(
    async () => (children = await client.list({ parent: fresh })).length === 2,
    20_000,
    'both tasks of the fresh workflow',
  );
  assert.deepEqual(children.map((child) => child.role).sort(), ['a', 'b']);
  assert.deepEqual((await client.workflowStatus(file)).state.runs, [fresh], 'a fresh state');
  await client.cancel(fresh);
  await assert.rejects(client.awaitRun(fresh), (e) => isMoatError(e, 'RUN_FAILED'));
});
