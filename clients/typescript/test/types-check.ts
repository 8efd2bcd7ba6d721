// Compiled with `tsc --noEmit` by `npm test`: the shipped types, as a
// consumer (and a cligent port) uses them. Never run.
import {
  MoatClient,
  MoatError,
  isMoatError,
  runAgent,
  type AgentEvent,
  type EngineResult,
  type EventStream,
  type Grants,
  type MoatErrorCode,
  type RunOptions,
  type RunRecord,
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
  const record: RunRecord = await client.get(id);
  const records: RunRecord[] = await client.list({ status: ['completed'], adapter: 'echo', parent: id, limit: 1 });
  const raw: unknown = await client.request('get', { run: 7 });
  await client.cancel(id);
  void [results, status, record, records, raw];

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
        break;
      case 'init':
        event.payload.tools satisfies string[];
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
  for await (const event of client.runAgent('echo', 'hi', { model: 'm', grants })) {
    if (event.type === 'text') event.payload.content satisfies string;
  }

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

  await client.shutdown();
  await client.close();
  await socketClient.close();
}
