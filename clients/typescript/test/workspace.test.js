// Runs on workspaces of a project (docs/workspaces.md): `run` with
// `workspace`, then `diff` and `apply`, against the real `moat serve` and a
// real git repository.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { isMoatError } from '../dist/index.js';
import { stdioServer, tempDir } from './helpers.js';

/** A git repository with one committed file, `notes.txt`; its path. */
function gitRepo(t) {
  const repo = join(tempDir(t), 'project');
  mkdirSync(repo);
  const git = (...args) =>
    execFileSync('git', ['-c', 'user.name=moat', '-c', 'user.email=moat@example.com', '-c', 'commit.gpgsign=false', ...args], {
      cwd: repo,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  git('init', '-q');
  writeFileSync(join(repo, 'notes.txt'), 'one\n');
  git('add', 'notes.txt');
  git('commit', '-q', '-m', 'init');
  return repo;
}

/** A server that may write `repo`, making workspaces in a directory of the test's. */
async function workspaceServer(t, repo) {
  const workspaces = tempDir(t);
  const { client } = await stdioServer(t, [`--allow-write=${repo}`, `--workspace-dir=${workspaces}`]);
  return { client, workspaces };
}

test('a run on a worktree: diff shows what it changed, apply puts it in the project once', async (t) => {
  const repo = gitRepo(t);
  const { client, workspaces } = await workspaceServer(t, repo);
  const id = await client.run('echo', 'hello', {
    options: { cwd: repo },
    grants: { write: [repo] },
    workspace: { mode: 'worktree' },
  });
  assert.equal((await client.awaitRun(id)).status, 'success');

  // The run worked in its workspace, and may write only it.
  const record = await client.get(id);
  const workspace = record.options.cwd;
  assert.notEqual(workspace, repo);
  assert.ok(workspace.startsWith(workspaces), `${workspace} is under ${workspaces}`);
  assert.deepEqual(record.grants.write, [workspace]);
  assert.equal(await client.diff(id), '', 'echo changed nothing');

  // What an agent would do there.
  writeFileSync(join(workspace, 'notes.txt'), 'one\ntwo\n');
  const diff = await client.diff(id);
  assert.match(diff, /^diff --git a\/notes\.txt b\/notes\.txt$/m);
  assert.match(diff, /^\+two$/m);
  const stat = await client.diff(id, { stat: true });
  assert.match(stat, /1 file changed/);
  assert.doesNotMatch(stat, /^\+two$/m);
  assert.equal(readFileSync(join(repo, 'notes.txt'), 'utf8'), 'one\n', 'the project is untouched until apply');

  assert.equal(await client.apply(id), true);
  assert.equal(readFileSync(join(repo, 'notes.txt'), 'utf8'), 'one\ntwo\n');

  // Applied already: its changes no longer apply, and nothing changes.
  const conflict = await client.apply(id).catch((e) => e);
  assert.ok(isMoatError(conflict, 'CONFLICT'), String(conflict));
  assert.match(conflict.message, /nothing was changed/);
  assert.equal(readFileSync(join(repo, 'notes.txt'), 'utf8'), 'one\ntwo\n');

  // A run without a workspace has nothing to diff or apply.
  const plain = await client.run('echo', 'no workspace');
  await client.awaitRun(plain);
  await assert.rejects(client.diff(plain), (e) => isMoatError(e, 'NOT_FOUND'));
  await assert.rejects(client.diff(plain, { stat: true }), (e) => isMoatError(e, 'NOT_FOUND'));
  await assert.rejects(client.apply(plain), (e) => isMoatError(e, 'NOT_FOUND'));
});

test('runAgent and runParallel pass workspace with the run options', async (t) => {
  const repo = gitRepo(t);
  const { client, workspaces } = await workspaceServer(t, repo);

  // runAgent: flat options beside the request's fields.
  let init;
  for await (const event of client.runAgent('echo', 'hi', { cwd: repo, grants: { write: [repo] }, workspace: { mode: 'copy' } })) {
    if (event.type === 'init') init = event;
  }
  const agentRun = init.metadata.runId;
  const agentRecord = await client.get(agentRun);
  assert.ok(agentRecord.options.cwd.startsWith(workspaces), agentRecord.options.cwd);
  assert.equal(Object.hasOwn(agentRecord.options, 'workspace'), false, 'not sent as a run option');
  assert.equal(await client.diff(agentRun), '');

  // runParallel: each task a workspace of its own.
  const tasks = ['a', 'b'].map((role) => ({
    adapter: 'echo',
    prompt: role,
    role,
    options: { options: { cwd: repo }, grants: { write: [repo] }, workspace: { mode: 'worktree', base: 'HEAD' } },
  }));
  const runs = new Set();
  for await (const event of client.runParallel(tasks)) {
    assert.notEqual(event.type, 'error', JSON.stringify(event));
    if (event.type === 'init') runs.add(event.metadata.runId);
  }
  assert.equal(runs.size, 2);
  const cwds = new Set();
  for (const run of runs) {
    const { options } = await client.get(run);
    assert.ok(options.cwd.startsWith(workspaces), options.cwd);
    cwds.add(options.cwd);
    assert.equal(await client.diff(run), '');
  }
  assert.equal(cwds.size, 2, 'a workspace per task');
});
