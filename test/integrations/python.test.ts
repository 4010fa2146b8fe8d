/**
 * @module End-to-end: the Python adapters of `integrations/python` (LangChain v1
 * middleware, OpenAI Agents SDK run hooks and tool wrapper) run their
 * framework's real agent loop, with a scripted model, against the real
 * sidecar and a real receiver. Per framework one child process of
 * `tests/canonical.py` (the runner of the cross-adapter comparison) runs every
 * scenario: the canonical run (allow), deny, a local handler's mock, an
 * argument rewrite, a redaction and the sidecar down, since the frameworks
 * import slowly. The assertions read the
 * receiver's requests and what the scripted model and the tool got.
 */
import { execFile } from 'node:child_process';
import type * as http from 'node:http';
import * as net from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyClient, hookClient, unary } from '../support/grpc-client.js';
import { type HandlerStream, openHandlerStream } from '../support/handler-client.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, REPO_ROOT, type SidecarProcess, startSidecar } from '../support/sidecar.js';

const execFileAsync = promisify(execFile);

const PYTHON = join(REPO_ROOT, '.venv', 'bin', 'python');
const RUNNER = join(REPO_ROOT, 'integrations', 'python', 'tests', 'canonical.py');
const FRAMEWORKS = ['langchain', 'openai-agents'] as const;
type Framework = (typeof FRAMEWORKS)[number];
/** The scenarios both frameworks run. */
const SHARED_SCENARIOS = [
  'canonical',
  'deny',
  'mock',
  'rewrite',
  'redact',
  'down',
  'down-closed',
  'toolerror',
  'handler',
  'result-deny',
  'async',
  'readme',
  'payload',
  'blocked',
  'no-user',
] as const;
/** LangChain only: the Agents SDK has no stop between turns, and its tools answer text. */
const LANGCHAIN_ONLY = [
  'stop',
  'result-command',
  'result-blocks',
  'result-command-extra',
  'parent-command',
  'interrupt',
] as const;
/** The Agents SDK only: tools that are not function tools, or not wrapped. */
const OPENAI_AGENTS_ONLY = [
  'ungated',
  'unwrapped',
  'handoff-object',
  'as-tool',
  'start-run',
  'name-collision',
] as const;
type Scenario =
  | (typeof SHARED_SCENARIOS)[number]
  | (typeof LANGCHAIN_ONLY)[number]
  | (typeof OPENAI_AGENTS_ONLY)[number];
/**
 * The Python processes' environment: the adapters of this checkout first on
 * the path, whichever checkout the venv's editable install points to.
 */
const PYTHON_ENV = {
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '/tmp',
  PYTHONPATH: join(REPO_ROOT, 'integrations', 'python'),
};
/** A Python process may wait this long; the frameworks take seconds to import on a busy machine. */
const RUN_TIMEOUT_MS = 60_000;

const DENY_REASON = 'Weather lookups are not allowed today.';
const RESULT_DENY_REASON = 'This forecast may not be shown.';
/** What the runner's tool raises in the `toolerror` scenario. */
const TOOL_ERROR = 'the weather service is down';
const MOCK_RESULT = 'cloudy in Paris (from the local handler)';
/** What the runner's own handler (served by the adapter) mocks in the `handler` scenario. */
const HANDLER_MOCK = "cloudy in Paris (from the runtime's own handler)";
const CARD = '4111 1111 1111 1111';
const FINAL = 'It is sunny in Paris.';
const EVENTS = [
  'HOOK_TYPE_BEFORE_STEP',
  'HOOK_TYPE_AFTER_STEP',
  'HOOK_TYPE_BEFORE_TOOL_CALL',
  'HOOK_TYPE_AFTER_TOOL_CALL',
  'HOOK_TYPE_ON_TOOL_CALL_ERROR',
  'HOOK_TYPE_ON_COMPLETE',
  'HOOK_TYPE_ON_ERROR',
];

/** One scenario's line of the runner. */
interface ScenarioLine {
  readonly scenario: Scenario;
  readonly operationId: string;
  readonly final?: string;
  readonly error?: string;
  readonly toolRuns: number;
  readonly toolArgs: Record<string, unknown>[];
  readonly modelInputs: string[];
  readonly modelSettings: Record<string, unknown>[];
}

/** What one framework's runner printed, per scenario. */
type FrameworkRuns = Map<Scenario, ScenarioLine>;

let sidecar: SidecarProcess;
let receiver: Receiver;
let client: AnyClient;
let handlers: HandlerStream;
const runs = new Map<Framework, FrameworkRuns>();

/** The JSON each receiver path answers; notifications (`/events/...`) get 204. */
function reply(req: ReceivedRequest): unknown {
  if (req.path.startsWith('/deny/')) return { decision: 'deny', reason: DENY_REASON };
  if (req.path.startsWith('/result-deny/')) return { decision: 'deny', reason: RESULT_DENY_REASON };
  if (req.path.startsWith('/rewrite/')) return { args: { city: 'Lyon' } };
  if (req.path.startsWith('/stop/')) return { stop: true };
  if (req.path.startsWith('/payload/')) return { payload: { temperature: 0.25 } };
  if (req.path.startsWith('/redact/')) {
    const messages = (req.json as { messages: { content?: unknown }[] }).messages;
    const redact = (m: { content?: unknown }) =>
      typeof m.content === 'string'
        ? Object.assign({}, m, { content: m.content.replaceAll(CARD, '[redacted]') })
        : m;
    return { messages: messages.map(redact) };
  }
  return undefined;
}

function answer(req: ReceivedRequest, res: http.ServerResponse): void {
  if (req.path.startsWith('/fail/')) {
    res.writeHead(503);
    res.end();
    return;
  }
  const json = reply(req);
  if (json === undefined) {
    res.writeHead(204);
    res.end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(json));
}

/** A port on 127.0.0.1 where nothing listens. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function register(operationId: string, hooks: Record<string, unknown>[]): Promise<void> {
  await unary(client, 'RegisterHooks', { operationId, hooks });
}

/** Notification webhooks for every event the adapters send, to `/events/<op>`. */
function notifications(op: string): Record<string, unknown>[] {
  return EVENTS.map((type) => ({
    id: `notify-${type}`,
    type,
    webhook: { url: `${receiver.url}/events/${op}` },
  }));
}

async function runPython(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(PYTHON, [RUNNER, ...args], {
    cwd: REPO_ROOT,
    timeout: RUN_TIMEOUT_MS,
    env: PYTHON_ENV,
  });
  return stdout;
}

async function runFramework(framework: Framework, downPort: number): Promise<void> {
  const base = `op-py-${framework}-${process.pid}`;
  const op = (s: Scenario) => `${base}-${s}`;
  await register(op('canonical'), notifications(op('canonical')));
  await register(op('async'), notifications(op('async')));
  // The README snippet names its own operation.
  await register(`op-readme-${framework}`, notifications(`op-readme-${framework}`));
  await register(op('deny'), [
    {
      id: 'deny-weather',
      type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
      matcher: '^weather/get_weather$',
      webhook: {
        url: `${receiver.url}/deny/${op('deny')}`,
        responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
      },
    },
    ...notifications(op('deny')),
  ]);
  await register(op('mock'), [
    { id: 'mock-weather', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true },
  ]);
  await register(op('rewrite'), [
    {
      id: 'rewrite-city',
      point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
      webhook: { url: `${receiver.url}/rewrite/${op('rewrite')}` },
    },
  ]);
  await register(op('redact'), [
    {
      id: 'redact-card',
      point: 'MODIFY_POINT_TRANSFORM_CONTEXT',
      webhook: { url: `${receiver.url}/redact/${op('redact')}`, onError: 'ON_ERROR_BLOCK' },
    },
  ]);
  // A policy hook that must answer (onError: block) and fails, inside the tool's flow.
  await register(op('blocked'), [
    {
      id: 'policy-down',
      point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
      webhook: { url: `${receiver.url}/fail/${op('blocked')}`, onError: 'ON_ERROR_BLOCK' },
    },
  ]);
  await register(op('toolerror'), notifications(op('toolerror')));
  await register(op('handler'), [
    { id: 'mock-in-runtime', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true },
    ...notifications(op('handler')),
  ]);
  await register(op('result-deny'), [
    {
      id: 'withhold-forecast',
      type: 'HOOK_TYPE_AFTER_TOOL_CALL',
      webhook: {
        url: `${receiver.url}/result-deny/${op('result-deny')}`,
        responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
      },
    },
    ...notifications(op('result-deny')),
  ]);
  for (const s of [
    'result-command',
    'result-blocks',
    'result-command-extra',
    'parent-command',
  ] as const) {
    await register(op(s), [
      {
        id: 'withhold-forecast',
        type: 'HOOK_TYPE_AFTER_TOOL_CALL',
        webhook: {
          url: `${receiver.url}/result-deny/${op(s)}`,
          responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
        },
      },
    ]);
  }
  await register(op('interrupt'), notifications(op('interrupt')));
  await register(op('stop'), [
    {
      id: 'stop-after-one',
      point: 'MODIFY_POINT_SHOULD_STOP_AFTER_TURN',
      webhook: { url: `${receiver.url}/stop/${op('stop')}` },
    },
  ]);
  await register(op('payload'), [
    {
      id: 'cool-down',
      point: 'MODIFY_POINT_BEFORE_PROVIDER_PAYLOAD',
      webhook: { url: `${receiver.url}/payload/${op('payload')}` },
    },
  ]);
  await handlers.attach([op('mock')]);
  // One process for every scenario: the frameworks take seconds to import.
  const stdout = await runPython([
    '--framework',
    framework,
    '--target',
    sidecar.grpc,
    '--operation-id',
    base,
    '--scenarios',
    [
      ...SHARED_SCENARIOS,
      ...(framework === 'langchain' ? LANGCHAIN_ONLY : OPENAI_AGENTS_ONLY),
    ].join(','),
    '--down-target',
    `127.0.0.1:${downPort}`,
  ]);
  const lines = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ScenarioLine);
  runs.set(framework, new Map(lines.map((l) => [l.scenario, l])));
}

beforeAll(async () => {
  receiver = await startReceiver({ answer });
  sidecar = await startSidecar({ http: false });
  client = hookClient(sidecar.grpc);
  handlers = openHandlerStream(client);
  handlers.answer((call) =>
    call.hookId === 'mock-weather'
      ? { mock: { result: { content: MOCK_RESULT, success: true } } }
      : { done: {} },
  );
  const downPort = await closedPort();
  await Promise.all(FRAMEWORKS.map((f) => runFramework(f, downPort)));
}, 2 * RUN_TIMEOUT_MS);

afterAll(async () => {
  handlers?.end();
  client?.close();
  await killSidecar(sidecar);
  await receiver?.close();
});

function scenario(framework: Framework, s: Scenario): ScenarioLine {
  const line = runs.get(framework)?.get(s);
  if (line === undefined) throw new Error(`no ${s} line for ${framework}`);
  return line;
}

/** The bodies the receiver got on `/<kind>/<op>`, in arrival order. */
function bodies(kind: string, op: string): Record<string, unknown>[] {
  return receiver.requests
    .filter((r) => r.path === `/${kind}/${op}`)
    .map((r) => r.json as Record<string, unknown>);
}

/** The ids a framework chooses itself (LangChain names its AIMessages), normalised. */
function normalise(payload: Record<string, unknown>, op: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...payload };
  if (
    typeof out.assistantMessageId === 'string' &&
    out.assistantMessageId !== `${op}:assistant:0`
  ) {
    out.assistantMessageId = '<framework message id>';
  }
  return out;
}

/** The events of the canonical run on `op`, as the receiver must get them: [beforeToolCall, the rest in order]. */
function expectedEvents(
  framework: Framework,
  op: string,
): [Record<string, unknown>, Record<string, unknown>[]] {
  const messageId = framework === 'langchain' ? '<framework message id>' : `${op}:assistant:0`;
  const ids = { agentId: 'agent-1', operationId: op, userId: 'user-1' };
  const tool = {
    ...ids,
    toolCallId: 'call_weather_1',
    assistantMessageId: messageId,
    identifier: 'weather',
    apiName: 'get_weather',
    args: { city: 'Paris' },
    callIndex: 0,
    stepIndex: 0,
    executor: 'server',
  };
  const hook = (type: string) => ({ hookId: `notify-HOOK_TYPE_${type}`, hookType: '' });
  const expected = [
    { ...hook('BEFORE_STEP'), hookType: 'beforeStep', ...ids, stepIndex: 0, steps: 0 },
    {
      ...hook('AFTER_TOOL_CALL'),
      hookType: 'afterToolCall',
      ...tool,
      mocked: false,
      result: { content: 'sunny in Paris', success: true },
    },
    {
      ...hook('AFTER_STEP'),
      hookType: 'afterStep',
      ...ids,
      stepIndex: 0,
      steps: 1,
      toolCalls: 1,
      totalToolCalls: 1,
    },
    { ...hook('BEFORE_STEP'), hookType: 'beforeStep', ...ids, stepIndex: 1, steps: 1 },
    {
      ...hook('AFTER_STEP'),
      hookType: 'afterStep',
      ...ids,
      stepIndex: 1,
      steps: 2,
      content: FINAL,
      toolCalls: 0,
      totalToolCalls: 1,
    },
    {
      ...hook('ON_COMPLETE'),
      hookType: 'onComplete',
      ...ids,
      reason: 'done',
      status: 'done',
      errorMessage: '',
      lastAssistantContent: FINAL,
      steps: 2,
      toolCalls: 1,
    },
  ];
  return [{ ...hook('BEFORE_TOOL_CALL'), hookType: 'beforeToolCall', ...tool }, expected];
}

/**
 * Checks the receiver's events of `op`. beforeToolCall notifications start
 * inside DecideToolCall without being awaited (as upstream), so only their
 * presence is checked; the adapters await every other event, so their order
 * is the run's.
 */
function expectEvents(
  op: string,
  [before, rest]: [Record<string, unknown>, Record<string, unknown>[]],
): void {
  const got = bodies('events', op).map((b) => normalise(b, op));
  expect(got.filter((b) => b.hookType === 'beforeToolCall')).toEqual([before]);
  expect(got.filter((b) => b.hookType !== 'beforeToolCall')).toEqual(rest);
}

describe.each(FRAMEWORKS)('the %s adapter', (framework) => {
  it('runs the canonical run: the tool once with the original arguments, then the final text', () => {
    const line = scenario(framework, 'canonical');
    expect(line.error).toBeUndefined();
    expect(line.final).toBe(FINAL);
    expect(line.toolArgs).toEqual([{ city: 'Paris' }]);
    expect(line.modelInputs[1]).toContain('sunny in Paris');
  });

  it("sends each event with the spec's fields, the awaited ones in order", () => {
    const op = scenario(framework, 'canonical').operationId;
    expectEvents(op, expectedEvents(framework, op));
  });

  it('sends the same events from the async path', () => {
    const line = scenario(framework, 'async');
    expect(line.error).toBeUndefined();
    expect(line.final).toBe(FINAL);
    expectEvents(line.operationId, expectedEvents(framework, line.operationId));
  });

  it("runs the README's snippet: the final text, and the operation's events reach the receiver", () => {
    const line = scenario(framework, 'readme');
    expect(line.error).toBeUndefined();
    expect(line.final).toBe(FINAL);
    const types = bodies('events', `op-readme-${framework}`).map((b) => b.hookType);
    expect(types.filter((t) => t !== 'beforeToolCall')).toEqual([
      'beforeStep',
      'afterToolCall',
      'afterStep',
      'beforeStep',
      'afterStep',
      'onComplete',
    ]);
  });

  it('denies: the tool never runs and the model next sees the blocked result', () => {
    const line = scenario(framework, 'deny');
    expect(line.error).toBeUndefined();
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs).toHaveLength(2);
    expect(line.modelInputs[1]).toContain(DENY_REASON);
    const after = bodies('events', line.operationId).find((b) => b.hookType === 'afterToolCall');
    expect(after?.result).toMatchObject({
      content: DENY_REASON,
      error: 'hook_denied',
      success: false,
    });
    expect(after?.mocked).toBe(false);
  });

  it("mocks from a local handler: the tool never runs and the mock is the model's result", () => {
    const line = scenario(framework, 'mock');
    expect(line.error).toBeUndefined();
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs[1]).toContain(MOCK_RESULT);
    expect(
      handlers.calls.filter((c) => c.operationId === line.operationId).map((c) => c.hookId),
    ).toEqual(['mock-weather']);
  });

  it("serves the runtime's own local handler: its mock is the result, the tool never runs", () => {
    const line = scenario(framework, 'handler');
    expect(line.error).toBeUndefined();
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs[1]).toContain(HANDLER_MOCK);
    const after = bodies('events', line.operationId).find((b) => b.hookType === 'afterToolCall');
    expect(after).toMatchObject({ mocked: true, result: { content: HANDLER_MOCK, success: true } });
  });

  it('rewrites the arguments at beforeToolCall: the tool gets the rewritten city', () => {
    const line = scenario(framework, 'rewrite');
    expect(line.error).toBeUndefined();
    expect(line.toolArgs).toEqual([{ city: 'Lyon' }]);
    expect(line.modelInputs[1]).toContain('sunny in Lyon');
    const [sent] = bodies('rewrite', line.operationId);
    expect(sent).toMatchObject({
      args: { city: 'Paris' },
      toolCall: { id: 'call_weather_1', name: 'get_weather' },
    });
  });

  it('redacts at transformContext: the model never sees the card number', () => {
    const line = scenario(framework, 'redact');
    expect(line.error).toBeUndefined();
    expect(line.modelInputs).toHaveLength(2);
    for (const input of line.modelInputs) {
      expect(input).not.toContain(CARD);
      expect(input).toContain('[redacted]');
    }
    const sent = bodies('redact', line.operationId);
    expect(sent).toHaveLength(2);
    expect(JSON.stringify(sent[0]?.messages)).toContain(CARD);
    expect(sent[0]).toMatchObject({ iteration: 1, point: 'transformContext' });
  });

  it('fails closed when the sidecar is down: the tool never runs, the run fails naming agenthooks', () => {
    const line = scenario(framework, 'down');
    expect(line.toolRuns).toBe(0);
    expect(line.final).toBeUndefined();
    // Notifications fail open in this scenario, so the decision is what fails.
    expect(line.error).toMatch(
      /agenthooks (Modify|DecideToolCall) failed at 127\.0\.0\.1:\d+: UNAVAILABLE/,
    );
  });

  it('fails the run with AgentHooksError itself when a decision inside the tool cannot be made', () => {
    const line = scenario(framework, 'blocked');
    expect(line.toolRuns).toBe(0);
    expect(line.final).toBeUndefined();
    // The runner prints the error's type first: not the framework's wrapper of a tool's error.
    expect(line.error).toMatch(
      /^AgentHooksError: agenthooks Modify MODIFY_POINT_BEFORE_TOOL_CALL blocked by hook policy-down/,
    );
  });

  it('fails closed on events too by default: nothing runs when the sidecar is down', () => {
    const line = scenario(framework, 'down-closed');
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs).toEqual([]);
    expect(line.error).toMatch(/agenthooks Dispatch failed at 127\.0\.0\.1:\d+: UNAVAILABLE/);
  });

  it('replaces a result that an afterToolCall control denies: the tool ran, the model sees the denial', () => {
    const line = scenario(framework, 'result-deny');
    expect(line.error).toBeUndefined();
    expect(line.toolRuns).toBe(1);
    expect(line.modelInputs[1]).toContain(RESULT_DENY_REASON);
    expect(line.modelInputs[1]).not.toContain('sunny in Paris');
    const after = bodies('events', line.operationId).find((b) => b.hookType === 'afterToolCall');
    expect(after?.result).toMatchObject({
      content: RESULT_DENY_REASON,
      error: 'hook_denied',
      success: false,
    });
  });

  it('refuses to be made without a user id: the run never starts, its events would be refused', () => {
    const line = scenario(framework, 'no-user');
    expect(line.error).toMatch(/^AgentHooksError: agenthooks: user_id is required/);
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs).toEqual([]);
    expect(receiver.requests.filter((r) => r.path.endsWith(`/${line.operationId}`))).toEqual([]);
  });

  it('dispatches onToolCallError when the tool raises', () => {
    const line = scenario(framework, 'toolerror');
    const op = line.operationId;
    const events = bodies('events', op).map((b) => normalise(b, op));
    const [, expected] = expectedEvents(framework, op);
    const toolError = events.find((b) => b.hookType === 'onToolCallError');
    const { mocked: _m, result: _r, ...context } = expected[1] as Record<string, unknown>;
    expect(toolError).toEqual({
      ...context,
      hookId: 'notify-HOOK_TYPE_ON_TOOL_CALL_ERROR',
      hookType: 'onToolCallError',
      error: TOOL_ERROR,
    });
    if (framework === 'langchain') {
      // The tool's exception fails the run (create_agent's default), which completes with an error.
      expect(line.error).toContain(TOOL_ERROR);
      const terminal = events.filter(
        (b) => b.hookType === 'onComplete' || b.hookType === 'onError',
      );
      expect(terminal.map((b) => b.hookType)).toEqual(['onComplete', 'onError']);
      expect(terminal[0]).toMatchObject({
        reason: 'error',
        status: 'error',
        errorMessage: TOOL_ERROR,
      });
    } else {
      // The SDK's default failure policy hands the model an error message; the run goes on.
      expect(line.final).toBe(FINAL);
      const after = events.find((b) => b.hookType === 'afterToolCall');
      expect(after?.result).toMatchObject({ success: false });
      expect(events.at(-1)).toMatchObject({ hookType: 'onComplete', reason: 'done' });
    }
  });

  it('gives the model the settings that beforeProviderPayload answers', () => {
    const line = scenario(framework, 'payload');
    expect(line.error).toBeUndefined();
    expect(line.modelSettings).toEqual([{ temperature: 0.25 }, { temperature: 0.25 }]);
    const model = framework === 'langchain' ? 'scripted' : 'ScriptedModel';
    expect(bodies('payload', line.operationId)[0]).toMatchObject({
      model,
      payload: {},
      point: 'beforeProviderPayload',
    });
  });
});

describe('the langchain adapter, on a tool that answers more than text', () => {
  it.each(['result-command', 'result-blocks', 'result-command-extra'] as const)(
    '%s: the result control judges what the tool answered, and its denial replaces it',
    (s) => {
      const line = scenario('langchain', s);
      expect(line.error).toBeUndefined();
      expect(line.toolRuns).toBe(1);
      // The control got the forecast, not an empty result it would let through.
      const judged = receiver.requests
        .filter((r) => r.path === `/result-deny/${line.operationId}`)
        .map((r) => (r.json as { result: { content: string } }).result.content);
      expect(judged).toHaveLength(1);
      expect(judged[0]).toContain('sunny in Paris');
      expect(line.modelInputs[1]).toContain(RESULT_DENY_REASON);
      expect(line.modelInputs[1]).not.toContain('sunny in Paris');
    },
  );
});

describe('the langchain adapter, when a tool raises a subgraph command for the parent graph', () => {
  it('fails the run: what the command carries was judged by no control, and the model never sees it', () => {
    const line = scenario('langchain', 'parent-command');
    expect(line.error).toBeDefined();
    expect(line.toolRuns).toBe(1);
    expect(line.modelInputs.join('\n')).not.toContain('sunny in Paris');
  });
});

describe('the langchain adapter, when a tool waits for a human', () => {
  it("lets LangGraph's interrupt pause the run, not fail it: the resumed tool runs and the run completes", () => {
    const line = scenario('langchain', 'interrupt');
    expect(line.error).toBeUndefined();
    expect(line.final).toBe(FINAL);
    expect(line.toolRuns).toBe(1);
    const types = bodies('events', line.operationId).map((b) => b.hookType);
    expect(types).not.toContain('onToolCallError');
    expect(types.filter((t) => t === 'onComplete')).toHaveLength(1);
    expect(
      bodies('events', line.operationId).find((b) => b.hookType === 'onComplete'),
    ).toMatchObject({ reason: 'done' });
  });
});

describe('the openai-agents adapter, on tools it cannot decide', () => {
  it.each([
    ['ungated', /tool 'web_search' is a WebSearchTool, whose calls agenthooks cannot decide/],
    ['unwrapped', /tool 'get_weather' of agent 'assistant' would run with no decision/],
    ['handoff-object', /tool 'get_weather' of agent 'helper' would run with no decision/],
    ['as-tool', /tool 'get_weather' of agent 'helper' would run with no decision/],
    ['start-run', /tool 'get_weather' of agent 'assistant' would run with no decision/],
    ['name-collision', /tool 'web_search' of agent 'assistant' would run with no decision/],
  ] as const)('%s: refuses the run before the model or any tool runs', (s, error) => {
    const line = scenario('openai-agents', s);
    expect(line.error).toMatch(error);
    expect(line.error).toMatch(/^AgentHooksError: /);
    expect(line.toolRuns).toBe(0);
    expect(line.modelInputs).toEqual([]);
  });
});

describe('the langchain adapter, at the point only it maps', () => {
  it('stops after a turn when shouldStopAfterTurn says so: the model is not called again', () => {
    const line = scenario('langchain', 'stop');
    expect(line.error).toBeUndefined();
    expect(line.toolRuns).toBe(1);
    expect(line.modelInputs).toHaveLength(1);
    const [sent] = bodies('stop', line.operationId);
    expect(sent).toMatchObject({ iteration: 1, hadToolCalls: true, point: 'shouldStopAfterTurn' });
  });
});

describe('the Python adapters against an answer the contract never gives', () => {
  it('fail closed when DecideToolResult answers a mock: AgentHooksError, never the tool result', async () => {
    const script = join(REPO_ROOT, 'integrations', 'python', 'tests', 'unexpected_decision.py');
    const { stdout } = await execFileAsync(PYTHON, [script], {
      cwd: REPO_ROOT,
      timeout: RUN_TIMEOUT_MS,
      env: PYTHON_ENV,
    });
    expect(stdout.trim()).toBe('ok');
  });
});

describe('the Python adapters, on what every adapter promises (tests/contract.py)', () => {
  const CONTRACT = join(REPO_ROOT, 'integrations', 'python', 'tests', 'contract.py');
  const base = `op-py-contract-${process.pid}`;
  const op = (check: string) => `${base}-${check}`;
  const lines = new Map<string, Record<string, unknown>>();

  beforeAll(async () => {
    for (const framework of ['langchain', 'openai-agents']) {
      const o = op(`exact-args-${framework}`);
      // Sees the beforeToolCall context; answers nothing (204: no change).
      await register(o, [
        {
          id: 'observe-args',
          point: 'MODIFY_POINT_BEFORE_TOOL_CALL',
          webhook: { url: `${receiver.url}/observe/${o}` },
        },
      ]);
    }
    await register(op('concurrent'), [
      { id: 'mock-slowly', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true },
    ]);
    await register(op('provider-tool'), notifications(op('provider-tool')));
    const { stdout } = await execFileAsync(
      PYTHON,
      [CONTRACT, '--target', sidecar.grpc, '--operation-id', base],
      {
        cwd: REPO_ROOT,
        timeout: RUN_TIMEOUT_MS,
        env: PYTHON_ENV,
      },
    );
    for (const l of stdout.trim().split('\n')) {
      const line = JSON.parse(l) as Record<string, unknown>;
      lines.set(String(line.check), line);
    }
  }, 2 * RUN_TIMEOUT_MS);

  it.each(['langchain', 'openai-agents'])(
    "%s: the tool gets the model's own arguments (ints stay ints, past 2**53 too), and beforeToolCall gets toolCall {id, name}",
    (framework) => {
      const line = lines.get(`exact-args-${framework}`);
      expect(line?.error).toBeUndefined();
      expect(line?.toolArgs).toEqual(["{'city': 'Paris', 'days': 3, 'ref': 9007199254740993}"]);
      const [seen] = receiver.requests.filter(
        (r) => r.path === `/observe/${op(`exact-args-${framework}`)}`,
      );
      expect((seen?.json as { toolCall?: unknown } | undefined)?.toolCall).toEqual({
        id: 'call_weather_1',
        name: 'get_weather',
      });
      // The raw body: JSON.parse would round the int above 2**53 itself.
      expect(seen?.body).toContain('"args":{"city":"Paris","days":3,"ref":9007199254740993}');
    },
  );

  it('serves local handler calls concurrently: two calls in flight at once both get the mock', () => {
    const line = lines.get('concurrent');
    expect(line?.error).toBeUndefined();
    expect(line?.met).toBe(2);
    expect(line?.results).toEqual([
      'mocked once both calls were in flight',
      'mocked once both calls were in flight',
    ]);
  });

  it('langchain: refuses a provider (built-in) tool, whose calls agenthooks cannot decide, before the model runs', () => {
    const line = lines.get('provider-tool');
    expect(line?.error).toMatch(
      /^AgentHooksError: .*tool \{'type': 'web_search_preview'\} is a provider tool, whose calls agenthooks cannot decide/,
    );
    expect(line?.toolRuns).toBe(0);
    expect(line?.modelCalls).toBe(0);
  });
});
