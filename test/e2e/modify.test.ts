/**
 * `Modify` on the real sidecar with real webhooks on 127.0.0.1: hooks of one
 * point run in registration order, each sees the context as the ones before
 * it left it, their results compose by the point's rules, failures follow
 * `onError`, and a request that is not whole is refused before any hook runs.
 */
import type * as http from 'node:http';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Fallback, HookSchema, ModifyPoint, OnError } from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService, ModifyResponseSchema } from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { MODIFY_POINTS as MODIFY_POINT_NAMES } from '../../src/modify/compose.js';
import { objectMembers } from '../../src/modify/raw-json.js';
import { readConnectError } from '../support/connect-errors.js';
import { hookClient } from '../support/grpc-client.js';
import { openHandlerStream } from '../support/handler-client.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** How each path of the receiver answers: a JSON result, a status, or raw text, after `delayMs`. */
type Route = (
  body: Record<string, unknown>,
  raw: string,
) => {
  json?: unknown;
  status?: number;
  body?: string | Buffer;
  delayMs?: number;
};

let sidecar: SidecarProcess;
let receiver: Receiver;
const routes = new Map<string, Route>();

beforeAll(async () => {
  receiver = await startReceiver({
    answer: (req: ReceivedRequest, res: http.ServerResponse) => {
      const route = routes.get(req.path);
      const reply =
        route === undefined
          ? { status: 404 }
          : route(req.json as Record<string, unknown>, req.body);
      const send = () => {
        if (res.destroyed) return;
        if (reply.json !== undefined) {
          res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(reply.json));
        } else {
          res.writeHead(reply.status ?? 204);
          res.end(reply.body);
        }
      };
      if (reply.delayMs === undefined) send();
      else setTimeout(send, reply.delayMs).unref();
    },
  });
  sidecar = await startSidecar();
});
afterAll(async () => {
  await killSidecar(sidecar);
  await receiver.close();
});

function client() {
  return createClient(HookService, createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }));
}

let opCounter = 0;

/** A modifying hook of a test: its webhook is the receiver's `path` under the operation. */
interface TestHook {
  readonly id: string;
  readonly point: ModifyPoint;
  readonly path: string;
  readonly plugin?: string;
  readonly matcher?: string;
  readonly onError?: OnError;
  readonly fallback?: Fallback;
  /** Webhook timeout in seconds. */
  readonly timeout?: number;
}

/** Registers `hooks` on a fresh operation; returns its id. */
async function operationWith(hooks: readonly TestHook[]): Promise<string> {
  opCounter += 1;
  const operationId = `op-modify-${opCounter}`;
  await client().registerHooks({
    operationId,
    hooks: hooks.map(({ path, onError, fallback, timeout, ...h }) =>
      create(HookSchema, {
        ...h,
        webhook: { url: `${receiver.url}/${operationId}${path}`, onError, fallback, timeout },
      }),
    ),
  });
  return operationId;
}

/** The bodies the receiver got for an operation's paths, in order, as [path, body]. */
function received(operationId: string): [string, Record<string, unknown>][] {
  return receiver.requests
    .filter((r) => r.path.startsWith(`/${operationId}/`))
    .map((r) => [r.path.slice(operationId.length + 1), r.json as Record<string, unknown>]);
}

function route(operationId: string, path: string, fn: Route): void {
  routes.set(`/${operationId}${path}`, fn);
}

const msg = (text: string) => ({ role: 'user', content: text });

describe('Modify', () => {
  it("chains transformContext hooks in order, each seeing the last one's messages", async () => {
    const op = await operationWith([
      { id: 'redact', point: ModifyPoint.TRANSFORM_CONTEXT, plugin: 'privacy', path: '/redact' },
      { id: 'append', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/append' },
      { id: 'other-point', point: ModifyPoint.PREPARE_NEXT_TURN, path: '/never' },
    ]);
    route(op, '/redact', () => ({ json: { messages: [msg('[redacted]')] } }));
    route(op, '/append', (b) => ({
      json: { messages: [...(b.messages as unknown[]), msg('policy: be brief')] },
    }));
    // A large integer in an opaque member reaches the hooks unchanged.
    const context =
      '{"messages":[{"role":"user","content":"my card is 4111"}],"iteration":2,"taskState":{"seq":12345678901234567890}}';
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.TRANSFORM_CONTEXT,
      contextJson: context,
    });
    expect(answer.outcome.case).toBe('resultJson');
    expect(JSON.parse(answer.outcome.value as string)).toEqual({
      messages: [msg('[redacted]'), msg('policy: be brief')],
    });
    expect(answer.outcomes.map((o) => [o.hookId, o.status, o.point, o.plugin])).toEqual([
      ['redact', HookOutcomeStatus.DELIVERED, ModifyPoint.TRANSFORM_CONTEXT, 'privacy'],
      ['append', HookOutcomeStatus.DELIVERED, ModifyPoint.TRANSFORM_CONTEXT, ''],
    ]);
    const bodies = received(op);
    expect(bodies.map(([p]) => p)).toEqual(['/redact', '/append']);
    expect(bodies[0]?.[1]).toMatchObject({
      messages: [msg('my card is 4111')],
      iteration: 2,
      operationId: op,
      hookId: 'redact',
      point: 'transformContext',
      plugin: 'privacy',
    });
    expect(bodies[1]?.[1]).toMatchObject({ messages: [msg('[redacted]')], hookId: 'append' });
    const raw = receiver.requests.find((r) => r.path === `/${op}/redact`)?.body ?? '';
    expect(raw).toContain('"taskState":{"seq":12345678901234567890}');
  });

  it("ends beforeToolCall at a short-circuit, and matches hooks by the tool's name", async () => {
    const op = await operationWith([
      { id: 'other-tool', point: ModifyPoint.BEFORE_TOOL_CALL, matcher: '^write$', path: '/other' },
      { id: 'rewrite', point: ModifyPoint.BEFORE_TOOL_CALL, matcher: '^search$', path: '/rewrite' },
      { id: 'cache', point: ModifyPoint.BEFORE_TOOL_CALL, path: '/cache' },
      { id: 'never', point: ModifyPoint.BEFORE_TOOL_CALL, path: '/never' },
    ]);
    route(op, '/rewrite', (b) => ({ json: { args: { ...(b.args as object), limit: 5 } } }));
    route(op, '/cache', () => ({ json: { content: 'cached answer' } }));
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.BEFORE_TOOL_CALL,
      contextJson: JSON.stringify({
        toolCall: { id: 'call-1', name: 'search' },
        args: { q: 'x' },
        iteration: 0,
      }),
    });
    expect(JSON.parse(answer.outcome.value as string)).toEqual({
      content: 'cached answer',
      args: { q: 'x', limit: 5 },
    });
    expect(received(op).map(([p]) => p)).toEqual(['/rewrite', '/cache']);
    expect(received(op)[1]?.[1]).toMatchObject({ args: { q: 'x', limit: 5 } });
    expect(answer.outcomes.map((o) => o.hookId)).toEqual(['rewrite', 'cache']);
  });

  it("refuses a tool's name over 256 UTF-8 bytes with IDENTIFIER_TOO_LONG before any hook runs, as a lifecycle event's", async () => {
    const op = await operationWith([
      { id: 'same-a', point: ModifyPoint.BEFORE_TOOL_CALL, matcher: '(a|b)*z$', path: '/a' },
      { id: 'same-b', point: ModifyPoint.BEFORE_TOOL_CALL, matcher: '(a|b)*z$', path: '/b' },
      { id: 'after', point: ModifyPoint.AFTER_TOOL_CALL, path: '/after' },
    ]);
    route(op, '/a', () => ({ json: {} }));
    route(op, '/b', () => ({ json: {} }));
    route(op, '/after', () => ({ json: {} }));
    const context = (point: ModifyPoint, name: string) => ({
      operationId: op,
      point,
      contextJson: JSON.stringify({
        toolCall: { id: 'call-1', name },
        args: {},
        ...(point === ModifyPoint.AFTER_TOOL_CALL ? { result: 'r', isError: false } : {}),
        iteration: 0,
      }),
    });
    // 129 two-byte characters: 258 bytes in UTF-8, in fewer than 256 UTF-16 units.
    for (const name of ['é'.repeat(129), `${'a'.repeat(1_000_000)}z`]) {
      for (const point of [ModifyPoint.BEFORE_TOOL_CALL, ModifyPoint.AFTER_TOOL_CALL]) {
        const error = await client()
          .modify(context(point, name))
          .catch((e: unknown) => e);
        const read = readConnectError(error);
        expect(read.code).toBe(Code.InvalidArgument);
        expect(read.reason).toBe('IDENTIFIER_TOO_LONG');
        expect(read.fields).toEqual(['contextJson.toolCall.name']);
      }
    }
    expect(received(op)).toEqual([]);
    // 256 bytes are accepted; both hooks of the shared matcher run.
    const answer = await client().modify(
      context(ModifyPoint.BEFORE_TOOL_CALL, `${'é'.repeat(127)}bz`),
    );
    expect(answer.outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['same-a', HookOutcomeStatus.DELIVERED],
      ['same-b', HookOutcomeStatus.DELIVERED],
    ]);
  });

  it('skips a failed onError: continue hook, keeping the value it was given', async () => {
    const op = await operationWith([
      { id: 'first', point: ModifyPoint.BEFORE_AGENT_START, path: '/first' },
      { id: 'down', point: ModifyPoint.BEFORE_AGENT_START, path: '/down' },
      { id: 'wrong-shape', point: ModifyPoint.BEFORE_AGENT_START, path: '/wrong' },
      { id: 'no-change', point: ModifyPoint.BEFORE_AGENT_START, path: '/same' },
      { id: 'last', point: ModifyPoint.BEFORE_AGENT_START, path: '/last' },
    ]);
    route(op, '/first', () => ({ json: { systemPrompt: 'one' } }));
    route(op, '/down', () => ({ status: 500 }));
    route(op, '/wrong', () => ({ json: { messages: 'not an array', systemPrompt: 'never' } }));
    route(op, '/same', () => ({ status: 204 }));
    route(op, '/last', (b) => ({ json: { systemPrompt: `${b.systemPrompt as string}+last` } }));
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.BEFORE_AGENT_START,
      contextJson: JSON.stringify({ prompt: 'p', systemPrompt: 'zero', messages: [] }),
    });
    expect(JSON.parse(answer.outcome.value as string)).toEqual({ systemPrompt: 'one+last' });
    expect(answer.outcomes.map((o) => [o.hookId, o.status, o.errorCode, o.httpStatus])).toEqual([
      ['first', HookOutcomeStatus.DELIVERED, '', 200],
      ['down', HookOutcomeStatus.FAILED, 'http_error', 500],
      ['wrong-shape', HookOutcomeStatus.FAILED, 'invalid_response', 200],
      ['no-change', HookOutcomeStatus.DELIVERED, '', 204],
      ['last', HookOutcomeStatus.DELIVERED, '', 200],
    ]);
    expect(answer.outcomes[2]?.message).toBe('messages must be an array, got a string');
  });

  it('answers blocked, and no value, when an onError: block hook fails', async () => {
    const op = await operationWith([
      { id: 'shape', point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD, path: '/shape' },
      {
        id: 'guard',
        point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
        path: '/guard',
        onError: OnError.BLOCK,
      },
      { id: 'after', point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD, path: '/after' },
    ]);
    route(op, '/shape', () => ({ json: { payload: { model: 'm', temperature: 0 } } }));
    route(op, '/guard', () => ({ status: 200, body: 'not json' }));
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
      contextJson: '{"model":"m","payload":{"model":"m"}}',
    });
    expect(answer.outcome).toEqual({
      case: 'blocked',
      value: expect.objectContaining({ hookId: 'guard', errorCode: 'invalid_response' }),
    });
    expect(answer.outcomes.map((o) => o.hookId)).toEqual(['shape', 'guard']);
    expect(received(op).map(([p]) => p)).toEqual(['/shape', '/guard']);
  });

  it('fails the call UNAVAILABLE after the chain when a fallback: none webhook failed, as Dispatch does', async () => {
    const op = await operationWith([
      { id: 'down', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/down', fallback: Fallback.NONE },
      { id: 'after', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/after' },
      {
        id: 'observer',
        point: ModifyPoint.AFTER_PROVIDER_RESPONSE,
        path: '/observer',
        fallback: Fallback.NONE,
      },
    ]);
    route(op, '/down', () => ({ status: 503 }));
    route(op, '/after', () => ({ json: { messages: [msg('kept')] } }));
    route(op, '/observer', () => ({ status: 500 }));
    for (const transport of [
      createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
      createConnectTransport({ baseUrl: `http://${sidecar.http}`, httpVersion: '1.1' }),
    ]) {
      const caller = createClient(HookService, transport);
      const failure = await caller
        .modify({
          operationId: op,
          point: ModifyPoint.TRANSFORM_CONTEXT,
          contextJson: JSON.stringify({ messages: [msg('hi')] }),
        })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(readConnectError(failure)).toMatchObject({
        code: Code.Unavailable,
        reason: 'CRITICAL_HOOK_DELIVERY_FAILED',
        message: 'Critical webhook delivery failed: down',
      });
      // The rest of the chain ran, and every hook's outcome is in the details.
      const [details] = failure?.findDetails(ModifyResponseSchema) ?? [];
      expect(details?.outcomes.map((o) => [o.hookId, o.status, o.critical])).toEqual([
        ['down', HookOutcomeStatus.FAILED, true],
        ['after', HookOutcomeStatus.DELIVERED, false],
      ]);
      // An observe-only point's critical hook fails its call too.
      await expect(
        caller.modify({
          operationId: op,
          point: ModifyPoint.AFTER_PROVIDER_RESPONSE,
          contextJson: '{}',
        }),
      ).rejects.toMatchObject({ code: Code.Unavailable });
    }
    expect(received(op).map(([p]) => p)).toEqual([
      '/down',
      '/after',
      '/observer',
      '/down',
      '/after',
      '/observer',
    ]);
  });

  it('concatenates steering messages and merges provider request patches', async () => {
    const steer = await operationWith([
      { id: 'a', point: ModifyPoint.GET_STEERING_MESSAGES, path: '/a' },
      { id: 'b', point: ModifyPoint.GET_STEERING_MESSAGES, path: '/b' },
    ]);
    route(steer, '/a', () => ({ json: { messages: [msg('first')] } }));
    route(steer, '/b', () => ({ json: { messages: [msg('second')] } }));
    const steering = await client().modify({
      operationId: steer,
      point: ModifyPoint.GET_STEERING_MESSAGES,
      contextJson: JSON.stringify({ messages: [msg('history')], iteration: 1 }),
    });
    expect(JSON.parse(steering.outcome.value as string)).toEqual({
      messages: [msg('first'), msg('second')],
    });
    for (const [, body] of received(steer)) expect(body.messages).toEqual([msg('history')]);

    const req = await operationWith([
      { id: 'h1', point: ModifyPoint.BEFORE_PROVIDER_REQUEST, path: '/h1' },
      { id: 'h2', point: ModifyPoint.BEFORE_PROVIDER_REQUEST, path: '/h2' },
    ]);
    route(req, '/h1', () => ({ json: { headers: { 'x-a': '1', 'x-b': '2' }, timeoutMs: 1000 } }));
    route(req, '/h2', () => ({ json: { headers: { 'x-a': null }, maxRetries: 3 } }));
    const request = await client().modify({
      operationId: req,
      point: ModifyPoint.BEFORE_PROVIDER_REQUEST,
      contextJson: '{"model":"m","sessionId":"s","iteration":0,"streamOptions":{}}',
    });
    expect(JSON.parse(request.outcome.value as string)).toEqual({
      headers: { 'x-a': null, 'x-b': '2' },
      timeoutMs: 1000,
      maxRetries: 3,
    });
  });

  it('refuses a request that is not whole with INVALID_ARGUMENT, over gRPC and Connect JSON, running no hook', async () => {
    const op = await operationWith([{ id: 'x', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/x' }]);
    const cases: [Parameters<ReturnType<typeof client>['modify']>[0], string, string, string][] = [
      [
        { operationId: op, point: ModifyPoint.TRANSFORM_CONTEXT, contextJson: '{"messages":' },
        'contextJson',
        'MODIFY_CONTEXT_INVALID',
        'the context is not a JSON object',
      ],
      [
        { operationId: op, point: ModifyPoint.TRANSFORM_CONTEXT, contextJson: '{"iteration":1}' },
        'contextJson',
        'MODIFY_CONTEXT_INVALID',
        'transformContext needs messages in its context',
      ],
      [
        { operationId: op, contextJson: '{"messages":[]}' },
        'point',
        'MODIFY_POINT_REQUIRED',
        'a point is required',
      ],
      [
        { operationId: '', point: ModifyPoint.TRANSFORM_CONTEXT, contextJson: '{"messages":[]}' },
        'operationId',
        'OPERATION_ID_REQUIRED',
        '',
      ],
    ];
    const transports = {
      grpc: createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
      'connect-json': createConnectTransport({
        baseUrl: `http://${sidecar.http}`,
        httpVersion: '1.1',
        useBinaryFormat: false,
      }),
    };
    for (const [request, field, reason, message] of cases) {
      for (const [name, transport] of Object.entries(transports)) {
        const error = await createClient(HookService, transport)
          .modify(request)
          .catch((e: unknown) => e);
        const read = readConnectError(error);
        expect(read.code, `${reason} over ${name}`).toBe(Code.InvalidArgument);
        expect(read.reason).toBe(reason);
        expect(read.fields).toEqual([field]);
        expect(read.message).toContain(message);
      }
    }
    expect(received(op)).toEqual([]);
  });
});

describe('Modify with a large history', () => {
  it('carries an 8 MiB history to a webhook and back with the shipped defaults', async () => {
    const op = await operationWith([
      { id: 'summarise', point: ModifyPoint.PREPARE_NEXT_TURN, path: '/big' },
    ]);
    const content = 'x'.repeat(64 * 1024);
    const messages = Array.from({ length: 128 }, (_, i) => ({ role: 'user', content, i }));
    // The receiver answers the history it got, plus one message: 8 MiB each way.
    route(op, '/big', (b) => ({
      json: { messages: [...(b.messages as unknown[]), msg('summary')] },
    }));
    const contextJson = JSON.stringify({ messages, iteration: 7, hadToolCalls: false });
    expect(contextJson.length).toBeGreaterThan(8 * 1024 * 1024);
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.PREPARE_NEXT_TURN,
      contextJson,
    });
    expect(answer.outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['summarise', HookOutcomeStatus.DELIVERED],
    ]);
    const result = JSON.parse(answer.outcome.value as string) as { messages: unknown[] };
    expect(result.messages).toHaveLength(129);
    expect(result.messages[128]).toEqual(msg('summary'));
    expect(result.messages[5]).toEqual(messages[5]);
  }, 60_000);
});

describe('Modify with a composed result over 16 MiB', () => {
  it('fails RESOURCE_EXHAUSTED with MODIFY_RESULT_TOO_LARGE at the hook that passes it, running no later hook', async () => {
    const op = await operationWith([
      { id: 'first', point: ModifyPoint.GET_STEERING_MESSAGES, path: '/first' },
      { id: 'second', point: ModifyPoint.GET_STEERING_MESSAGES, path: '/second' },
      { id: 'third', point: ModifyPoint.GET_STEERING_MESSAGES, path: '/third' },
    ]);
    // Each answer is 9 MiB, under the 16 MiB of one answer; two together are not.
    const nineMiB = { messages: [msg('x'.repeat(9 * 1024 * 1024))] };
    route(op, '/first', () => ({ json: nineMiB }));
    route(op, '/second', () => ({ json: nineMiB }));
    route(op, '/third', () => ({ json: {} }));
    const error = await client()
      .modify({
        operationId: op,
        point: ModifyPoint.GET_STEERING_MESSAGES,
        contextJson: '{"messages":[]}',
      })
      .catch((e: unknown) => e);
    const read = readConnectError(error);
    expect([read.code, read.reason]).toEqual([Code.ResourceExhausted, 'MODIFY_RESULT_TOO_LARGE']);
    expect(read.message).toContain('hook second: the composed result would be');
    const info = ConnectError.from(error).findDetails(ErrorInfoSchema)[0];
    expect(info?.metadata).toMatchObject({ hookId: 'second', limit: String(16 * 1024 * 1024) });
    expect(received(op).map(([p]) => p)).toEqual(['/first', '/second']);
  }, 60_000);
});

describe('Modify with local handlers', () => {
  it('runs a hook with a handler on the attached Handle stream, chained with webhooks', async () => {
    const op = await operationWith([
      { id: 'webhook-first', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/first' },
    ]);
    // Handler hooks: one that rewrites, one that answers done, one that fails.
    await client().registerHooks({
      operationId: op,
      hooks: [
        create(HookSchema, {
          id: 'local-redact',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          plugin: 'privacy',
          handler: true,
        }),
        create(HookSchema, {
          id: 'local-done',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          handler: true,
        }),
        create(HookSchema, {
          id: 'local-fails',
          point: ModifyPoint.TRANSFORM_CONTEXT,
          handler: true,
        }),
      ],
    });
    route(op, '/first', () => ({ json: { messages: [msg('secret 4111'), msg('hello')] } }));
    const contextJson = JSON.stringify({ messages: [msg('start')], iteration: 1 });

    // Without a Handle stream the handler-only hooks are skipped.
    const unattached = await client().modify({
      operationId: op,
      point: ModifyPoint.TRANSFORM_CONTEXT,
      contextJson,
    });
    expect(unattached.outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['webhook-first', HookOutcomeStatus.DELIVERED],
      ['local-redact', HookOutcomeStatus.SKIPPED],
      ['local-done', HookOutcomeStatus.SKIPPED],
      ['local-fails', HookOutcomeStatus.SKIPPED],
    ]);

    const loader = hookClient(sidecar.grpc);
    const stream = openHandlerStream(loader);
    try {
      stream.answer((call) => {
        if (call.hookId === 'local-redact') {
          const ctx = JSON.parse(call.contextJson ?? '{}') as { messages: { content: string }[] };
          const messages = ctx.messages.map((m) => ({
            ...m,
            content: m.content.replace(/\d{4}/, '****'),
          }));
          return { modified: { resultJson: JSON.stringify({ messages }) } };
        }
        if (call.hookId === 'local-done') return { done: {} };
        return { error: { message: 'handler crashed' } };
      });
      // One stream serving two operations tells them apart by the call's operationId.
      await stream.attach([op, `${op}-other`]);
      const answer = await client().modify({
        operationId: op,
        point: ModifyPoint.TRANSFORM_CONTEXT,
        contextJson,
      });
      expect(JSON.parse(answer.outcome.value as string)).toEqual({
        messages: [msg('secret ****'), msg('hello')],
      });
      expect(answer.outcomes.map((o) => [o.hookId, o.status, o.errorCode])).toEqual([
        ['webhook-first', HookOutcomeStatus.DELIVERED, ''],
        ['local-redact', HookOutcomeStatus.HANDLED, ''],
        ['local-done', HookOutcomeStatus.HANDLED, ''],
        ['local-fails', HookOutcomeStatus.FAILED, 'handler_error'],
      ]);
      const calls = stream.calls.filter((c) => c.point !== undefined);
      expect(calls.map((c) => [c.hookId, c.point, c.plugin ?? '', c.operationId])).toEqual([
        ['local-redact', 'MODIFY_POINT_TRANSFORM_CONTEXT', 'privacy', op],
        ['local-done', 'MODIFY_POINT_TRANSFORM_CONTEXT', '', op],
        ['local-fails', 'MODIFY_POINT_TRANSFORM_CONTEXT', '', op],
      ]);
      // The handler saw what the webhook before it returned; the next one saw the redaction.
      expect(JSON.parse(calls[0]?.contextJson ?? '{}')).toEqual({
        messages: [msg('secret 4111'), msg('hello')],
        iteration: 1,
      });
      expect(JSON.parse(calls[1]?.contextJson ?? '{}').messages[0]).toEqual(msg('secret ****'));
    } finally {
      stream.end();
      loader.close();
    }
  });
});

describe('UnregisterHooks of one plugin', () => {
  it('stops serving its handlers, and with purge deletes its stored hooks, leaving the rest in order', async () => {
    opCounter += 1;
    const op = `op-plugins-${opCounter}`;
    const hook = (id: string, plugin: string) =>
      create(HookSchema, { id, point: ModifyPoint.TRANSFORM_CONTEXT, plugin, handler: true });
    await client().registerHooks({
      operationId: op,
      hooks: [hook('a1', 'alpha'), hook('b1', 'beta'), hook('n1', ''), hook('a2', 'alpha')],
    });
    const loader = hookClient(sidecar.grpc);
    const stream = openHandlerStream(loader);
    const run = () =>
      client().modify({
        operationId: op,
        point: ModifyPoint.TRANSFORM_CONTEXT,
        contextJson: '{"messages":[]}',
      });
    const statuses = async () =>
      (await run()).outcomes.map((o) => [o.hookId, HookOutcomeStatus[o.status]]);
    try {
      stream.answer(() => ({ done: {} }));
      await stream.attach([op]);
      expect(await statuses()).toEqual([
        ['a1', 'HANDLED'],
        ['b1', 'HANDLED'],
        ['n1', 'HANDLED'],
        ['a2', 'HANDLED'],
      ]);

      const dropped = await client().unregisterHooks({ operationId: op, plugin: 'alpha' });
      expect(dropped).toMatchObject({ handlersDropped: 1, hooksPurged: 0 });
      expect(await statuses()).toEqual([
        ['a1', 'SKIPPED'],
        ['b1', 'HANDLED'],
        ['n1', 'HANDLED'],
        ['a2', 'SKIPPED'],
      ]);

      const purged = await client().unregisterHooks({
        operationId: op,
        plugin: 'alpha',
        purge: true,
      });
      expect(purged.hooksPurged).toBe(2);
      const listed = await client().listHooks({ operationId: op });
      expect(listed.hooks.map((h) => h.id)).toEqual(['b1', 'n1']);

      // Attaching again serves every plugin's handlers that remain.
      await client().registerHooks({ operationId: op, hooks: [hook('a3', 'alpha')] });
      await stream.attach([op]);
      expect(await statuses()).toEqual([
        ['b1', 'HANDLED'],
        ['n1', 'HANDLED'],
        ['a3', 'HANDLED'],
      ]);
    } finally {
      stream.end();
      loader.close();
    }
  });

  it('refuses a plugin name over 256 bytes, naming the field', async () => {
    const error = await client()
      .unregisterHooks({ operationId: 'op-x', plugin: 'p'.repeat(257), purge: true })
      .catch((e: unknown) => e);
    const read = readConnectError(error);
    expect(read.code).toBe(Code.InvalidArgument);
    expect(read.reason).toBe('PLUGIN_NAME_TOO_LONG');
    expect(read.fields).toEqual(['plugin']);
  });
});

describe('Modify failures', () => {
  const failures: [string, Route, string][] = [
    ['times out', () => ({ json: { messages: [] }, delayMs: 5_000 }), 'timeout'],
    ['answers 500', () => ({ status: 500 }), 'http_error'],
    ['answers invalid JSON', () => ({ status: 200, body: '{"messages": [' }), 'invalid_response'],
    ['answers a wrongly shaped result', () => ({ json: { messages: 'x' } }), 'invalid_response'],
    [
      'answers over the limit',
      () => ({ status: 200, body: Buffer.alloc(16 * 1024 * 1024 + 1, 0x20) }),
      'response_too_large',
    ],
  ];
  for (const [what, failing, code] of failures) {
    for (const onError of [OnError.CONTINUE, OnError.BLOCK]) {
      it(`${what}: onError ${OnError[onError]}`, async () => {
        const op = await operationWith([
          { id: 'before', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/before' },
          {
            id: 'failing',
            point: ModifyPoint.TRANSFORM_CONTEXT,
            path: '/failing',
            onError,
            timeout: 0.3,
          },
          { id: 'after', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/after' },
        ]);
        route(op, '/before', () => ({ json: { messages: [msg('from before')] } }));
        route(op, '/failing', failing);
        route(op, '/after', (b) => ({
          json: { messages: [...(b.messages as unknown[]), msg('from after')] },
        }));
        const answer = await client().modify({
          operationId: op,
          point: ModifyPoint.TRANSFORM_CONTEXT,
          contextJson: JSON.stringify({ messages: [msg('original')], iteration: 0 }),
        });
        const failed = answer.outcomes.find((o) => o.hookId === 'failing');
        expect([failed?.status, failed?.errorCode]).toEqual([HookOutcomeStatus.FAILED, code]);
        if (onError === OnError.CONTINUE) {
          // The failed hook is skipped: the next one sees what the one before it returned.
          expect(JSON.parse(answer.outcome.value as string)).toEqual({
            messages: [msg('from before'), msg('from after')],
          });
          expect(answer.outcomes.map((o) => o.hookId)).toEqual(['before', 'failing', 'after']);
        } else {
          expect(answer.outcome.case).toBe('blocked');
          expect(answer.outcome.value).toMatchObject({ hookId: 'failing', errorCode: code });
          expect(received(op).map(([p]) => p)).toEqual(['/before', '/failing']);
        }
      }, 30_000);
    }
  }
});

/** A point's fixture: its context, what each hook returns, what each saw, the composed result. */
interface PointCase {
  readonly point: ModifyPoint;
  readonly context: Record<string, unknown>;
  /** Results of the first webhook, the handler and the second webhook. */
  readonly results: [unknown, unknown, unknown];
  /** The changes to the context the handler and the second webhook see. */
  readonly seen: [Record<string, unknown>, Record<string, unknown>];
  readonly result: Record<string, unknown>;
}

const toolCall = { id: 'call-1', name: 'search' };
const POINT_CASES: PointCase[] = [
  {
    point: ModifyPoint.BEFORE_AGENT_START,
    context: { prompt: 'p', systemPrompt: 's0', messages: [msg('x')] },
    results: [{ systemPrompt: 's1' }, { messages: [msg('y')] }, {}],
    seen: [{ systemPrompt: 's1' }, { systemPrompt: 's1', messages: [msg('y')] }],
    result: { systemPrompt: 's1', messages: [msg('y')] },
  },
  {
    point: ModifyPoint.BEFORE_TOOL_CALL,
    context: { toolCall, args: { q: 'a' }, iteration: 1 },
    results: [{ args: { q: 'b' } }, { isError: false }, { args: { q: 'c' } }],
    seen: [{ args: { q: 'b' } }, { args: { q: 'b' } }],
    result: { isError: false, args: { q: 'c' } },
  },
  {
    point: ModifyPoint.AFTER_TOOL_CALL,
    context: { toolCall, args: {}, result: 'raw', isError: false, iteration: 1 },
    results: [{ content: 'c1' }, { terminate: true }, { isError: true, terminate: false }],
    seen: [{ result: 'c1' }, { result: 'c1' }],
    result: { content: 'c1', isError: true, terminate: true },
  },
  {
    point: ModifyPoint.PREPARE_NEXT_TURN,
    context: { messages: [msg('x')], iteration: 2, hadToolCalls: true },
    results: [{ messages: [msg('a')] }, {}, { messages: [msg('b')] }],
    seen: [{ messages: [msg('a')] }, { messages: [msg('a')] }],
    result: { messages: [msg('b')] },
  },
  {
    point: ModifyPoint.TRANSFORM_CONTEXT,
    context: { messages: [msg('x')], iteration: 2, taskState: { step: 1 } },
    results: [{ messages: [msg('a')] }, { messages: [msg('h')] }, {}],
    seen: [{ messages: [msg('a')] }, { messages: [msg('h')] }],
    result: { messages: [msg('h')] },
  },
  {
    point: ModifyPoint.BEFORE_PROVIDER_REQUEST,
    context: { model: 'm', sessionId: 's', iteration: 0, streamOptions: { temperature: 0 } },
    results: [
      { headers: { 'x-a': '1' }, metadata: { tier: 'gold' } },
      { headers: { 'x-b': '2' }, timeoutMs: 5 },
      { headers: { 'x-a': null }, transport: 'sse', maxRetries: 1, cacheRetention: 'short' },
    ],
    seen: [{}, {}],
    result: {
      headers: { 'x-a': null, 'x-b': '2' },
      metadata: { tier: 'gold' },
      timeoutMs: 5,
      transport: 'sse',
      maxRetries: 1,
      cacheRetention: 'short',
    },
  },
  {
    point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
    context: { model: 'm', payload: { n: 1 } },
    results: [{ payload: { n: 2 } }, { payload: { n: 3 } }, {}],
    seen: [{ payload: { n: 2 } }, { payload: { n: 3 } }],
    result: { payload: { n: 3 } },
  },
  {
    point: ModifyPoint.AFTER_PROVIDER_RESPONSE,
    context: {
      model: 'm',
      content: 'hi',
      toolCallCount: 0,
      stopReason: 'stop',
      usageTokens: 10,
      iteration: 0,
    },
    results: [{ content: 'ignored' }, {}, {}],
    seen: [{}, {}],
    result: {},
  },
  {
    point: ModifyPoint.SHOULD_STOP_AFTER_TURN,
    context: { messages: [], iteration: 3, hadToolCalls: false },
    results: [{ stop: false }, {}, { stop: false }],
    seen: [{}, {}],
    result: { stop: false },
  },
  {
    point: ModifyPoint.GET_STEERING_MESSAGES,
    context: { messages: [msg('x')], iteration: 1 },
    results: [{ messages: [msg('a')] }, { messages: [msg('h')] }, { messages: [msg('b')] }],
    seen: [{}, {}],
    result: { messages: [msg('a'), msg('h'), msg('b')] },
  },
  {
    point: ModifyPoint.GET_FOLLOW_UP_MESSAGES,
    context: { messages: [msg('x')], iteration: 1, assistantText: 'done', stopReason: 'stop' },
    results: [{ messages: [msg('a')] }, {}, { messages: [msg('b')] }],
    seen: [{}, {}],
    result: { messages: [msg('a'), msg('b')] },
  },
  {
    point: ModifyPoint.BEFORE_COMPACT,
    context: { messages: [msg('x')], tokensBefore: 1000, reason: 'auto' },
    results: [{ cancel: false }, {}, { cancel: false }],
    seen: [{}, {}],
    result: { cancel: false },
  },
];

/** A webhook body without what the sidecar adds to the context. */
function contextOf(body: Record<string, unknown> | undefined): Record<string, unknown> {
  const { operationId: _o, hookId: _h, point: _p, plugin: _g, ...context } = body ?? {};
  return context;
}

describe('Modify at each of the twelve points', () => {
  it('runs two webhooks and a local handler in order, each seeing the context the ones before left', async () => {
    expect(POINT_CASES.map((c) => c.point).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    const loader = hookClient(sidecar.grpc);
    const stream = openHandlerStream(loader);
    const handlerResults = new Map<string, unknown>();
    stream.answer((call) => ({
      modified: { resultJson: JSON.stringify(handlerResults.get(call.hookId)) },
    }));
    try {
      for (const c of POINT_CASES) {
        const name = ModifyPoint[c.point];
        opCounter += 1;
        const op = `op-points-${opCounter}`;
        // Registration order: a webhook, a local handler, a webhook.
        await client().registerHooks({
          operationId: op,
          hooks: [
            create(HookSchema, {
              id: `a-${name}`,
              point: c.point,
              webhook: { url: `${receiver.url}/${op}/a` },
            }),
            create(HookSchema, { id: `h-${name}`, point: c.point, handler: true }),
            create(HookSchema, {
              id: `b-${name}`,
              point: c.point,
              webhook: { url: `${receiver.url}/${op}/b` },
            }),
          ],
        });
        route(op, '/a', () => ({ json: c.results[0] }));
        handlerResults.set(`h-${name}`, c.results[1]);
        route(op, '/b', () => ({ json: c.results[2] }));
        await stream.attach([op]);
        const answer = await client().modify({
          operationId: op,
          point: c.point,
          contextJson: JSON.stringify(c.context),
        });
        expect(answer.outcome.case, name).toBe('resultJson');
        expect(JSON.parse(answer.outcome.value as string), name).toEqual(c.result);
        expect(
          answer.outcomes.map((o) => [o.hookId, HookOutcomeStatus[o.status]]),
          name,
        ).toEqual([
          [`a-${name}`, 'DELIVERED'],
          [`h-${name}`, 'HANDLED'],
          [`b-${name}`, 'DELIVERED'],
        ]);
        const bodies = received(op);
        expect(contextOf(bodies[0]?.[1]), name).toEqual(c.context);
        const handlerCall = stream.calls.find((call) => call.hookId === `h-${name}`);
        expect(JSON.parse(handlerCall?.contextJson ?? '{}'), name).toEqual({
          ...c.context,
          ...c.seen[0],
        });
        expect(contextOf(bodies[1]?.[1]), name).toEqual({ ...c.context, ...c.seen[1] });
        expect(bodies[1]?.[1]).toMatchObject({
          hookId: `b-${name}`,
          point: MODIFY_POINT_NAMES[c.point - 1],
          plugin: '',
        });
      }
    } finally {
      stream.end();
      loader.close();
    }
  }, 60_000);

  it('sends no request after shouldStopAfterTurn stop or beforeCompact cancel', async () => {
    for (const [point, context, ender] of [
      [ModifyPoint.SHOULD_STOP_AFTER_TURN, { messages: [], iteration: 1 }, { stop: true }],
      [
        ModifyPoint.BEFORE_COMPACT,
        { messages: [], tokensBefore: 5, reason: 'manual' },
        { cancel: true },
      ],
    ] as const) {
      const op = await operationWith([
        { id: 'first', point, path: '/first' },
        { id: 'later', point, path: '/later' },
      ]);
      route(op, '/first', () => ({ json: ender }));
      const answer = await client().modify({
        operationId: op,
        point,
        contextJson: JSON.stringify(context),
      });
      expect(JSON.parse(answer.outcome.value as string)).toEqual(ender);
      expect(received(op).map(([p]) => p)).toEqual(['/first']);
      expect(answer.outcomes.map((o) => o.hookId)).toEqual(['first']);
    }
  });
});

describe('Modify with a 4 MiB history', () => {
  it('returns messages no hook changed byte-identical through a three-hook chain, integers above 2^53 included', async () => {
    const op = await operationWith([
      { id: 'echo-1', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/echo' },
      { id: 'none', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/none' },
      { id: 'echo-2', point: ModifyPoint.TRANSFORM_CONTEXT, path: '/echo' },
    ]);
    // Each echo answers the messages exactly as it received them, as text.
    route(op, '/echo', (_b, raw) => ({
      status: 200,
      body: `{"messages":${objectMembers(raw).get('messages')}}`,
    }));
    route(op, '/none', () => ({ json: {} }));
    const big = '9007199254740993123';
    const messages = `[${Array.from(
      { length: 64 },
      (_, i) => `{"role":"tool","id":${big}${i},"content":"${'y'.repeat(64 * 1024)}","score":1.50}`,
    ).join(', ')}]`;
    expect(messages.length).toBeGreaterThan(4 * 1024 * 1024);
    const answer = await client().modify({
      operationId: op,
      point: ModifyPoint.TRANSFORM_CONTEXT,
      contextJson: `{"messages": ${messages}, "iteration": 1}`,
    });
    expect(answer.outcomes.map((o) => HookOutcomeStatus[o.status])).toEqual([
      'DELIVERED',
      'DELIVERED',
      'DELIVERED',
    ]);
    expect(answer.outcome.value).toBe(`{"messages":${messages}}`);
  }, 60_000);
});
