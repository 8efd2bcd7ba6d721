// Compiled with `tsc --noEmit` by `npm test`: the shipped types, as a
// consumer (and a cligent port) uses them. Never run.
import {
  MoatClient,
  MoatError,
  isAgentEvent,
  isMoatError,
  runAgent,
  runParallel,
  type AgentEvent,
  type Approval,
  type Ask,
  type CligentEvent,
  type MoatPermissionRequestPayload,
  type PermissionAnswerPayload,
  type PermissionDecision,
  type PermissionHandler,
  type PermissionRequest,
  type RunStatus,
  type DoneUsage,
  type EngineResult,
  type ParallelTask,
  type EventStream,
  type DiffOptions,
  type Grants,
  type MoatErrorCode,
  type RunOptions,
  type RunRecord,
  type Workspace,
  type WorkflowRunOptions,
  type WorkflowState,
  type WorkflowStatus,
  type WorkflowStatusResult,
  type WorkflowTaskState,
} from '../dist/index.js';

export async function consumer(): Promise<void> {
  const client = await MoatClient.spawn({ bin: 'moat', args: ['--allow-env', 'HOME'], env: { MOAT_STORE: '/tmp/x.db' } });
  const socketClient = await MoatClient.connect('/tmp/moat.sock');

  const grants: Grants = { env: ['HOME'], read: ['/tmp'] };
  const options: RunOptions = { model: 'm', maxTurns: 3, allowedTools: [], mcpServers: {} };
  const id: string = await client.run('echo', 'hi', { options, grants, trust: 'sandbox', limits: { timeoutMs: 1000 } });
  const results: Record<string, EngineResult> = await client.await([id]);
  const result: EngineResult = await client.awaitRun(id);
  const status: 'success' | 'error' | 'interrupted' | 'max_turns' | 'max_budget' = result.status;
  // The result's usage is the done's; duration, turns and the run's id beside it.
  result.usage satisfies DoneUsage;
  result.usage.tokens?.coverage satisfies 'complete' | 'partial' | undefined;
  result.durationMs satisfies number | undefined;
  result.turns satisfies number | undefined;
  result.runId satisfies string | undefined;
  const record: RunRecord = await client.get(id);
  const records: RunRecord[] = await client.list({ status: ['completed'], adapter: 'echo', parent: id, limit: 1 });
  const raw: unknown = await client.request('get', { run: 7 });
  await client.cancel(id);
  void [results, status, record, records, raw];

  // A run on a workspace of its project; what it changed, then into the project.
  const workspace: Workspace = { mode: 'worktree', base: 'HEAD', includeDirty: false };
  const inWorkspace = await client.run('echo', 'hi', { options: { cwd: '/repo' }, grants: { write: ['/repo'] }, workspace });
  const stat: DiffOptions = { stat: true };
  (await client.diff(inWorkspace)) satisfies string;
  (await client.diff(inWorkspace, stat)) satisfies string;
  try {
    (await client.apply(inWorkspace)) satisfies boolean;
    (await client.apply(inWorkspace, { includeProtected: true })) satisfies boolean;
  } catch (error) {
    // Its changes do not apply to the project as it is now; nothing was changed.
    if (isMoatError(error, 'CONFLICT')) error.message satisfies string;
  }

  // A workflow file run by the server: its record's id (null with runs on a cluster), its state.
  const how: WorkflowRunOptions = { resume: true, force: true, maxParallel: 2 };
  const workflowRun: string | null = await client.workflowRun('/repo/flow.toml', how);
  await client.workflowRun('/repo/flow.toml');
  await client.workflowRun('/repo/flow.toml', { fresh: true });
  if (workflowRun !== null) {
    (await client.await([workflowRun]))[workflowRun] satisfies EngineResult | undefined;
    for (const task of await client.list({ parent: workflowRun })) task.role satisfies string | null | undefined;
  }
  const report: WorkflowStatusResult = await client.workflowStatus('/repo/flow.toml');
  report.workflow satisfies string;
  const state: WorkflowState | null = report.state;
  if (state) {
    const workflowStatus: WorkflowStatus = state.status;
    const task: WorkflowTaskState | undefined = state.tasks['a'];
    task?.status satisfies 'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED' | undefined;
    task?.usage.toolUses satisfies number | undefined;
    state.runs satisfies string[];
    void workflowStatus;
  }
  // @ts-expect-error: maxParallel is a number
  await client.workflowRun('/repo/flow.toml', { maxParallel: '2' });
  // @ts-expect-error: no such option
  await client.workflowRun('/repo/flow.toml', { restart: true });

  // The event union narrows on `type`.
  const stream: EventStream = client.events(id, { fromSeq: 0 });
  for await (const event of stream) {
    switch (event.type) {
      case 'text_delta':
        event.payload.delta satisfies string;
        break;
      case 'tool_use':
        event.payload.toolName satisfies string;
        event.payload.input satisfies Record<string, unknown>;
        break;
      case 'done':
        event.payload.status satisfies typeof status;
        event.payload.usage.toolUses satisfies number;
        event.payload.usage.tokens?.totals.input.total satisfies number | undefined;
        event.payload.usage.tokens?.records?.[0]?.tokens.output.reasoning satisfies number | undefined;
        event.payload.usage.cost?.amount satisfies number | undefined;
        event.payload.usage.cost?.source satisfies 'provider-reported' | 'agent-estimate' | 'account-estimate' | undefined;
        event.metadata?.turns satisfies number | undefined;
        break;
      case 'init':
        event.payload.tools satisfies string[];
        event.payload.model satisfies string;
        event.payload.cwd satisfies string;
        event.metadata?.runId satisfies string | undefined;
        event.metadata?.containment satisfies string | undefined;
        break;
      default:
        event.type satisfies string;
    }
  }

  // cligent's loop: `runAgent(agent, prompt, options, registry)` → client.
  const controller = new AbortController();
  for await (const event of runAgent('echo', 'hi', { abortSignal: controller.signal, cwd: '/tmp' }, client)) {
    event satisfies AgentEvent;
  }
  for await (const event of client.runAgent('echo', 'hi', { cwd: '/repo', grants, workspace: { mode: 'copy' } })) {
    event satisfies AgentEvent;
  }
  for await (const event of client.runAgent('echo', 'hi', { model: 'm', grants })) {
    if (event.type === 'text') event.payload.content satisfies string;
  }

  // cligent's runParallel: tasks with roles, one stream; the client last.
  const tasks: ParallelTask[] = [
    { adapter: 'echo', prompt: 'a', role: 'writer', options: { model: 'm', abortSignal: controller.signal } },
    { adapter: 'echo', prompt: 'b', options: { options: { cwd: '/tmp' }, grants: { read: ['/tmp'] } } },
    { adapter: 'echo', prompt: 'c', options: { cwd: '/repo', grants: { write: ['/repo'] }, workspace: { mode: 'worktree' } } },
  ];
  for await (const event of runParallel(tasks, client)) {
    event satisfies CligentEvent;
    event.role satisfies string | undefined;
  }
  for await (const event of client.runParallel([{ adapter: 'echo', prompt: 'c', role: 'r' }])) {
    if (event.type === 'done') event.payload.durationMs satisfies number;
  }

  // Approvals: a run that asks, answered by a handler (canUseTool's shape) or by the API.
  const ask: Ask = { timeoutMs: 60_000 };
  const asking = await client.run('escape.wasm', 'http GET http://127.0.0.1:8765/', { grants: { net: [] }, ask });
  const handler: PermissionHandler = async (runId, request, { signal }) => {
    runId satisfies string;
    request satisfies PermissionRequest;
    request.requestId satisfies string;
    request.number satisfies number;
    request.kind satisfies 'tool' | 'net' | 'run' | 'read' | 'write' | 'secret';
    request.toolName satisfies string;
    request.input satisfies Record<string, unknown>;
    request.reason satisfies string | undefined;
    signal satisfies AbortSignal;
    if (request.kind === 'net') return { behavior: 'allow', always: true };
    if (request.kind === 'tool') return undefined; // left open for someone else
    return { behavior: 'deny', message: 'not this one' };
  };
  const remove: () => void = client.onPermissionRequest(handler);
  client.onPermissionRequest((_runId, request) => (request.kind === 'net' ? { behavior: 'allow' } : { behavior: 'deny' }));
  client.onPermissionRequest(null);
  remove();
  client.on('permissionError', (error: unknown, runId: string, request: PermissionRequest) => void [error, runId, request]);
  for await (const event of client.runAgent('escape.wasm', 'x', { grants: { net: [] }, onPermissionRequest: handler })) {
    if (event.type === 'permission_request') {
      (event.payload as MoatPermissionRequestPayload).requestId satisfies string | undefined;
    }
    if (event.type === 'moat:permission_answer') {
      (event.payload as PermissionAnswerPayload).decision satisfies 'approved' | 'approved always' | 'denied';
    }
  }
  for await (const event of runParallel([{ adapter: 'escape.wasm', prompt: 'x', options: { ask: {}, onPermissionRequest: handler } }], client)) {
    event satisfies AgentEvent;
  }
  const open: Approval[] = await client.approvals(asking);
  const first = open[0]!;
  first.answer?.approved satisfies boolean | undefined;
  first.request.port satisfies number | undefined;
  const approved: Approval = await client.approve(asking, { request: first.number, always: true });
  await client.approve(asking, { request: '1' });
  await client.approve(asking);
  const denied: Approval = await client.deny(asking, { request: 2, reason: 'no' });
  denied.answer satisfies { approved: boolean; always: boolean; reason?: string; by: string; atMs: number } | null;
  const waiting: RunStatus = 'waiting';
  (await client.get(asking)).requests satisfies Approval[] | undefined;
  await client.list({ status: [waiting] });
  const allow: PermissionDecision = { behavior: 'allow' };
  void [approved, allow];
  // @ts-expect-error: a decision allows or denies
  const maybe: PermissionDecision = { behavior: 'ask' };
  // @ts-expect-error: ask has no such field
  await client.run('echo', 'x', { ask: { forever: true } });
  void maybe;

  // cligent's guard.
  const value: unknown = JSON.parse('{}');
  if (isAgentEvent(value)) value satisfies AgentEvent;

  try {
    await client.awaitRun(id);
  } catch (error) {
    if (isMoatError(error, 'RUN_FAILED')) {
      const code: MoatErrorCode = error.code;
      error.results satisfies Record<string, EngineResult> | undefined;
      void code;
    }
    if (error instanceof MoatError) error.data satisfies unknown;
  }

  // @ts-expect-error: trust is one of three words
  await client.run('echo', 'x', { trust: 'full' });
  // @ts-expect-error: grants has no such kind
  await client.run('echo', 'x', { grants: { disk: ['/'] } });
  // @ts-expect-error: a workspace is a worktree or a copy
  await client.run('echo', 'x', { workspace: { mode: 'branch' } });
  // @ts-expect-error: a workspace says its mode
  await client.run('echo', 'x', { workspace: { base: 'HEAD' } });
  // @ts-expect-error: a cost is {amount, currency, source} in cligent's words, not moat's earlier {usd, source}
  const oldCost: DoneUsage = { toolUses: 0, cost: { usd: 1, source: 'vendor' } };
  // @ts-expect-error: tokens are {coverage, totals: {input, output}}
  const oldTokens: DoneUsage = { toolUses: 0, tokens: { coverage: 'complete', input: { total: 1 }, output: { total: 1 } } };
  // @ts-expect-error: the result's usage has no flat figures any more
  const oldResult: EngineResult = { status: 'success', usage: { toolUses: 0, inputTokens: 1 } };
  void [oldCost, oldTokens, oldResult];

  await client.shutdown();
  await client.close();
  await socketClient.close();
}
