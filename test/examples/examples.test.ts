/**
 * @module End-to-end: the example runtimes of `examples/` (Python, Go and
 * TypeScript, each on its generated gRPC client) run one whole operation, an
 * agent loop with modifying hooks included, against one real sidecar and the
 * example receiver of `examples/receiver/receiver.mjs`, run as its own
 * process. The assertions read
 * the receiver's log and the sidecar's answers as a recording gRPC proxy saw
 * them on the wire, never the examples' own printout.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { fromBinary, type JsonValue, toJson } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { BadRequestSchema, ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';
import { type GrpcProxy, type ProxiedCall, startGrpcProxy } from './grpc-proxy.js';

const ROOT = join(import.meta.dirname, '..', '..');
const VENV_PYTHON = join(ROOT, '.venv', 'bin', 'python');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** What `tsc -p examples/ts` emits (its tsconfig's outDir). */
const TS_EXAMPLE = join(ROOT, 'dist', 'examples', 'examples', 'ts', 'runtime.js');
/** The webhook receiver the README points at. */
const RECEIVER = join(ROOT, 'examples', 'receiver', 'receiver.mjs');

/** The id every language's operation id is normalised to. */
const OPERATION_ID = 'op-example';
const DENY_REASON = 'Deleting files is not allowed.';
/** What the examples' web/search handler mocks and what their deferred readFile returns. */
const SEARCH_RESULT = '{"results":[{"title":"agenthooks","url":"https://example.com/agenthooks"}]}';
const READ_RESULT = '- [x] write the examples\n- [ ] ship v1\n';
/** Webhooks per operation: beforeStep, 3 controls, 3 afterToolCall, afterStep, onComplete. */
const PAYLOADS_PER_RUN = 9;
/** Modifying webhooks per agent loop: transformContext and shouldStopAfterTurn, two iterations. */
const LOOP_PAYLOADS_PER_RUN = 4;
/** The agent loop's first message, as the examples send it and as the receiver's redactor leaves it. */
const CARD_NUMBER = '4111 1111 1111 1111';
const PROMPT = `Find the agenthooks docs. My card is ${CARD_NUMBER} if a page asks for it.`;
const REDACTED_PROMPT = 'Find the agenthooks docs. My card is [redacted] if a page asks for it.';
/** The assistant turn of the examples' scripted model that the turn budget keeps from running. */
const UNREACHED_TURN = 'done: the docs are at https://example.com/agenthooks.';
const TRANSFORM_CONTEXT = 'MODIFY_POINT_TRANSFORM_CONTEXT';
const BEFORE_TOOL_CALL = 'MODIFY_POINT_BEFORE_TOOL_CALL';
const SHOULD_STOP_AFTER_TURN = 'MODIFY_POINT_SHOULD_STOP_AFTER_TURN';
/** Members that carry JSON as text (`Modify`, `Handle`): compared as the JSON values they hold. */
const JSON_TEXT_FIELDS = new Set(['contextJson', 'resultJson']);
/** Fields whose values differ from run to run (handler call ids, durations, park times). */
const VARYING_FIELDS = new Set(['callId', 'duration', 'parkedAt']);

const execFileAsync = promisify(execFile);

type Language = 'python' | 'go' | 'ts';
const LANGUAGES: Language[] = ['python', 'go', 'ts'];

/** The exit of an example process. */
interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A call of one run, decoded to proto3 JSON with the operation id normalised. */
interface DecodedCall {
  readonly method: string;
  readonly contentType: string | undefined;
  readonly te: string | undefined;
  readonly status: number | undefined;
  readonly requests: JsonValue[];
  readonly responses: JsonValue[];
  /** What the `google.rpc.Status` of a failed call says, as the runtimes print it. */
  readonly error?: PrintedError;
}

/** A status code, `ErrorInfo.reason` and `BadRequest` field violations, as the examples print them. */
interface PrintedError {
  readonly code: number;
  readonly reason: string | undefined;
  readonly fields: { field: string; description: string }[] | undefined;
}

/** One example run through the proxy. */
interface Run {
  readonly operationId: string;
  readonly calls: DecodedCall[];
  /** Receiver requests of the run's lifecycle hooks, normalised, in arrival order. */
  readonly payloads: { path: string; json: Record<string, JsonValue> }[];
  /** Receiver requests of the run's modifying hooks (the agent loop), normalised, in order. */
  readonly loopPayloads: { path: string; json: Record<string, JsonValue> }[];
  /** The JSON lines the example printed. */
  readonly printed: Record<string, JsonValue>[];
}

/** Replaces the run's operation id by `op-example` everywhere and drops varying fields. */
function normalise<T>(value: T, operationId: string): T {
  const json = JSON.stringify(value, (key, v) => (VARYING_FIELDS.has(key) ? undefined : v));
  return JSON.parse(json.replaceAll(operationId, OPERATION_ID)) as T;
}

/**
 * The value with every JSON text member (`contextJson`, `resultJson`) parsed:
 * member order and spacing are not part of the contract, and each language's
 * JSON encoder writes its own (Go's maps, for one, sort their keys).
 */
function withJsonTextParsed<T>(value: T): T {
  const json = JSON.stringify(value, (key, v: unknown) =>
    JSON_TEXT_FIELDS.has(key) && typeof v === 'string' && v !== '' ? JSON.parse(v) : v,
  );
  return JSON.parse(json) as T;
}

/** Reads the status details the sidecar sent in a call's trailers. */
function errorOf(call: ProxiedCall): PrintedError | undefined {
  if (call.grpcStatusDetails === undefined) return undefined;
  const status = fromBinary(StatusSchema, call.grpcStatusDetails);
  const unpack = <T>(f: (d: (typeof status.details)[number]) => T | undefined) =>
    status.details.map(f).find((d) => d !== undefined);
  const info = unpack((d) => anyUnpack(d, ErrorInfoSchema));
  const badRequest = unpack((d) => anyUnpack(d, BadRequestSchema));
  return {
    code: status.code,
    reason: info?.reason,
    fields: badRequest?.fieldViolations.map((v) => ({
      field: v.field,
      description: v.description,
    })),
  };
}

function decode(call: ProxiedCall, operationId: string): DecodedCall {
  const name = call.path.split('/').pop() ?? '';
  const method = HookService.methods.find((m) => m.name === name);
  if (method === undefined) throw new Error(`not a HookService method: ${call.path}`);
  return normalise(
    {
      method: name,
      contentType: call.requestHeaders['content-type'],
      te: call.requestHeaders.te as string | undefined,
      status: call.grpcStatus,
      requests: call.requests.map((b) => toJson(method.input, fromBinary(method.input, b))),
      responses: call.responses.map((b) => toJson(method.output, fromBinary(method.output, b))),
      error: errorOf(call),
    },
    operationId,
  );
}

/** One request as the example receiver printed it. */
interface LoggedRequest {
  readonly path: string;
  /** The decision it answered a control with. */
  readonly decision?: JsonValue;
  /** The JSON agenthooks posted. */
  readonly payload: Record<string, JsonValue>;
}

/** The example receiver, running as its own process. */
interface ExampleReceiver {
  readonly url: string;
  /** What it printed so far, one entry per request, in arrival order. */
  readonly log: readonly LoggedRequest[];
  readonly process: ChildProcess;
}

/** Starts `examples/receiver/receiver.mjs` on a free port and reads its log as it prints it. */
async function startExampleReceiver(): Promise<ExampleReceiver> {
  const child = spawn(process.execPath, [RECEIVER], {
    cwd: ROOT,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const log: LoggedRequest[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the receiver exited with ${code}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const entry = JSON.parse(line) as { listening?: string } & LoggedRequest;
      if (entry.listening !== undefined) resolve(entry.listening);
      else log.push(entry);
    });
  });
  return { url, log, process: child };
}

/**
 * Resolves once the receiver's log holds every request it answered before
 * now: it posts a marker and waits for the marker's line, which the receiver
 * prints after the lines of the requests before it, on the same pipe.
 */
async function receiverLogCaughtUp(receiver: ExampleReceiver, marker: string): Promise<void> {
  const res = await fetch(`${receiver.url}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ marker }),
  });
  expect(res.status).toBe(204);
  await vi.waitFor(() => expect(receiver.log.some((r) => r.payload.marker === marker)).toBe(true), {
    timeout: 5_000,
    interval: 10,
  });
}

/** Stops the receiver with SIGTERM, as a user's Ctrl-C, and waits for its exit. */
async function stopExampleReceiver(receiver: ExampleReceiver): Promise<number | null> {
  const child = receiver.process;
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  return code;
}

/** Runs a process to its end and keeps its output; kills it after 30 seconds. */
function runProcess(command: string, args: string[], env: Record<string, string>): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Whether a receiver request is a modifying hook's of the run: the sidecar
 * adds the `Modify` call's `operationId` and the `point` to the context.
 */
function isLoopPayloadOf(operationId: string, payload: Record<string, JsonValue>): boolean {
  return payload.operationId === operationId && typeof payload.point === 'string';
}

/** The JSON lines an example printed. */
function printedLines(stdout: string): Record<string, JsonValue>[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, JsonValue>);
}

/** Which tool a payload is about, for tool events. */
function toolOf(json: Record<string, JsonValue>): string | undefined {
  return json.identifier === undefined ? undefined : `${json.identifier}/${json.apiName}`;
}

/**
 * The calls of a run with its one DispatchStream last: a stream's place among
 * the calls is when its headers reached the proxy, which each client sends
 * at a time of its own.
 */
function inCallOrder(calls: DecodedCall[]): DecodedCall[] {
  const isStream = (c: DecodedCall) => c.method === 'DispatchStream';
  return [...calls.filter((c) => !isStream(c)), ...calls.filter(isStream)];
}

/**
 * JSON with every object's keys sorted: key order is not part of the payload
 * contract, and a `Struct`'s keys come in the order of the client's encoding.
 */
function canonicalJson(value: JsonValue): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** The payloads sorted by their JSON, for comparisons where arrival order is not the point. */
function sortedPayloads(run: Run): string[] {
  return run.payloads.map((p) => canonicalJson({ path: p.path, ...p.json })).sort();
}

/** One `Modify` call of a run, with its context and result read from the JSON text on the wire. */
interface ModifyCall {
  /** The point, as proto3 JSON names it (`MODIFY_POINT_TRANSFORM_CONTEXT`). */
  readonly point: string;
  readonly context: Record<string, JsonValue>;
  /** The composed result the sidecar answered, unless it answered `blocked`. */
  readonly result?: Record<string, JsonValue>;
  readonly blocked?: JsonValue;
  readonly outcomes: JsonValue[];
}

/** The run's `Modify` calls, in order, as the sidecar got and answered them. */
function modifyCallsOf(calls: readonly DecodedCall[]): ModifyCall[] {
  return calls
    .filter((c) => c.method === 'Modify')
    .map((c) => {
      const request = c.requests[0] as { point: string; contextJson: string };
      const response = c.responses[0] as
        | { resultJson?: string; blocked?: JsonValue; outcomes?: JsonValue[] }
        | undefined;
      return {
        point: request.point,
        context: JSON.parse(request.contextJson) as Record<string, JsonValue>,
        result:
          response?.resultJson === undefined
            ? undefined
            : (JSON.parse(response.resultJson) as Record<string, JsonValue>),
        blocked: response?.blocked,
        outcomes: response?.outcomes ?? [],
      };
    });
}

/** The agent loop's lines of an example's printout (its other lines interleave with stream acks). */
function loopLinesOf(printed: readonly Record<string, JsonValue>[]): Record<string, JsonValue>[] {
  const loopSteps = new Set([
    'Modify',
    'Modify.blocked',
    'Tool',
    'Tool.skipped',
    'AgentLoop.stopped',
  ]);
  return printed.filter(
    (line) => loopSteps.has(String(line.step)) || (line.step === 'Handle.call' && 'point' in line),
  );
}

/**
 * Starts a stand-in for the example receiver whose redactor is down: it
 * answers `POST /redact` with a 503 and forwards every other request to
 * `upstream`, answering what it answers.
 */
async function startFailingRedactor(upstream: string): Promise<{
  readonly url: string;
  close(): Promise<void>;
}> {
  async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.url === '/redact') {
      res.writeHead(503).end();
      return;
    }
    const answer = await fetch(`${upstream}${req.url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.concat(chunks),
    });
    const type = answer.headers.get('content-type');
    res.writeHead(answer.status, type === null ? {} : { 'content-type': type });
    res.end(Buffer.from(await answer.arrayBuffer()));
  }
  const server = http.createServer((req, res) => {
    // A request cut off by close() (a late notification) just ends.
    forward(req, res).catch(() => res.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // agenthooks keeps its connections alive.
      server.closeAllConnections();
      await closed;
    },
  };
}

/** The agent loop's payloads as canonical JSON, in the order the loop sent them. */
function loopPayloadsOf(run: Pick<Run, 'loopPayloads'>): string[] {
  return run.loopPayloads.map((p) => canonicalJson({ path: p.path, ...p.json }));
}

describe('example runtimes in Python, Go and TypeScript', () => {
  let receiver: ExampleReceiver;
  let sidecar: SidecarProcess;
  let proxy: GrpcProxy;
  let workDir: string;
  let socket: string;
  const commands = new Map<
    Language,
    { command: string; args: string[]; env: Record<string, string> }
  >();
  const runs = new Map<Language, Run>();

  /** The TCP run of one language, which the first test records. */
  function runOf(language: Language): Run {
    const run = runs.get(language);
    if (run === undefined) throw new Error(`the ${language} example did not run`);
    return run;
  }

  /** Runs one example with its own operation id and waits for all its webhooks. */
  async function runExample(language: Language, address: string, operationId: string) {
    const spec = commands.get(language);
    if (spec === undefined) throw new Error(`no command for ${language}`);
    const exit = await runProcess(spec.command, spec.args, {
      ...spec.env,
      AGENTHOOKS_ADDRESS: address,
      RECEIVER_URL: receiver.url,
      AGENTHOOKS_OPERATION_ID: operationId,
    });
    expect(exit.code, `${language} example failed:\n${exit.stderr}\n${exit.stdout}`).toBe(0);
    const ofRun = (r: LoggedRequest) =>
      r.payload.operationId === operationId && r.payload.point === undefined;
    const ofLoop = (r: LoggedRequest) => isLoopPayloadOf(operationId, r.payload);
    // The afterToolCall of the published result is sent without being awaited.
    await vi.waitFor(() => expect(receiver.log.filter(ofRun)).toHaveLength(PAYLOADS_PER_RUN), {
      timeout: 5_000,
      interval: 10,
    });
    // The loop's webhooks were all answered before the example exited; their
    // lines may still be on their way through the receiver's pipe.
    await receiverLogCaughtUp(receiver, operationId);
    const normalised = (r: LoggedRequest) => ({
      path: r.path,
      json: normalise(r.payload, operationId),
    });
    const payloads = receiver.log.filter(ofRun).map(normalised);
    const loopPayloads = receiver.log.filter(ofLoop).map(normalised);
    return { payloads, loopPayloads, printed: printedLines(exit.stdout) };
  }

  beforeAll(async () => {
    if (!existsSync(VENV_PYTHON)) {
      throw new Error(
        'no .venv: run scripts/install-client-tools.sh (npm run generate:clients does)',
      );
    }
    workDir = mkdtempSync(join(tmpdir(), 'agenthooks-examples-'));
    socket = join(workDir, 'agenthooks.sock');
    const goBinary = join(workDir, 'runtime-go');
    // Both builds at once: the Go one takes long on a cold build cache.
    await Promise.all([
      execFileAsync('go', ['build', '-o', goBinary, '.'], { cwd: join(ROOT, 'examples', 'go') }),
      execFileAsync(process.execPath, [TSC, '-p', join(ROOT, 'examples', 'ts')], { cwd: ROOT }),
    ]);
    commands.set('python', {
      command: VENV_PYTHON,
      args: [join(ROOT, 'examples', 'python', 'runtime.py')],
      env: { PYTHONPATH: join(ROOT, 'clients', 'python'), PYTHONDONTWRITEBYTECODE: '1' },
    });
    commands.set('go', { command: goBinary, args: [], env: {} });
    commands.set('ts', { command: process.execPath, args: [TS_EXAMPLE], env: {} });

    receiver = await startExampleReceiver();
    sidecar = await startSidecar({ args: ['--grpc-listen', `unix:${socket}`], http: false });
    proxy = await startGrpcProxy(sidecar.grpc);
  }, 300_000);

  afterAll(async () => {
    await proxy?.close();
    await killSidecar(sidecar);
    if (receiver !== undefined) expect(await stopExampleReceiver(receiver)).toBe(0);
    if (workDir !== undefined) rmSync(workDir, { recursive: true, force: true });
  });

  it.each(LANGUAGES)(
    'runs a whole operation in %s over native gRPC: allowed, denied, mocked, parked and published',
    async (language) => {
      const operationId = `op-example-${language}`;
      const firstCall = proxy.calls.length;
      const { payloads, loopPayloads, printed } = await runExample(
        language,
        proxy.address,
        operationId,
      );
      const proxied = proxy.calls.slice(firstCall);
      await Promise.all(proxied.map((c) => c.ended));
      const calls = inCallOrder(proxied.map((c) => decode(c, operationId)));
      runs.set(language, { operationId, calls, payloads, loopPayloads, printed });

      // Native gRPC over HTTP/2 on every call, not the Connect protocol or gRPC-Web.
      for (const call of calls) {
        expect(call.contentType).toMatch(/^application\/grpc(\+proto)?$/);
        expect(call.te).toBe('trailers');
      }
      expect(calls.map((c) => [c.method, c.status])).toEqual([
        ['RegisterHooks', 3],
        ['RegisterHooks', 0],
        ['Handle', 0],
        ['Dispatch', 0],
        ['DecideToolCall', 0],
        ['ParkToolCall', 0],
        ['DecideToolCall', 0],
        ['DecideToolCall', 0],
        ['Dispatch', 0],
        ['PublishDeferredResult', 0],
        // The agent loop: its hooks, then two iterations at three points each.
        ['RegisterHooks', 0],
        ...Array.from({ length: 6 }, () => ['Modify', 0]),
        ['CompleteOperation', 0],
        ['DispatchStream', 0],
      ]);

      // The sidecar's answers, as the runtime got them.
      const [refused, register, handle, beforeStep, read, park, remove, search, afterStep] = calls;
      const [publish, registerLoop] = calls.slice(9);
      const [complete, notifications] = calls.slice(-2);

      // The deliberately invalid registration: the runtime read the reason and
      // the field violation of the error exactly as the sidecar sent them.
      expect(refused?.error).toEqual({
        code: 3,
        reason: 'INVALID_WEBHOOK_URL',
        fields: [{ field: 'hooks[0].webhook.url', description: expect.any(String) }],
      });
      expect(refused?.error?.fields?.[0]?.description).toMatch(/^Webhook URL must be HTTP\(S\)/);
      expect(printed.filter((line) => line.step === 'RegisterHooks.refused')).toEqual([
        { step: 'RegisterHooks.refused', ...refused?.error },
      ]);
      expect(register?.responses).toEqual([{ hookCount: 6 }]);
      expect(registerLoop?.responses).toEqual([{ hookCount: 9 }]);
      expect(beforeStep?.responses).toMatchObject([
        { outcomes: [{ hookId: 'steps-before', status: 'HOOK_OUTCOME_STATUS_DELIVERED' }] },
      ]);
      expect(read?.responses).toMatchObject([
        {
          decision: { allow: { controlsConsulted: 1 } },
          outcomes: [{ hookId: 'deny-delete', status: 'HOOK_OUTCOME_STATUS_ALLOWED' }],
        },
      ]);
      expect(park?.responses).toMatchObject([
        {
          created: true,
          record: {
            kind: 'PARK_KIND_DEFERRED',
            operationChain: [OPERATION_ID],
            context: { toolCallId: `${OPERATION_ID}-call-read`, apiName: 'readFile' },
          },
        },
      ]);
      expect(remove?.responses).toMatchObject([
        {
          decision: {
            deny: {
              reason: DENY_REASON,
              classification: 'DENY_CLASSIFICATION_HOOK_DENIED',
              hookId: 'deny-delete',
              operationId: OPERATION_ID,
              blockedResult: {
                content: DENY_REASON,
                error: 'hook_denied',
                state: { type: 'blocked', reason: DENY_REASON },
              },
            },
          },
          outcomes: [{ hookId: 'deny-delete', status: 'HOOK_OUTCOME_STATUS_DENIED' }],
        },
      ]);
      expect(search?.responses).toMatchObject([
        {
          decision: {
            mock: { hookId: 'mock-search', result: { content: SEARCH_RESULT, success: true } },
          },
          outcomes: [
            { hookId: 'deny-delete', status: 'HOOK_OUTCOME_STATUS_ALLOWED' },
            { hookId: 'mock-search', status: 'HOOK_OUTCOME_STATUS_HANDLED' },
          ],
        },
      ]);
      // The local handler ran over the Handle stream, and its mock is the answer
      // above; the agent loop's beforeToolCall handler ran there twice after it.
      const clampCall = { call: { hookId: 'clamp-limit', point: 'MODIFY_POINT_BEFORE_TOOL_CALL' } };
      expect(handle?.responses).toMatchObject([
        { attached: { operationIds: [OPERATION_ID] } },
        {
          call: {
            hookId: 'mock-search',
            event: { beforeToolCall: { context: { identifier: 'web', apiName: 'search' } } },
          },
        },
        clampCall,
        clampCall,
      ]);
      expect(handle?.requests).toMatchObject([
        { attach: { operationIds: [OPERATION_ID] } },
        { reply: { mock: { result: { content: SEARCH_RESULT, success: true } } } },
        { reply: { modified: {} } },
        { reply: { done: {} } },
      ]);
      // The tool events go on the operation's one DispatchStream, not awaited
      // one by one: the denied call's afterToolCall carries the blocked result
      // (mocked false, so absent in proto3 JSON), the mocked call's the mock.
      const delivered = [{ hookId: 'tool-results', status: 'HOOK_OUTCOME_STATUS_DELIVERED' }];
      const denial = remove?.responses[0] as
        | { decision: { deny: { blockedResult: JsonValue } } }
        | undefined;
      expect(notifications?.requests).toEqual([
        {
          eventId: 'event-1',
          event: {
            afterToolCall: {
              context: expect.objectContaining({ toolCallId: `${OPERATION_ID}-call-delete` }),
              result: denial?.decision.deny.blockedResult,
            },
          },
        },
        {
          eventId: 'event-2',
          event: {
            afterToolCall: {
              context: expect.objectContaining({ toolCallId: `${OPERATION_ID}-call-search` }),
              mocked: true,
              result: { content: SEARCH_RESULT, success: true },
            },
          },
        },
      ]);
      expect(notifications?.responses).toMatchObject([
        { eventId: 'event-1', outcomes: delivered },
        { eventId: 'event-2', outcomes: delivered },
      ]);
      expect(afterStep?.responses).toMatchObject([
        { outcomes: [{ hookId: 'steps-after', status: 'HOOK_OUTCOME_STATUS_DELIVERED' }] },
      ]);
      expect(publish?.responses).toEqual([
        {
          finalResult: { content: READ_RESULT, success: true, executionTime: 12 },
          published: true,
          decisionId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/),
        },
      ]);
      expect(complete?.responses).toMatchObject([
        {
          handlersDropped: true,
          outcomes: [{ hookId: 'completed', status: 'HOOK_OUTCOME_STATUS_DELIVERED' }],
        },
      ]);

      // What the receiver got, in the spec's order: the controls saw all
      // three calls (controls run before local mocks), each tool's
      // afterToolCall follows its control, the denied call's included, and the
      // step's notifications come before afterStep, which the runtime
      // dispatches once their acks are in. The denied call's afterToolCall
      // goes on the stream while the runtime goes on to the next decision, so
      // it may reach the receiver before or after that decision's control:
      // the one race the spec's order leaves open.
      const seen = payloads.map((p) => [p.path, p.json.hookType, p.json.hookId, toolOf(p.json)]);
      const published = seen.findIndex(
        ([, type, , tool]) => type === 'afterToolCall' && tool === 'fs/readFile',
      );
      const beforeStepSeen = ['/events', 'beforeStep', 'steps-before', undefined];
      const controlOf = (tool: string) => ['/control', 'beforeToolCall', 'deny-delete', tool];
      const resultOf = (tool: string) => ['/events', 'afterToolCall', 'tool-results', tool];
      const end = [
        resultOf('web/search'),
        ['/events', 'afterStep', 'steps-after', undefined],
        ['/events', 'onComplete', 'completed', undefined],
      ];
      const head = [beforeStepSeen, controlOf('fs/readFile'), controlOf('fs/deleteFile')];
      expect([
        [...head, resultOf('fs/deleteFile'), controlOf('web/search'), ...end],
        [...head, controlOf('web/search'), resultOf('fs/deleteFile'), ...end],
      ]).toContainEqual(seen.filter((_, i) => i !== published));
      // The sidecar sends the published result's afterToolCall once, after the
      // publication, which follows afterStep; it is not awaited, so onComplete
      // may overtake it.
      const afterStepSeen = seen.findIndex(([, type]) => type === 'afterStep');
      expect(published).toBeGreaterThan(afterStepSeen);
      const denied = payloads.find(
        (p) => toolOf(p.json) === 'fs/deleteFile' && p.path === '/events',
      );
      expect(denied?.json).toMatchObject({
        toolCallId: `${OPERATION_ID}-call-delete`,
        mocked: false,
        result: {
          content: DENY_REASON,
          success: false,
          error: 'hook_denied',
          state: { type: 'blocked', reason: DENY_REASON },
        },
      });
      // The receiver answered the controls by its rule.
      const decisions = receiver.log
        .filter((r) => r.path === '/control' && r.payload.operationId === operationId)
        .map((r) => [toolOf(r.payload), r.decision]);
      expect(decisions).toEqual([
        ['fs/readFile', { decision: 'allow' }],
        ['fs/deleteFile', { decision: 'deny', reason: DENY_REASON }],
        ['web/search', { decision: 'allow' }],
      ]);
      const mocked = payloads.find((p) => toolOf(p.json) === 'web/search' && p.path === '/events');
      expect(mocked?.json).toMatchObject({
        mocked: true,
        result: { content: SEARCH_RESULT, success: true },
      });
      expect(payloads[published]?.json).toMatchObject({
        toolCallId: `${OPERATION_ID}-call-read`,
        executor: 'client',
        mocked: false,
        result: { content: READ_RESULT, success: true, executionTime: 12 },
      });

      // The sidecar keeps the first published result: a duplicate gets it, unpublished.
      const client = createClient(
        HookService,
        createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
      );
      const duplicate = await client.publishDeferredResult({
        toolCallId: `${operationId}-call-read`,
        result: { content: 'a second result', success: true },
      });
      expect(duplicate.published).toBe(false);
      expect(duplicate.finalResult?.content).toBe(READ_RESULT);
      const listed = await client.listHooks({ operationId });
      expect(listed.hooks.map((h) => h.id)).toEqual([
        'deny-delete',
        'mock-search',
        'steps-before',
        'steps-after',
        'tool-results',
        'completed',
        'redact-card',
        'clamp-limit',
        'turn-budget',
      ]);
      expect(listed.handlerAttached).toBe(false);
    },
    60_000,
  );

  // The agent loop's messages as the examples write them (the operation id normalised).
  const userMessage = (content: string) => ({
    id: `${OPERATION_ID}-loop-1`,
    role: 'user',
    content,
  });
  const assistantMessage = (n: number, id: number, content: string, args: JsonValue) => ({
    id: `${OPERATION_ID}-loop-${id}`,
    role: 'assistant',
    content,
    toolCalls: [{ id: `${OPERATION_ID}-loop-call-${n}`, name: 'search', arguments: args }],
  });
  const toolResultMessage = (n: number, id: number, content: string) => ({
    id: `${OPERATION_ID}-loop-${id}`,
    role: 'toolResult',
    toolCallId: `${OPERATION_ID}-loop-call-${n}`,
    toolName: 'search',
    content,
    isError: false,
  });
  const firstTurn = [
    assistantMessage(1, 2, 'Let me search for it.', { query: 'agenthooks sidecar', limit: 50 }),
    toolResultMessage(1, 3, '10 results for agenthooks sidecar'),
  ];
  const secondTurn = [
    assistantMessage(2, 4, 'Let me look for the modifying hooks too.', {
      query: 'agenthooks modifying hooks',
      limit: 5,
    }),
    toolResultMessage(2, 5, '5 results for agenthooks modifying hooks'),
  ];
  const outcome = (hookId: string, plugin: string, point: string, status: string) => ({
    hookId,
    plugin,
    point,
    status: `HOOK_OUTCOME_STATUS_${status}`,
  });

  it.each(LANGUAGES)(
    'applies the transformContext webhook in %s: the redactor got the card number, later requests never do',
    (language) => {
      const run = runOf(language);
      const modifies = modifyCallsOf(run.calls);
      const redactions = run.loopPayloads.filter((p) => p.path === '/redact');

      // The redactor got the runtime's messages unredacted, with the operation, the hook's id, point and plugin.
      expect(redactions[0]?.json).toEqual({
        messages: [userMessage(PROMPT)],
        iteration: 1,
        operationId: OPERATION_ID,
        hookId: 'redact-card',
        point: 'transformContext',
        plugin: 'privacy',
      });
      // The sidecar answered the runtime the redacted messages, and the outcome of the hook.
      const transforms = modifies.filter((c) => c.point === TRANSFORM_CONTEXT);
      expect(transforms[0]).toMatchObject({
        context: { messages: [userMessage(PROMPT)], iteration: 1 },
        result: { messages: [userMessage(REDACTED_PROMPT)] },
        outcomes: [outcome('redact-card', 'privacy', TRANSFORM_CONTEXT, 'DELIVERED')],
      });
      // The runtime applied them: the next request (this turn's shouldStopAfterTurn)
      // and the next iteration's transformContext open with the redacted prompt.
      const prompt = (c: ModifyCall | undefined) => (c?.context.messages as JsonValue[])?.[0];
      expect(modifies[2]?.point).toBe(SHOULD_STOP_AFTER_TURN);
      expect(prompt(modifies[2])).toEqual(userMessage(REDACTED_PROMPT));
      expect(prompt(transforms[1])).toEqual(userMessage(REDACTED_PROMPT));
      // The second redaction had nothing to do: "no change", which leaves the runtime's messages.
      expect((redactions[1]?.json.messages as JsonValue[] | undefined)?.[0]).toEqual(
        userMessage(REDACTED_PROMPT),
      );
      expect(transforms[1]?.result).toEqual({});
      // After the first answer no request holds the card number: not the sidecar's, not a webhook's.
      expect(JSON.stringify(modifies.slice(1).map((c) => c.context))).not.toContain(CARD_NUMBER);
      expect(JSON.stringify(run.loopPayloads.slice(1))).not.toContain(CARD_NUMBER);
    },
  );

  it.each(LANGUAGES)(
    'runs the beforeToolCall handler in %s on the original arguments, and the tool with the rewritten ones',
    (language) => {
      const run = runOf(language);
      const handle = withJsonTextParsed(run.calls.find((c) => c.method === 'Handle'));
      // The sidecar called the runtime's handler with the context as the model wrote it.
      const modifyingCalls = (handle?.responses ?? []).filter(
        (r) => (r as { call?: { point?: string } }).call?.point !== undefined,
      );
      const toolCall = (n: number) => ({ id: `${OPERATION_ID}-loop-call-${n}`, name: 'search' });
      expect(modifyingCalls).toEqual([
        {
          call: {
            hookId: 'clamp-limit',
            operationId: OPERATION_ID,
            point: BEFORE_TOOL_CALL,
            plugin: 'limits',
            contextJson: {
              toolCall: toolCall(1),
              args: { query: 'agenthooks sidecar', limit: 50 },
              iteration: 1,
            },
          },
        },
        {
          call: {
            hookId: 'clamp-limit',
            operationId: OPERATION_ID,
            point: BEFORE_TOOL_CALL,
            plugin: 'limits',
            contextJson: {
              toolCall: toolCall(2),
              args: { query: 'agenthooks modifying hooks', limit: 5 },
              iteration: 2,
            },
          },
        },
      ]);
      // The handler clamped the first limit and left the second alone.
      expect(handle?.requests.slice(2)).toEqual([
        {
          reply: { modified: { resultJson: { args: { query: 'agenthooks sidecar', limit: 10 } } } },
        },
        { reply: { done: {} } },
      ]);
      // The sidecar answered the runtime the rewritten arguments, and the handler's outcome.
      const befores = modifyCallsOf(run.calls).filter((c) => c.point === BEFORE_TOOL_CALL);
      const handled = [outcome('clamp-limit', 'limits', BEFORE_TOOL_CALL, 'HANDLED')];
      expect(befores).toMatchObject([
        { result: { args: { query: 'agenthooks sidecar', limit: 10 } }, outcomes: handled },
        { result: {}, outcomes: handled },
      ]);
      // The tool ran with them: the turn's next request carries its result for
      // limit 10, after the model's own call, which asked for 50.
      const stops = modifyCallsOf(run.calls).filter((c) => c.point === SHOULD_STOP_AFTER_TURN);
      const turns = (c: ModifyCall | undefined) => (c?.context.messages as JsonValue[])?.slice(1);
      expect(turns(stops[0])).toEqual(firstTurn);
      expect(turns(stops[1])).toEqual([...firstTurn, ...secondTurn]);
    },
  );

  it.each(LANGUAGES)(
    'stops the agent loop in %s at the iteration the shouldStopAfterTurn webhook chose',
    (language) => {
      const run = runOf(language);
      const modifies = modifyCallsOf(run.calls);
      // The turn budget got each turn's context and said stop after the second.
      const budget = run.loopPayloads.filter((p) => p.path === '/stop');
      expect(budget.map((p) => [p.json.iteration, p.json.hadToolCalls, p.json.hookId])).toEqual([
        [1, true, 'turn-budget'],
        [2, true, 'turn-budget'],
      ]);
      const stops = modifies.filter((c) => c.point === SHOULD_STOP_AFTER_TURN);
      const delivered = [outcome('turn-budget', 'budget', SHOULD_STOP_AFTER_TURN, 'DELIVERED')];
      expect(stops).toMatchObject([
        {
          context: { iteration: 1, hadToolCalls: true },
          result: { stop: false },
          outcomes: delivered,
        },
        {
          context: { iteration: 2, hadToolCalls: true },
          result: { stop: true },
          outcomes: delivered,
        },
      ]);
      // The runtime stopped there: two iterations of three points, then the operation completed,
      // and the model's third turn never reached a request.
      expect(modifies.map((c) => [c.point, c.context.iteration])).toEqual([
        [TRANSFORM_CONTEXT, 1],
        [BEFORE_TOOL_CALL, 1],
        [SHOULD_STOP_AFTER_TURN, 1],
        [TRANSFORM_CONTEXT, 2],
        [BEFORE_TOOL_CALL, 2],
        [SHOULD_STOP_AFTER_TURN, 2],
      ]);
      const lastModify = run.calls.findLastIndex((c) => c.method === 'Modify');
      expect(run.calls[lastModify + 1]?.method).toBe('CompleteOperation');
      expect(JSON.stringify(modifies)).not.toContain(UNREACHED_TURN);
      expect(run.printed.filter((line) => line.step === 'AgentLoop.stopped')).toEqual([
        { step: 'AgentLoop.stopped', iteration: 2, by: 'shouldStopAfterTurn' },
      ]);
    },
  );

  it.each(LANGUAGES)(
    'fails closed in %s when the redactor is down: blocked, nothing applied, exit 1',
    async (language) => {
      const spec = commands.get(language);
      if (spec === undefined) throw new Error(`no command for ${language}`);
      const operationId = `op-example-${language}-blocked`;
      const failing = await startFailingRedactor(receiver.url);
      const firstCall = proxy.calls.length;
      let exit: Exit;
      try {
        exit = await runProcess(spec.command, spec.args, {
          ...spec.env,
          AGENTHOOKS_ADDRESS: proxy.address,
          RECEIVER_URL: failing.url,
          AGENTHOOKS_OPERATION_ID: operationId,
        });
      } finally {
        await failing.close();
      }
      const proxied = proxy.calls.slice(firstCall);
      await Promise.all(proxied.map((c) => c.ended));
      const calls = inCallOrder(proxied.map((c) => decode(c, operationId)));

      expect(exit.code, exit.stderr).toBe(1);
      // The sidecar answered the first transformContext with the block of the
      // redactor, which onError: block makes critical.
      const modifies = modifyCallsOf(calls);
      expect(modifies).toEqual([
        {
          point: TRANSFORM_CONTEXT,
          context: { messages: [userMessage(PROMPT)], iteration: 1 },
          result: undefined,
          blocked: {
            hookId: 'redact-card',
            errorCode: 'http_error',
            message: expect.stringContaining('HTTP 503'),
          },
          outcomes: [
            expect.objectContaining({
              hookId: 'redact-card',
              status: 'HOOK_OUTCOME_STATUS_FAILED',
              httpStatus: 503,
            }),
          ],
        },
      ]);
      // The runtime applied nothing and went no further: no tool call, no
      // other point, no completion of the operation (its DispatchStream,
      // closed before the loop, is listed last).
      expect(
        calls.slice(calls.findIndex((c) => c.method === 'Modify') + 1).map((c) => c.method),
      ).toEqual(['DispatchStream']);
      expect(loopLinesOf(printedLines(exit.stdout))).toEqual([
        {
          step: 'Modify.blocked',
          point: 'transformContext',
          iteration: 1,
          hookId: 'redact-card',
          errorCode: 'http_error',
          message: expect.stringContaining('HTTP 503'),
        },
      ]);
    },
    60_000,
  );

  it('gives the receiver equal payloads, and the sidecar equal requests, from the three languages', () => {
    const [python, go, ts] = LANGUAGES.map(runOf) as [Run, Run, Run];
    expect(sortedPayloads(go)).toEqual(sortedPayloads(python));
    expect(sortedPayloads(ts)).toEqual(sortedPayloads(python));
    expect(python.payloads).toHaveLength(PAYLOADS_PER_RUN);
    expect(loopPayloadsOf(go)).toEqual(loopPayloadsOf(python));
    expect(loopPayloadsOf(ts)).toEqual(loopPayloadsOf(python));
    expect(python.loopPayloads).toHaveLength(LOOP_PAYLOADS_PER_RUN);
    const requests = (run: Run) => run.calls.map((c) => [c.method, withJsonTextParsed(c.requests)]);
    expect(requests(go)).toEqual(requests(python));
    expect(requests(ts)).toEqual(requests(python));
    // Decision ids are new for every decision: compared by shape only.
    const responses = (run: Run) =>
      run.calls.map((c) => [
        c.method,
        JSON.parse(JSON.stringify(withJsonTextParsed(c.responses)), (key, v: unknown) =>
          key === 'decisionId' && typeof v === 'string' && /^[0-9a-f-]{36}$/.test(v)
            ? '<decision id>'
            : v,
        ),
      ]);
    expect(responses(go)).toEqual(responses(python));
    expect(responses(ts)).toEqual(responses(python));
    // The agent loop prints the same lines in every language.
    const loopLines = (run: Run) => normalise(loopLinesOf(run.printed), run.operationId);
    expect(loopLines(go)).toEqual(loopLines(python));
    expect(loopLines(ts)).toEqual(loopLines(python));
    expect(loopLines(python)).toHaveLength(11);
  });

  it("quotes the examples' error-reading functions in the README, as they are", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const between = (file: string, start: string, end: string) => {
      const text = readFileSync(join(ROOT, 'examples', file), 'utf8');
      const from = text.indexOf(start);
      const to = text.indexOf(end, from);
      expect(from, `${start} in examples/${file}`).toBeGreaterThanOrEqual(0);
      expect(to, `the end of ${start} in examples/${file}`).toBeGreaterThan(from);
      return text.slice(from, to + end.length);
    };
    expect(readme).toContain(
      between('python/runtime.py', 'def error_details(', '    return reason, violations\n'),
    );
    expect(readme).toContain(between('go/main.go', 'func errorDetails(', '\n}\n'));
    expect(readme).toContain(between('ts/runtime.ts', 'function errorDetails(', '\n}\n'));
  });

  it('reaches the sidecar over a unix socket from each language, with the same payloads', async () => {
    for (const language of LANGUAGES) {
      const overTcp = runs.get(language);
      if (overTcp === undefined) throw new Error(`the ${language} example did not run`);
      const { payloads, loopPayloads } = await runExample(
        language,
        `unix:${socket}`,
        `op-example-${language}-unix`,
      );
      expect(sortedPayloads({ ...overTcp, payloads })).toEqual(sortedPayloads(overTcp));
      expect(loopPayloadsOf({ loopPayloads })).toEqual(loopPayloadsOf(overTcp));
    }
  }, 60_000);
});
