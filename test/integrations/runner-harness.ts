/**
 * @module What the AI SDK and langchaingo adapter tests share: one real
 * sidecar and one real receiver per file, the hooks each scenario registers
 * on its own operation before the runner starts, a runner child process
 * (`canonical.mjs`, `cmd/canonical`), and the payloads each event should have
 * in the canonical run (the spec's field sets, with the fields the adapters
 * fill from their configuration).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type AddressInfo, createServer, connect as dial, type Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { type Client, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  type Hook,
  HookSchema,
  ModifyPoint,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import {
  type ReceivedRequest,
  type Receiver,
  refusedUrl,
  startReceiver,
} from '../support/receiver.js';
import { killSidecar, REPO_ROOT, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const execFileAsync = promisify(execFile);

/** What a blocked call's model input holds: the control's deny reason. */
export const DENY_REASON = 'Weather lookups are not allowed here.';
/** What the local handler's mock answers (the runners' `--scenario mock`). */
export const MOCK_CONTENT = 'mocked weather';
/** The city the argument-rewriting hook puts in place of the model's. */
export const REWRITTEN_CITY = 'Lyon';
/** What the redacting transformContext hook puts in place of the city. */
export const REDACTED = '[city]';
/** What the `beforeToolCall` modifying hook of the `content` scenario answers in the tool's place. */
export const MODIFY_CONTENT = 'answered by a modifying hook';

/** The AI SDK adapter as `npm run build:integrations` emits it. */
export const AI_SDK_DIST = join(
  REPO_ROOT,
  'integrations',
  'ts',
  'dist',
  'integrations',
  'ts',
  'src',
  'index.js',
);

/**
 * Builds the AI SDK adapter when it was not built (`npm test` and
 * `scripts/test-all.sh` build it first; a lone `npx vitest run` after
 * `npm run build` may not have).
 */
export async function ensureAiSdkBuilt(): Promise<void> {
  if (existsSync(AI_SDK_DIST)) return;
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await execFileAsync(process.execPath, [tsc, '-p', join(REPO_ROOT, 'integrations', 'ts')], {
    timeout: 120_000,
  });
}

/** The events the canonical run produces, one notification hook each. */
export const EVENT_TYPES: readonly [HookType, string][] = [
  [HookType.BEFORE_STEP, 'beforeStep'],
  [HookType.AFTER_STEP, 'afterStep'],
  [HookType.BEFORE_TOOL_CALL, 'beforeToolCall'],
  [HookType.AFTER_TOOL_CALL, 'afterToolCall'],
  [HookType.ON_TOOL_CALL_ERROR, 'onToolCallError'],
  [HookType.ON_COMPLETE, 'onComplete'],
  [HookType.ON_ERROR, 'onError'],
];

/** The scenarios: which hooks the operation has, and which runner mode runs it. */
export type Scenario =
  | 'canonical'
  | 'deny'
  | 'allow'
  | 'mock'
  | 'rewrite'
  | 'redact'
  | 'blocked'
  | 'payload'
  | 'stop'
  /** A local handler's mock, and an afterToolCall control that denies every result. */
  | 'mock-denied'
  /** A beforeToolCall modifying hook that answers content, and a beforeToolCall control that denies. */
  | 'content-denied'
  /** A transformContext hook that must answer (onError: block) and fails at the second step. */
  | 'context-blocked'
  /** A transformContext hook served by the runner's local handler. */
  | 'context-handler';

/** The output limit the beforeProviderPayload hook sets on the provider call. */
export const PAYLOAD_MAX_OUTPUT_TOKENS = 42;

/** One file's sidecar and receiver. */
export interface Harness {
  readonly sidecar: SidecarProcess;
  readonly receiver: Receiver;
  readonly client: Client<typeof HookService>;
  /** Registers the scenario's hooks on `operationId`. */
  register(operationId: string, scenario: Scenario): Promise<void>;
  /** The requests the receiver got for `operationId`, in arrival order. */
  requests(operationId: string): ReceivedRequest[];
  close(): Promise<void>;
}

/** Answers the receiver's routes: `/<op>/events`, `deny`, `allow`, `rewrite`, `redact`, `fail`, `fail-later`, `payload`, `stop`. */
function answer(req: ReceivedRequest): { status: number; json?: unknown } {
  const route = req.path.split('/').pop();
  switch (route) {
    case 'deny':
      return { status: 200, json: { decision: 'deny', reason: DENY_REASON } };
    case 'allow':
      return { status: 200, json: { decision: 'allow' } };
    case 'rewrite':
      return { status: 200, json: { args: { city: REWRITTEN_CITY } } };
    case 'content':
      return { status: 200, json: { content: MODIFY_CONTENT } };
    case 'fail':
      return { status: 503 };
    case 'fail-later':
      // Answers the first step's context, and fails from the second on.
      return (req.json as { iteration?: number }).iteration === 1
        ? { status: 200, json: {} }
        : { status: 503 };
    case 'payload': {
      const { payload } = req.json as { payload: Record<string, unknown> };
      return {
        status: 200,
        json: { payload: { ...payload, maxOutputTokens: PAYLOAD_MAX_OUTPUT_TOKENS } },
      };
    }
    case 'stop':
      return { status: 200, json: { stop: true } };
    case 'redact': {
      const { messages } = req.json as { messages: unknown[] };
      return {
        status: 200,
        json: { messages: JSON.parse(JSON.stringify(messages).replaceAll('Paris', REDACTED)) },
      };
    }
    default:
      return { status: 204 };
  }
}

export async function startHarness(): Promise<Harness> {
  const receiver = await startReceiver();
  receiver.respond((req, res) => {
    const { status, json } = answer(req);
    if (json === undefined) {
      res.writeHead(status);
      res.end();
      return;
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(json));
  });
  const sidecar = await startSidecar({ http: false });
  const client = createClient(
    HookService,
    createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
  );

  const register = async (operationId: string, scenario: Scenario) => {
    const url = (route: string) => `${receiver.url}/${operationId}/${route}`;
    const hooks: Hook[] = EVENT_TYPES.map(([type, name]) =>
      create(HookSchema, { id: `events-${name}`, type, webhook: { url: url('events') } }),
    );
    if (scenario === 'deny' || scenario === 'allow') {
      hooks.push(
        create(HookSchema, {
          id: `control-${scenario}`,
          type: HookType.BEFORE_TOOL_CALL,
          matcher: '^weather/get_weather$',
          webhook: { url: url(scenario), responseHandling: ResponseHandling.TOOL_CALL },
        }),
      );
    } else if (scenario === 'mock' || scenario === 'mock-denied') {
      hooks.push(
        create(HookSchema, {
          id: 'mock-weather',
          type: HookType.BEFORE_TOOL_CALL,
          matcher: '^weather/get_weather$',
          handler: true,
        }),
      );
      if (scenario === 'mock-denied') {
        hooks.push(
          create(HookSchema, {
            id: 'control-result-deny',
            type: HookType.AFTER_TOOL_CALL,
            matcher: '^weather/get_weather$',
            webhook: { url: url('deny'), responseHandling: ResponseHandling.TOOL_CALL },
          }),
        );
      }
    } else if (scenario === 'content-denied') {
      hooks.push(
        create(HookSchema, {
          id: 'answer-in-place',
          point: ModifyPoint.BEFORE_TOOL_CALL,
          plugin: 'adapters',
          webhook: { url: url('content') },
        }),
        create(HookSchema, {
          id: 'control-deny',
          type: HookType.BEFORE_TOOL_CALL,
          matcher: '^weather/get_weather$',
          webhook: { url: url('deny'), responseHandling: ResponseHandling.TOOL_CALL },
        }),
      );
    } else if (scenario === 'rewrite') {
      hooks.push(
        create(HookSchema, {
          id: 'rewrite-city',
          point: ModifyPoint.BEFORE_TOOL_CALL,
          plugin: 'adapters',
          webhook: { url: url('rewrite') },
        }),
      );
    } else if (scenario === 'blocked') {
      // A policy hook that must answer (onError: block) and fails: Modify answers `blocked`.
      hooks.push(
        create(HookSchema, {
          id: 'policy-down',
          point: ModifyPoint.BEFORE_TOOL_CALL,
          plugin: 'adapters',
          webhook: { url: url('fail'), onError: OnError.BLOCK },
        }),
      );
    } else if (scenario === 'context-blocked') {
      hooks.push(
        create(HookSchema, {
          id: 'context-policy-down',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          plugin: 'adapters',
          webhook: { url: url('fail-later'), onError: OnError.BLOCK },
        }),
      );
    } else if (scenario === 'payload' || scenario === 'stop') {
      const point =
        scenario === 'payload'
          ? ModifyPoint.BEFORE_PROVIDER_PAYLOAD
          : ModifyPoint.SHOULD_STOP_AFTER_TURN;
      hooks.push(
        create(HookSchema, {
          id: scenario,
          point,
          plugin: 'adapters',
          webhook: { url: url(scenario) },
        }),
      );
    } else if (scenario === 'context-handler') {
      hooks.push(
        create(HookSchema, {
          id: 'context-handler',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          plugin: 'adapters',
          handler: true,
        }),
      );
    } else if (scenario === 'redact') {
      hooks.push(
        create(HookSchema, {
          id: 'redact-city',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          plugin: 'adapters',
          webhook: { url: url('redact') },
        }),
      );
    }
    await client.registerHooks({ operationId, hooks }, { timeoutMs: 10_000 });
  };

  return {
    sidecar,
    receiver,
    client,
    register,
    requests: (operationId) =>
      receiver.requests.filter((r) => r.path.startsWith(`/${operationId}/`)),
    close: async () => {
      await killSidecar(sidecar);
      await receiver.close();
    },
  };
}

/** What a runner printed and how it exited. */
export interface RunnerExit {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The last stdout line, parsed, when it is JSON. */
  readonly line: RunnerLine | undefined;
}

/** The runner's JSON line (`toolArgs` and `modelInputs` with `--trace`). */
export interface RunnerLine {
  /** The run's error (with `--trace`, when it failed). */
  readonly error?: string;
  readonly final: string;
  readonly toolRuns: number;
  readonly toolArgs?: unknown[];
  readonly modelInputs?: unknown[];
  /** The output limit of each model call (the AI SDK runner, with `--trace`). */
  readonly maxOutputTokens?: (number | null)[];
}

/** Runs a runner command to its end (bounded by a timeout). */
export async function runRunner(
  file: string,
  args: readonly string[],
  cwd: string,
  env: Readonly<Record<string, string>> = {},
): Promise<RunnerExit> {
  try {
    const { stdout, stderr } = await execFileAsync(file, [...args], {
      cwd,
      timeout: 20_000,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr, line: parseLine(stdout) };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    const stdout = err.stdout ?? '';
    return {
      code: typeof err.code === 'number' ? err.code : -1,
      stdout,
      stderr: err.stderr ?? String(e),
      line: parseLine(stdout),
    };
  }
}

/**
 * Runs a runner started with `--pause-after-attach`: once it printed that its
 * Handle stream is attached, runs `whilePaused`, then lets it go on (a line on
 * its stdin) and waits for its exit.
 */
export async function runPausedRunner(
  file: string,
  args: readonly string[],
  cwd: string,
  whilePaused: () => Promise<void>,
): Promise<RunnerExit> {
  const child = spawn(file, [...args], { cwd, env: process.env, stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  let attached: () => void = () => {};
  const isAttached = new Promise<void>((resolve) => {
    attached = resolve;
  });
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.includes('{"attached":true}')) attached();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  try {
    await Promise.race([
      isAttached,
      exited.then(() => {
        throw new Error(`the runner exited before it attached: ${stderr}`);
      }),
    ]);
    await whilePaused();
    child.stdin.end('go\n');
    const code = await exited;
    return { code, stdout, stderr, line: parseLine(stdout) };
  } finally {
    clearTimeout(timer);
    child.kill('SIGKILL');
  }
}

/** A TCP proxy to a sidecar's gRPC port whose `cut()` drops every connection it carries. */
export interface CuttingProxy {
  /** `host:port` to give a runner as its target. */
  readonly target: string;
  /** Destroys every connection through the proxy (new ones are proxied as before). */
  cut(): void;
  close(): Promise<void>;
}

/** Starts a {@link CuttingProxy} to `target` (`host:port`). */
export async function cuttingProxy(target: string): Promise<CuttingProxy> {
  const [host, port] = [
    target.slice(0, target.lastIndexOf(':')),
    target.slice(target.lastIndexOf(':') + 1),
  ];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = dial(Number(port), host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.pipe(to);
      from.on('error', () => undefined);
      from.on('close', () => {
        to.destroy();
        sockets.delete(from);
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    target: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseLine(stdout: string): RunnerLine | undefined {
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(last) as RunnerLine;
  } catch {
    return undefined;
  }
}

/** The ids every event carries, from the runner's configuration. */
function ids(operationId: string) {
  return { agentId: 'agent-1', operationId, userId: 'user-1' };
}

/** The tool-call context of the canonical run's one call (the mapping table's fields). */
export function toolContext(operationId: string, args: Record<string, unknown>) {
  return {
    toolCallId: 'call_weather_1',
    assistantMessageId: `${operationId}:assistant:0`,
    identifier: 'weather',
    apiName: 'get_weather',
    args,
    callIndex: 0,
    stepIndex: 0,
    operationId,
    executor: 'server',
    agentId: 'agent-1',
    userId: 'user-1',
  };
}

/**
 * The payloads of the canonical run's awaited events, in the order the
 * receiver gets them: the step events and afterToolCall are awaited
 * (Dispatch) and onComplete too (CompleteOperation). `result` is the tool
 * result the model saw.
 */
export function awaitedPayloads(
  operationId: string,
  result: { content: string; success: boolean },
  options: { args?: Record<string, unknown>; mocked?: boolean } = {},
): Record<string, unknown>[] {
  const args = options.args ?? { city: 'Paris' };
  return [
    {
      ...ids(operationId),
      stepIndex: 0,
      steps: 0,
      hookId: 'events-beforeStep',
      hookType: 'beforeStep',
    },
    {
      ...toolContext(operationId, args),
      mocked: options.mocked ?? false,
      result,
      hookId: 'events-afterToolCall',
      hookType: 'afterToolCall',
    },
    {
      ...ids(operationId),
      stepIndex: 0,
      steps: 1,
      toolCalls: 1,
      totalToolCalls: 1,
      hookId: 'events-afterStep',
      hookType: 'afterStep',
    },
    {
      ...ids(operationId),
      stepIndex: 1,
      steps: 1,
      hookId: 'events-beforeStep',
      hookType: 'beforeStep',
    },
    {
      ...ids(operationId),
      stepIndex: 1,
      steps: 2,
      content: 'It is sunny in Paris.',
      toolCalls: 0,
      totalToolCalls: 1,
      hookId: 'events-afterStep',
      hookType: 'afterStep',
    },
    {
      ...ids(operationId),
      reason: 'done',
      status: 'done',
      steps: 2,
      toolCalls: 1,
      errorMessage: '',
      lastAssistantContent: 'It is sunny in Paris.',
      hookId: 'events-onComplete',
      hookType: 'onComplete',
    },
  ];
}

/**
 * The receiver's notifications of one operation, split into the awaited
 * events (in order) and the beforeToolCall notifications, which
 * DecideToolCall starts without waiting for them (their place in the order
 * is not fixed).
 */
export function notifications(requests: readonly ReceivedRequest[]): {
  awaited: unknown[];
  beforeToolCall: unknown[];
} {
  const events = requests.filter((r) => r.path.endsWith('/events')).map((r) => r.json);
  const isBefore = (p: unknown) => (p as { hookType?: string }).hookType === 'beforeToolCall';
  return {
    awaited: events.filter((p) => !isBefore(p)),
    beforeToolCall: events.filter(isBefore),
  };
}

/** Polls `condition` every 20 ms until it holds, or fails after `ms`. */
export async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How a test file starts its framework's runner. */
export interface RunnerCommand {
  /** The executable: node, or the built Go runner. */
  readonly file: string;
  /** Arguments before the runner's own (the script's path for node). */
  readonly prefix: readonly string[];
  readonly cwd: string;
}

/**
 * The scenarios every adapter must show (issue #21), as `it` blocks in the
 * caller's `describe`: deny, allow, a local handler's mock, an argument
 * rewrite, a transformContext redaction, the canonical run's payloads in
 * order, a blocked modifying hook, and a sidecar that is down. Each uses its
 * own operation, `op-<prefix>-<scenario>`.
 */
export function adapterScenarios(
  prefix: string,
  context: () => { harness: Harness; runner: RunnerCommand },
): { run: (operationId: string, scenario: Scenario) => Promise<RunnerLine | undefined> } {
  const start = (args: readonly string[]) => {
    const { runner } = context();
    return runRunner(runner.file, [...runner.prefix, ...args], runner.cwd);
  };
  const run = async (operationId: string, scenario: Scenario) => {
    const { harness } = context();
    await harness.register(operationId, scenario);
    const mode = scenario === 'mock' || scenario === 'mock-denied' ? 'mock' : 'canonical';
    const target = harness.sidecar.grpc;
    const exit = await start([
      '--target',
      target,
      '--operation-id',
      operationId,
      '--trace',
      '--scenario',
      mode,
    ]);
    expect(exit.stderr).toBe('');
    expect(exit.code).toBe(0);
    return exit.line;
  };

  it('runs the canonical scenario and sends each event with the spec fields, in order', async () => {
    const { harness } = context();
    const op = `op-${prefix}-canonical`;
    const line = await run(op, 'canonical');
    expect(line).toMatchObject({ final: 'It is sunny in Paris.', toolRuns: 1 });
    await until(() => harness.requests(op).length === 7, 'seven notifications');
    const { awaited, beforeToolCall } = notifications(harness.requests(op));
    expect(awaited).toEqual(awaitedPayloads(op, { content: 'sunny in Paris', success: true }));
    expect(beforeToolCall).toEqual([
      {
        ...toolContext(op, { city: 'Paris' }),
        hookId: 'events-beforeToolCall',
        hookType: 'beforeToolCall',
      },
    ]);
  });

  it('a denying control: the tool never runs and the model gets the blocked result', async () => {
    const line = await run(`op-${prefix}-deny`, 'deny');
    expect(line?.toolRuns).toBe(0);
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain(DENY_REASON);
  });

  it('an allowing control: the tool runs once with the original arguments', async () => {
    const line = await run(`op-${prefix}-allow`, 'allow');
    expect(line).toMatchObject({ toolRuns: 1, toolArgs: [{ city: 'Paris' }] });
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain('sunny in Paris');
  });

  it("a local handler's mock: the tool never runs and the mock is its result", async () => {
    const op = `op-${prefix}-mock`;
    const line = await run(op, 'mock');
    expect(line?.toolRuns).toBe(0);
    expect(JSON.stringify(line?.modelInputs?.[1])).toContain(MOCK_CONTENT);
    const { awaited } = notifications(context().harness.requests(op));
    expect(awaited[1]).toMatchObject({ mocked: true, result: { content: MOCK_CONTENT } });
  });

  it("a local handler's mock goes through the result controls: a denying one replaces it", async () => {
    const op = `op-${prefix}-mock-denied`;
    const line = await run(op, 'mock-denied');
    expect(line?.toolRuns).toBe(0);
    const seen = JSON.stringify(line?.modelInputs?.[1]);
    expect(seen).toContain(DENY_REASON);
    expect(seen).not.toContain(MOCK_CONTENT);
    const { awaited } = notifications(context().harness.requests(op));
    expect(awaited[1]).toMatchObject({
      hookType: 'afterToolCall',
      mocked: true,
      result: { content: DENY_REASON, success: false },
    });
  });

  it("a beforeToolCall modifying hook's answer still goes through the controls: a deny wins", async () => {
    const { harness } = context();
    const op = `op-${prefix}-content-denied`;
    const line = await run(op, 'content-denied');
    expect(line?.toolRuns).toBe(0);
    const seen = JSON.stringify(line?.modelInputs?.[1]);
    expect(seen).toContain(DENY_REASON);
    expect(seen).not.toContain(MODIFY_CONTENT);
    // DecideToolCall ran: its control was asked.
    const routes = harness.requests(op).map((r) => r.path.split('/').pop());
    expect(routes.filter((r) => r === 'deny')).toHaveLength(1);
  });

  it('the Handle stream breaks during the run: the run fails and the tool does not run', async () => {
    const { harness, runner } = context();
    const op = `op-${prefix}-handle-cut`;
    await harness.register(op, 'mock');
    const proxy = await cuttingProxy(harness.sidecar.grpc);
    try {
      const exit = await runPausedRunner(
        runner.file,
        [
          ...runner.prefix,
          '--target',
          proxy.target,
          '--operation-id',
          op,
          '--trace',
          '--scenario',
          'mock',
          '--pause-after-attach',
        ],
        runner.cwd,
        async () => {
          proxy.cut();
          // Go on once the sidecar dropped the handler: its calls would now skip it.
          const deadline = Date.now() + 10_000;
          let attached = true;
          while (attached) {
            if (Date.now() > deadline) throw new Error('the sidecar kept the handler attached');
            ({ handlerAttached: attached } = await harness.client.listHooks({ operationId: op }));
          }
        },
      );
      expect(exit.code).not.toBe(0);
      expect(exit.stderr.toLowerCase()).toContain('handle stream failed');
      // Without its handler the mock would be skipped and the tool would run.
      expect(exit.line).toMatchObject({ toolRuns: 0 });
    } finally {
      await proxy.close();
    }
  });

  it('a handler lost while the sidecar waits for its reply: the run fails, the tool does not run', async () => {
    // The handler's mock is larger than the sidecar takes: it ends the Handle
    // stream, and the pending call fails handler_detached. The decision then
    // allows; the adapter must read that from the answer, whenever the
    // stream's end reaches it.
    const { runner } = context();
    const small = await startSidecar({ http: false, args: ['--max-message-bytes', '65536'] });
    try {
      const op = `op-${prefix}-handler-lost`;
      const client = createClient(
        HookService,
        createGrpcTransport({ baseUrl: `http://${small.grpc}` }),
      );
      await client.registerHooks({
        operationId: op,
        hooks: [
          create(HookSchema, {
            id: 'mock-weather',
            type: HookType.BEFORE_TOOL_CALL,
            matcher: '^weather/get_weather$',
            handler: true,
          }),
        ],
      });
      const exit = await runRunner(
        runner.file,
        [
          ...runner.prefix,
          '--target',
          small.grpc,
          '--operation-id',
          op,
          '--trace',
          '--scenario',
          'mock',
          '--mock-bytes',
          '100000',
        ],
        runner.cwd,
      );
      expect(exit.code).not.toBe(0);
      expect(exit.stderr.toLowerCase()).toContain('handle stream failed');
      expect(exit.line).toMatchObject({ toolRuns: 0 });
    } finally {
      await killSidecar(small);
    }
  });

  it('a beforeToolCall modifying hook rewrites the argument the tool gets', async () => {
    const line = await run(`op-${prefix}-rewrite`, 'rewrite');
    expect(line).toMatchObject({ toolRuns: 1, toolArgs: [{ city: REWRITTEN_CITY }] });
  });

  it('a transformContext hook redacts: the model never sees the original text', async () => {
    const line = await run(`op-${prefix}-redact`, 'redact');
    expect(line?.toolRuns).toBe(1);
    const seen = JSON.stringify(line?.modelInputs);
    expect(seen).toContain(REDACTED);
    expect(seen).not.toContain('Paris');
  });

  it('a modifying hook that must answer fails: the tool does not run, the run fails', async () => {
    const { harness } = context();
    const op = `op-${prefix}-blocked`;
    await harness.register(op, 'blocked');
    const exit = await start(['--target', harness.sidecar.grpc, '--operation-id', op, '--trace']);
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toContain('agenthooks: Modify beforeToolCall blocked by hook policy-down');
    expect(exit.line).toMatchObject({ toolRuns: 0 });
    const hookType = (r: ReceivedRequest) => (r.json as { hookType?: string }).hookType;
    await until(() => harness.requests(op).some((r) => hookType(r) === 'onError'), 'onError');
    const { awaited } = notifications(harness.requests(op));
    expect(awaited.slice(-2)).toMatchObject([
      { hookType: 'onComplete', reason: 'error', status: 'error', operationId: op },
      { hookType: 'onError', reason: 'error', status: 'error', operationId: op },
    ]);
    expect((awaited.at(-1) as { errorMessage: string }).errorMessage).toContain('policy-down');
  });

  it('refuses a run without a user id before anything runs: its events would be refused', async () => {
    const { harness } = context();
    const op = `op-${prefix}-no-user`;
    await harness.register(op, 'canonical');
    const exit = await start([
      '--target',
      harness.sidecar.grpc,
      '--operation-id',
      op,
      '--user-id',
      '',
    ]);
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toMatch(/agenthooks: (?:userId|Config\.UserID) is required/);
    expect(harness.requests(op)).toEqual([]);
  });

  it('sidecar down: the tool does not run and the run fails naming agenthooks', async () => {
    const down = new URL(await refusedUrl()).host;
    const exit = await start(['--target', down, '--operation-id', `op-${prefix}-down`, '--trace']);
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toMatch(/agenthooks: Dispatch beforeStep/);
    expect(exit.line).toMatchObject({ toolRuns: 0 });
  });

  return { run };
}
