import { renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { deflateRawSync, gzipSync } from 'node:zlib';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DenyClassification } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Executor, type ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  type DecideToolCallResponse,
  DecideToolCallResponseSchema,
  DecideToolResultRequestSchema,
  DecideToolResultResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import {
  type AnyClient,
  errorInfoOf,
  fromLoaderObject,
  hookClient,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import {
  answer,
  json,
  type RawBehaviour,
  type RawReceiver,
  startRawReceiver,
} from '../support/raw-receiver.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar, tempDbPath } from '../support/sidecar.js';

type Phase = 'before' | 'after';

const CONTEXT = {
  toolCallId: 'call_1',
  assistantMessageId: 'msg_1',
  identifier: 'fs',
  apiName: 'deleteFile',
  args: { path: '/etc/passwd' },
  callIndex: 0,
  stepIndex: 2,
  executor: Executor.SERVER,
};

const RESULT = { content: 'deleted', success: true, executionTime: 42, stop: true };

/** Pads a JSON text with spaces to exactly `bytes` bytes. */
function padded(value: unknown, bytes: number): string {
  const text = JSON.stringify(value);
  return text + ' '.repeat(bytes - Buffer.byteLength(text));
}

/** Headers in time, then a body that never completes before the hook's 0.3 s timeout. */
const stalledBody: RawBehaviour = (socket) => {
  socket.write(
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n{"decision"',
  );
};

/** A body cut by a reset after half of it. */
const resetMidBody: RawBehaviour = (socket) => {
  socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"decision":"al', () =>
    socket.resetAndDestroy(),
  );
};

interface Case {
  readonly name: string;
  readonly behaviour: RawBehaviour;
  /** What the control's answer is, before onError: a decision, a notification, or a failure. */
  readonly kind: 'allow' | 'deny' | 'ignored' | 'error';
  /** Reason of a deny, when the receiver gives one (else the default applies). */
  readonly reason?: string;
  readonly errorCode?: string;
}

/** `text` gzipped `times` times over. */
function stacked(times: number, text: string): Buffer {
  let bytes = Buffer.from(text);
  for (let i = 0; i < times; i++) bytes = gzipSync(bytes);
  return bytes;
}

const CASES: Case[] = [
  { name: 'allow', behaviour: json({ decision: 'allow' }), kind: 'allow' },
  {
    name: 'allow-extra',
    behaviour: json({
      decision: 'allow',
      requestId: 'r',
      updatedInput: { path: '/' },
      additionalContext: 'x',
    }),
    kind: 'allow',
  },
  {
    name: 'deny-reason',
    behaviour: json({ decision: 'deny', reason: '禁止执行该操作' }),
    kind: 'deny',
    reason: '禁止执行该操作',
  },
  { name: 'deny-empty', behaviour: json({ decision: 'deny', reason: '' }), kind: 'deny' },
  { name: 'deny-bare', behaviour: json({ decision: 'deny' }), kind: 'deny' },
  { name: 'no-content', behaviour: answer(204), kind: 'ignored' },
  { name: 'empty', behaviour: answer(200, ''), kind: 'ignored' },
  { name: 'not-json', behaviour: answer(200, 'ok, thanks'), kind: 'ignored' },
  { name: 'array', behaviour: json([{ decision: 'deny' }]), kind: 'ignored' },
  { name: 'null', behaviour: answer(200, 'null'), kind: 'ignored' },
  {
    name: 'nested',
    behaviour: json({ hookSpecificOutput: { permissionDecision: 'deny' } }),
    kind: 'ignored',
  },
  {
    name: 'exactly-64k',
    behaviour: answer(200, padded({ decision: 'allow' }, 65_536)),
    kind: 'allow',
  },
  {
    name: 'invalid-decision',
    behaviour: json({ decision: 'block' }),
    kind: 'error',
    errorCode: 'invalid_response',
  },
  {
    name: 'invalid-reason',
    behaviour: json({ decision: 'deny', reason: 3 }),
    kind: 'error',
    errorCode: 'invalid_response',
  },
  {
    name: 'http-500',
    behaviour: answer(500, '{"decision":"allow"}'),
    kind: 'error',
    errorCode: 'http_error',
  },
  {
    name: 'over-64k',
    behaviour: answer(200, padded({ decision: 'allow' }, 65_537)),
    kind: 'error',
    errorCode: 'response_too_large',
  },
  {
    name: 'bad-utf8',
    behaviour: answer(200, Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
    kind: 'error',
    errorCode: 'invalid_response',
  },
  {
    name: 'gzip-deny',
    behaviour: answer(200, gzipSync('{"decision":"deny","reason":"zipped"}'), {
      'content-encoding': 'gzip',
    }),
    kind: 'deny',
    reason: 'zipped',
  },
  {
    name: 'raw-deflate-deny',
    behaviour: answer(200, deflateRawSync('{"decision":"deny"}'), {
      'content-encoding': 'deflate',
    }),
    kind: 'deny',
  },
  {
    // Refused unread, as fetch refuses it; the sidecar carries on.
    name: 'six-codings',
    behaviour: answer(200, stacked(6, '{"decision":"deny"}'), {
      'content-encoding': 'gzip, gzip, gzip, gzip, gzip, gzip',
    }),
    kind: 'error',
    errorCode: 'invalid_response',
  },
  { name: 'stalled-body', behaviour: stalledBody, kind: 'error', errorCode: 'timeout' },
  { name: 'reset-mid-body', behaviour: resetMidBody, kind: 'error', errorCode: 'network_error' },
];

describe('tool-call and tool-result controls, decided by the sidecar process', () => {
  let raw: RawReceiver;
  let later: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;
  let redirectTargetHits = 0;

  beforeAll(async () => {
    later = await startReceiver();
    later.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"decision":"allow"}');
    });
    const target = await startReceiver();
    target.respond((_req, res) => {
      redirectTargetHits += 1;
      res.end('{"decision":"allow"}');
    });
    const behaviours: Record<string, RawBehaviour> = {
      '/redirect': answer(302, '', { location: `${target.url}/allow` }),
    };
    for (const c of CASES) behaviours[`/${c.name}`] = c.behaviour;
    raw = await startRawReceiver(behaviours);
    sidecar = await startSidecar();
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await raw?.close();
    await later?.close();
  });

  const allCases: Case[] = [
    ...CASES,
    { name: 'redirect', behaviour: answer(302), kind: 'error', errorCode: 'http_error' },
  ];
  let op = 0;

  for (const phase of ['before', 'after'] as const) {
    for (const onError of ['ON_ERROR_CONTINUE', 'ON_ERROR_BLOCK'] as const) {
      for (const c of allCases) {
        if (onError === 'ON_ERROR_BLOCK' && c.kind !== 'error' && c.kind !== 'ignored') continue;
        const expected =
          c.kind === 'deny'
            ? `deny (${c.reason ?? 'default'})`
            : c.kind === 'error' && onError === 'ON_ERROR_BLOCK'
              ? 'deny (hook_control_error)'
              : 'allow';
        it(`${phase}ToolCall, ${c.name}, ${onError}: ${expected}`, async () => {
          const operationId = `op-${phase}-${++op}`;
          const type =
            phase === 'before' ? 'HOOK_TYPE_BEFORE_TOOL_CALL' : 'HOOK_TYPE_AFTER_TOOL_CALL';
          const laterHits = later.requests.length;
          const targetHits = redirectTargetHits;
          await unary(client, 'RegisterHooks', {
            operationId,
            hooks: [
              {
                id: 'under-test',
                type,
                matcher: '^fs/',
                webhook: {
                  url: `${raw.url}/${c.name}`,
                  responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
                  onError,
                  timeout: 0.3,
                },
              },
              {
                id: 'later',
                type,
                webhook: {
                  url: `${later.url}/later`,
                  responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
                },
              },
            ],
          });
          const res = await decide(client, phase, operationId);
          const decision = res.decision?.outcome;
          const laterRan = later.requests.length > laterHits;
          if (expected === 'allow') {
            expect(decision?.case).toBe('allow');
            expect(laterRan).toBe(true);
            expect(res.outcomes.map((o) => o.hookId)).toEqual(['under-test', 'later']);
            if (c.kind === 'error') expect(res.outcomes[0]?.errorCode).toBe(c.errorCode);
            return;
          }
          expect(decision?.case).toBe('deny');
          if (decision?.case !== 'deny') return;
          const blockedByControlError = c.kind === 'error';
          const reason = blockedByControlError
            ? 'hook_control_error'
            : c.reason || `Blocked by ${phase}ToolCall hook.`;
          expect(decision.value.reason).toBe(reason);
          expect(decision.value.classification).toBe(
            blockedByControlError
              ? DenyClassification.HOOK_CONTROL_ERROR
              : DenyClassification.HOOK_DENIED,
          );
          expect(decision.value.hookId).toBe('under-test');
          expect(decision.value.operationId).toBe(operationId);
          expect(laterRan).toBe(false);
          expect(res.outcomes.map((o) => o.hookId)).toEqual(['under-test']);
          expectBlockedResult(decision.value.blockedResult, phase, reason);
          if (c.name === 'redirect') expect(redirectTargetHits).toBe(targetHits);
        });
      }
    }
  }

  it('delivers large arguments intact to the receiver through the gRPC edge that defers their decode', async () => {
    // Over 16 KiB the gRPC edge defers decoding the arguments (src/server/request-codec.ts).
    const args = {
      path: '/tmp/big.ts',
      content: 'const ü = "x\\ty"; // ☃\n'.repeat(4000),
      nested: { list: [1, 2.5, 'three', null, true, { deep: [] }] },
    };
    const operationId = `op-large-args-${++op}`;
    for (const type of ['HOOK_TYPE_BEFORE_TOOL_CALL', 'HOOK_TYPE_AFTER_TOOL_CALL']) {
      await unary(client, 'RegisterHooks', {
        operationId,
        hooks: [
          {
            id: `large-${type}`,
            type,
            webhook: { url: `${later.url}/large`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
          },
        ],
      });
    }
    const context = { ...CONTEXT, operationId, args };
    const before = later.requests.length;
    const call = await unary(
      client,
      'DecideToolCall',
      toLoaderObject(
        DecideToolCallRequestSchema,
        create(DecideToolCallRequestSchema, { event: { context } }),
      ),
    );
    expect(fromLoaderObject(DecideToolCallResponseSchema, call).decision?.outcome.case).toBe(
      'allow',
    );
    const result = await unary(
      client,
      'DecideToolResult',
      toLoaderObject(
        DecideToolResultRequestSchema,
        create(DecideToolResultRequestSchema, { event: { context, result: RESULT } }),
      ),
    );
    expect(fromLoaderObject(DecideToolResultResponseSchema, result).decision?.outcome.case).toBe(
      'allow',
    );
    const received = later.requests.slice(before);
    expect(received).toHaveLength(2);
    for (const request of received) {
      // The tool-call payload spreads the context into the body.
      expect((request.json as { args: unknown }).args).toEqual(args);
    }
  });

  it('never follows a redirect: the Location target gets no request', () => {
    expect(redirectTargetHits).toBe(0);
  });
});

function expectBlockedResult(result: ToolResult | undefined, phase: Phase, reason: string) {
  expect(result?.content).toBe(reason);
  expect(result?.success).toBe(false);
  expect(result?.error?.kind).toEqual({ case: 'stringValue', value: 'hook_denied' });
  if (phase === 'before') {
    expect(result?.state).toEqual({ type: 'blocked', reason });
    expect(result?.executionTime).toBe(0);
  } else {
    expect(result?.state).toEqual({ type: 'blocked', phase: 'afterToolCall', reason });
    // The timings and stop of the original result stay.
    expect(result?.executionTime).toBe(RESULT.executionTime);
    expect(result?.stop).toBe(true);
  }
}

async function decide(
  client: AnyClient,
  phase: Phase,
  operationId: string,
  operationChain: string[] = [],
  options: grpc.CallOptions = {},
): Promise<DecideToolCallResponse> {
  const context = { ...CONTEXT, operationId };
  if (phase === 'before') {
    const req = create(DecideToolCallRequestSchema, { event: { context }, operationChain });
    const res = await unary(
      client,
      'DecideToolCall',
      toLoaderObject(DecideToolCallRequestSchema, req),
      options,
    );
    return fromLoaderObject(DecideToolCallResponseSchema, res);
  }
  const req = create(DecideToolResultRequestSchema, {
    event: { context, mocked: false, result: RESULT },
    operationChain,
  });
  const res = await unary(
    client,
    'DecideToolResult',
    toLoaderObject(DecideToolResultRequestSchema, req),
    options,
  );
  return fromLoaderObject(DecideToolResultResponseSchema, res) as unknown as DecideToolCallResponse;
}

describe('control order, live environment hooks and cancellation', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;
  let envFile: string;
  let generation = 1;

  /** Replaces the env file atomically and waits for the sidecar to load it. */
  async function writeEnv(lines: string[]) {
    const tmp = `${envFile}.tmp`;
    writeFileSync(tmp, `${lines.join('\n')}\n`);
    renameSync(tmp, envFile);
    generation += 1;
    const want = generation;
    await sidecar.waitForLog((l) => l.msg === 'environment reloaded' && l.generation === want);
  }

  beforeAll(async () => {
    receiver = await startReceiver();
    receiver.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"decision":"allow"}');
    });
    const db = tempDbPath();
    envFile = join(dirname(db), 'hooks.env');
    writeFileSync(envFile, '# no environment hooks yet\n');
    sidecar = await startSidecar({ db, args: ['--hooks-env-file', envFile] });
    client = hookClient(sidecar.grpc);
    await sidecar.waitForLog((l) => l.msg === 'environment reloaded' && l.generation === 1);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('runs caller controls in chain order, then the environment control once, last', async () => {
    await writeEnv([
      `AGENT_HOOK_WEBHOOK_URL=${receiver.url}/env`,
      'AGENT_HOOK_WEBHOOK_TOKEN=s3cret-token',
      'AGENT_HOOK_WEBHOOK_EVENTS=beforeToolCall,afterStep',
      'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
    ]);
    const control = (id: string) => ({
      id,
      type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
      webhook: { url: `${receiver.url}/${id}`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-parked',
      hooks: [control('shared-id')],
    });
    await unary(client, 'RegisterHooks', {
      operationId: 'op-continued',
      hooks: [control('shared-id')],
    });
    const start = receiver.requests.length;
    const res = await decide(client, 'before', 'op-continued', ['op-parked', 'op-continued']);
    expect(res.decision?.outcome.case).toBe('allow');
    const controls = res.outcomes.map((o) => [o.operationId, o.hookId]);
    expect(controls).toEqual([
      ['op-parked', 'shared-id'],
      ['op-continued', 'shared-id'],
      ['', 'server-env-webhook:beforeToolCall'],
    ]);
    const hits = receiver.requests.slice(start).map((r) => r.path);
    expect(hits).toEqual(['/shared-id', '/shared-id', '/env']);
    const envRequest = receiver.requests[start + 2];
    expect(envRequest?.headers.authorization).toBe('Bearer s3cret-token');
    expect(envRequest?.json).toMatchObject({
      hookId: 'server-env-webhook:beforeToolCall',
      hookType: 'beforeToolCall',
    });
  });

  it('applies an environment control added through the env file, and stops when it is removed', async () => {
    await writeEnv([
      `AGENT_HOOK_WEBHOOK_URL=${receiver.url}/env-live`,
      'AGENT_HOOK_WEBHOOK_TOKEN=t',
      'AGENT_HOOK_WEBHOOK_EVENTS=afterToolCall',
      'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
    ]);
    let start = receiver.requests.length;
    let res = await decide(client, 'after', 'op-live');
    expect(res.outcomes.map((o) => o.hookId)).toEqual(['server-env-webhook:afterToolCall']);
    expect(receiver.requests.slice(start).map((r) => r.path)).toEqual(['/env-live']);

    await writeEnv(['# environment hook removed']);
    start = receiver.requests.length;
    res = await decide(client, 'after', 'op-live');
    expect(res.decision?.outcome.case).toBe('allow');
    expect(res.outcomes).toEqual([]);
    expect(receiver.requests.length).toBe(start);
  });

  it('fails every registration, decision and dispatch with INVALID_ENVIRONMENT until the environment is fixed', async () => {
    await writeEnv([`AGENT_HOOK_WEBHOOK_URL=${receiver.url}/env`, 'AGENT_HOOK_WEBHOOK_EVENTS=...']);
    for (const call of [
      () => unary(client, 'RegisterHooks', { operationId: 'op-invalid-env', hooks: [] }),
      () => decide(client, 'before', 'op-invalid-env'),
      () =>
        unary(client, 'Dispatch', {
          event: { afterStep: { operationId: 'op-invalid-env', userId: 'u' } },
        }),
    ]) {
      const err = (await call().then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      )) as grpc.ServiceError;
      expect(err?.code).toBe(9);
      expect(errorInfoOf(err)?.reason).toBe('INVALID_ENVIRONMENT');
      expect(err.details).not.toContain(receiver.url);
    }
    // Half-configured without a URL, or with an empty one: refused too, never "no hooks".
    for (const lines of [
      ['AGENT_HOOK_WEBHOOK_URL='],
      ['AGENT_HOOK_WEBHOOK_ON_ERROR=block'],
      ['AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolResult'],
    ]) {
      await writeEnv(lines);
      const err = (await decide(client, 'before', 'op-invalid-env').then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      )) as grpc.ServiceError;
      expect(err?.code, lines[0]).toBe(9);
      expect(errorInfoOf(err)?.reason, lines[0]).toBe('INVALID_ENVIRONMENT');
    }
    await writeEnv(['# fixed']);
    const res = await decide(client, 'before', 'op-invalid-env');
    expect(res.decision?.outcome.case).toBe('allow');
  });

  it('fails decisions with INVALID_ENVIRONMENT for an env file name it would not read, never allowing', async () => {
    // A receiver that is down: with the misspelt ON_ERROR ignored, onError is continue and the call allowed.
    const down = await startReceiver();
    const downUrl = `${down.url}/env`;
    await down.close();
    const control = [
      `AGENT_HOOK_WEBHOOK_URL=${downUrl}`,
      'AGENT_HOOK_WEBHOOK_TOKEN=s3cret-token',
      'AGENT_HOOK_WEBHOOK_EVENTS=beforeToolCall',
      'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
    ];
    for (const [line, message] of [
      ['AGENT_HOOK_WEBHOOK_ONERROR=block', "did you mean 'AGENT_HOOK_WEBHOOK_ON_ERROR'?"],
      ['AGENTHOOKS_AUTH_TOKN=s3cret-token', 'process environment or flags only'],
    ] as const) {
      await writeEnv([...control, line]);
      const err = (await decide(client, 'before', 'op-misspelt-env').then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      )) as grpc.ServiceError;
      expect(err?.code, line).toBe(9);
      expect(errorInfoOf(err)?.reason, line).toBe('INVALID_ENVIRONMENT');
      expect(err.details, line).toContain(message);
      expect(err.details, line).not.toContain('s3cret-token');
    }
    await writeEnv([...control, 'AGENT_HOOK_WEBHOOK_ON_ERROR=block']);
    const res = await decide(client, 'before', 'op-misspelt-env');
    expect(res.decision?.outcome.case).toBe('deny');
    await writeEnv(['# fixed']);
  });

  it('aborts the webhook when the caller cancels, and never answers allow', async () => {
    const raw = await startRawReceiver({ '/never': () => {} });
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-cancel',
        hooks: [
          {
            id: 'never',
            type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
            webhook: { url: `${raw.url}/never`, responseHandling: 'RESPONSE_HANDLING_TOOL_CALL' },
          },
        ],
      });
      const req = create(DecideToolCallRequestSchema, {
        event: { context: { ...CONTEXT, operationId: 'op-cancel' } },
      });
      const outcome = new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) => {
        const call = client.DecideToolCall(
          toLoaderObject(DecideToolCallRequestSchema, req),
          (err: grpc.ServiceError | null, res: unknown) => resolve({ err, res }),
        ) as grpc.ClientUnaryCall;
        void raw.requested('/never').then(() => call.cancel());
      });
      const { err, res } = await outcome;
      expect(res).toBeUndefined();
      expect(err?.code).toBe(1);
      await raw.socketClosed('/never');

      // A deadline behaves the same: the answer is an error, never allow.
      const late = await decide(client, 'before', 'op-cancel', [], {
        deadline: Date.now() + 300,
      }).then(
        () => 'answered',
        (e: grpc.ServiceError) => e.code,
      );
      expect(late).toBe(4);
    } finally {
      await raw.close();
    }
  });
});

describe('header templates of controls', () => {
  it('resolves allowed variables from the env file at send time, and fails a missing one as configuration under onError', async () => {
    const receiver = await startReceiver();
    receiver.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"decision":"allow"}');
    });
    const db = tempDbPath();
    const envFile = join(dirname(db), 'hooks.env');
    writeFileSync(envFile, 'POLICY_TOKEN=from-env-file\n');
    const sidecar = await startSidecar({
      db,
      args: ['--hooks-env-file', envFile, '--caller-env-allowlist', 'POLICY_TOKEN,MISSING_TOKEN'],
    });
    const client = hookClient(sidecar.grpc);
    try {
      const control = (id: string, header: string) => ({
        id,
        type: 'HOOK_TYPE_BEFORE_TOOL_CALL',
        webhook: {
          url: `${receiver.url}/${id}`,
          responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          onError: 'ON_ERROR_BLOCK',
          headers: { Authorization: header },
          allowedEnvVars: ['POLICY_TOKEN', 'MISSING_TOKEN'],
        },
      });
      await unary(client, 'RegisterHooks', {
        operationId: 'op-templates',
        hooks: [
          control('resolved', 'Bearer ${POLICY_TOKEN}'),
          control('missing', 'Bearer ${MISSING_TOKEN}'),
        ],
      });
      const res = await decide(client, 'before', 'op-templates');
      expect(receiver.requests.map((r) => [r.path, r.headers.authorization])).toEqual([
        ['/resolved', 'Bearer from-env-file'],
      ]);
      expect(res.outcomes.map((o) => [o.hookId, o.errorCode])).toEqual([
        ['resolved', ''],
        ['missing', 'configuration'],
      ]);
      const decision = res.decision?.outcome;
      expect(decision?.case === 'deny' && decision.value.reason).toBe('hook_control_error');
      // The stored config keeps the template, never the value.
      const listed = await unary<{ hooks: { webhook: { headers: Record<string, string> } }[] }>(
        client,
        'ListHooks',
        { operationId: 'op-templates' },
      );
      expect(listed.hooks[0]?.webhook.headers.Authorization).toBe('Bearer ${POLICY_TOKEN}');
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});
