import * as http2 from 'node:http2';
import {
  create,
  fromBinary,
  type JsonObject,
  type MessageInitShape,
  toBinary,
} from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor, type HookEvent, HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import {
  DecideToolCallRequestSchema,
  DecideToolCallResponseSchema,
  DispatchRequestSchema,
  DispatchResponseSchema,
  DispatchStreamResponseSchema,
  HandleRequestSchema,
  type HandleResponse,
  HandleResponseSchema,
} from '../../gen/agenthooks/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../gen/google/rpc/status_pb.js';
import {
  type AnyClient,
  errorInfoOf,
  fromLoaderObject,
  hookClient,
  type LoaderObject,
  toLoaderObject,
  unary,
} from '../support/grpc-client.js';
import { openHandlerStream } from '../support/handler-client.js';
import { eventually, metric } from '../support/observe.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

function dispatchRequest(event: HookEvent) {
  return toLoaderObject(DispatchRequestSchema, create(DispatchRequestSchema, { event }));
}

function afterStep(operationId: string, stepIndex = 0, finalState?: JsonObject, contentBytes = 0) {
  const content = contentBytes > 0 ? 'c'.repeat(contentBytes) : undefined;
  return create(HookEventSchema, {
    event: {
      case: 'afterStep',
      value: { operationId, stepIndex, agentId: 'a', userId: 'u', finalState, content },
    },
  });
}

function webhook(id: string, url: string, type = 'HOOK_TYPE_AFTER_STEP', extra: LoaderObject = {}) {
  return { id, type, webhook: { url, ...extra } };
}

const TOOL_CONTEXT = {
  toolCallId: 'call_9',
  assistantMessageId: 'm',
  identifier: 'web',
  apiName: 'search',
  args: { q: 'agenthooks' },
  executor: Executor.SERVER,
};

async function decideToolCall(client: AnyClient, operationId: string) {
  const req = create(DecideToolCallRequestSchema, {
    event: { context: { ...TOOL_CONTEXT, operationId } },
  });
  const res = await unary(
    client,
    'DecideToolCall',
    toLoaderObject(DecideToolCallRequestSchema, req),
  );
  return fromLoaderObject(DecideToolCallResponseSchema, res);
}

describe('local handlers over the Handle stream', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;

  beforeAll(async () => {
    receiver = await startReceiver();
    sidecar = await startSidecar({ args: ['--handler-timeout', '0.5'] });
    client = hookClient(sidecar.grpc);
  });

  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  it('runs handlers in registration order between webhooks while attached, and webhooks only once detached', async () => {
    const op = 'op-local';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [
        { id: 'h1', type: 'HOOK_TYPE_AFTER_STEP', handler: true },
        webhook('w1', `${receiver.url}/w1`),
        { ...webhook('h2', `${receiver.url}/h2-webhook`), handler: true },
        webhook('w2', `${receiver.url}/w2`),
      ],
    });
    const runtime = openHandlerStream(client);
    await runtime.attach([op]);
    const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: op });
    expect(listed.handlerAttached).toBe(true);

    let start = receiver.requests.length;
    const res = await unary<LoaderObject>(
      client,
      'Dispatch',
      dispatchRequest(afterStep(op, 3, { messages: 7 })),
    );
    expect(res.outcomes.map((o: LoaderObject) => [o.hookId, o.status])).toEqual([
      ['h1', 'HOOK_OUTCOME_STATUS_HANDLED'],
      ['w1', 'HOOK_OUTCOME_STATUS_DELIVERED'],
      ['h2', 'HOOK_OUTCOME_STATUS_HANDLED'],
      ['w2', 'HOOK_OUTCOME_STATUS_DELIVERED'],
    ]);
    const merged = [
      ...runtime.calls.map((c) => ({ at: c.at, what: `handler:${c.hookId}` })),
      ...receiver.requests.slice(start).map((r) => ({ at: r.at, what: `webhook:${r.path}` })),
    ].sort((a, b) => a.at - b.at);
    expect(merged.map((m) => m.what)).toEqual([
      'handler:h1',
      'webhook:/w1',
      'handler:h2',
      'webhook:/w2',
    ]);
    // Handlers see finalState; webhooks never do.
    expect(runtime.calls[0]?.event.afterStep.finalState).toMatchObject({
      fields: { messages: { numberValue: 7 } },
    });
    expect(receiver.requests[start]?.json).not.toHaveProperty('finalState');
    expect(runtime.calls.map((c) => c.operationId)).toEqual([op, op]);

    runtime.end();
    await waitUntil(
      async () =>
        !(await unary<LoaderObject>(client, 'ListHooks', { operationId: op })).handlerAttached,
    );
    start = receiver.requests.length;
    const queued = await unary<LoaderObject>(client, 'Dispatch', dispatchRequest(afterStep(op, 4)));
    expect(queued.outcomes.map((o: LoaderObject) => [o.hookId, o.status])).toEqual([
      ['h1', 'HOOK_OUTCOME_STATUS_SKIPPED'],
      ['w1', 'HOOK_OUTCOME_STATUS_DELIVERED'],
      ['h2', 'HOOK_OUTCOME_STATUS_DELIVERED'],
      ['w2', 'HOOK_OUTCOME_STATUS_DELIVERED'],
    ]);
    expect(receiver.requests.slice(start).map((r) => r.path)).toEqual([
      '/w1',
      '/h2-webhook',
      '/w2',
    ]);
    expect(runtime.calls).toHaveLength(2);
  });

  it('answers the first mock, never calls the second handler, and keeps a mock that came with an error', async () => {
    const op = 'op-mock';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [
        { id: 'observe', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true },
        { id: 'mock-1', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true, matcher: '^web/' },
        { id: 'mock-2', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true },
      ],
    });
    const runtime = openHandlerStream(client);
    runtime.answer((call) => {
      if (call.hookId === 'observe') return { done: {} };
      return {
        mock: {
          result: { content: `{"items":["from ${call.hookId}"]}`, success: true },
          ...(call.hookId === 'mock-1' ? { error: 'handler threw after mocking' } : {}),
        },
      };
    });
    await runtime.attach([op]);
    const res = await decideToolCall(client, op);
    expect(res.decision?.outcome.case).toBe('mock');
    const mock = res.decision?.outcome.case === 'mock' ? res.decision.outcome.value : undefined;
    expect(mock?.hookId).toBe('mock-1');
    expect(mock?.result?.content).toBe('{"items":["from mock-1"]}');
    expect(runtime.calls.map((c) => c.hookId)).toEqual(['observe', 'mock-1']);
    expect(runtime.calls[1]?.event.beforeToolCall.context.apiName).toBe('search');

    // Without a Handle stream (queue mode) there are no mocks: the call is allowed.
    runtime.cancel();
    await waitUntil(
      async () =>
        !(await unary<LoaderObject>(client, 'ListHooks', { operationId: op })).handlerAttached,
    );
    const queued = await decideToolCall(client, op);
    expect(queued.decision?.outcome.case).toBe('allow');
  });

  it('counts a handler error, a timeout and a dropped stream as failures, and runs the next hook', async () => {
    const op = 'op-failing';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [
        { id: 'throws', type: 'HOOK_TYPE_AFTER_STEP', handler: true },
        { id: 'silent', type: 'HOOK_TYPE_AFTER_STEP', handler: true },
        webhook('after', `${receiver.url}/after-failures`),
      ],
    });
    const runtime = openHandlerStream(client);
    runtime.answer((call) =>
      call.hookId === 'throws' ? { error: { message: 'boom' } } : undefined,
    );
    await runtime.attach([op]);
    const res = await unary<LoaderObject>(client, 'Dispatch', dispatchRequest(afterStep(op)));
    expect(res.outcomes.map((o: LoaderObject) => [o.hookId, o.status, o.errorCode ?? ''])).toEqual([
      ['throws', 'HOOK_OUTCOME_STATUS_FAILED', 'handler_error'],
      ['silent', 'HOOK_OUTCOME_STATUS_FAILED', 'handler_timeout'],
      ['after', 'HOOK_OUTCOME_STATUS_DELIVERED', ''],
    ]);

    // The stream drops while a handler runs: that call fails, the webhook still runs.
    runtime.answer((call) => {
      if (call.hookId === 'throws') runtime.cancel();
      return undefined;
    });
    const dropped = await unary<LoaderObject>(
      client,
      'Dispatch',
      dispatchRequest(afterStep(op, 1)),
    );
    expect(dropped.outcomes[0]).toMatchObject({ hookId: 'throws', errorCode: 'handler_detached' });
    // The dispatch started in local mode: the rest of its handlers fail as detached too.
    expect(dropped.outcomes[1]).toMatchObject({
      hookId: 'silent',
      errorCode: 'handler_detached',
    });
    expect(dropped.outcomes[2]).toMatchObject({
      hookId: 'after',
      status: 'HOOK_OUTCOME_STATUS_DELIVERED',
    });
  });

  it('lets a newer attachment replace the older one, which is told', async () => {
    const op = 'op-replace';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [{ id: 'h', type: 'HOOK_TYPE_AFTER_STEP', handler: true }],
    });
    const first = openHandlerStream(client);
    await first.attach([op, 'op-other']);
    const second = openHandlerStream(client);
    await second.attach([op]);
    expect(await first.waitForReplaced()).toEqual([op]);
    await unary(client, 'Dispatch', dispatchRequest(afterStep(op)));
    expect(second.calls.map((c) => c.hookId)).toEqual(['h']);
    expect(first.calls).toEqual([]);
    first.end();
    second.end();
  });

  it('drops handlers when the operation completes, also when it waits for a human', async () => {
    const op = 'op-complete-handlers';
    await unary(client, 'RegisterHooks', {
      operationId: op,
      hooks: [{ id: 'h', type: 'HOOK_TYPE_ON_COMPLETE', handler: true }],
    });
    const runtime = openHandlerStream(client);
    await runtime.attach([op]);
    await unary(client, 'CompleteOperation', {
      event: { operationId: op, reason: 'waiting_for_async_tool' },
    });
    expect(
      (await unary<LoaderObject>(client, 'ListHooks', { operationId: op })).handlerAttached,
    ).toBe(true);
    expect(runtime.calls).toEqual([]);
    const res = await unary<LoaderObject>(client, 'CompleteOperation', {
      event: { operationId: op, reason: 'waiting_for_human' },
    });
    expect(res.outcomes.map((o: LoaderObject) => o.status)).toEqual([
      'HOOK_OUTCOME_STATUS_HANDLED',
    ]);
    expect(res.handlersDropped).toBe(true);
    // proto-loader leaves false booleans out (defaults: false).
    expect(
      (await unary<LoaderObject>(client, 'ListHooks', { operationId: op })).handlerAttached,
    ).toBeUndefined();
    runtime.end();
  });

  it('refuses a detach of an empty or over-long operation id as attach does, naming it', async () => {
    for (const [id, reason] of [
      ['', 'OPERATION_ID_REQUIRED'],
      ['o'.repeat(257), 'OPERATION_ID_TOO_LONG'],
    ] as const) {
      const call = client.Handle() as grpc.ClientDuplexStream<unknown, unknown>;
      call.on('data', () => {});
      const failed = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
      call.write({ detach: { operationIds: ['op-ok', id] } });
      const err = await failed;
      expect(err.code).toBe(3);
      expect(errorInfoOf(err)?.reason).toBe(reason);
      expect(errorInfoOf(err)?.metadata.field).toBe('detach.operationIds[1]');
    }
  });

  it('refuses a detach that names no operation, as attach does', async () => {
    const call = client.Handle() as grpc.ClientDuplexStream<unknown, unknown>;
    call.on('data', () => {});
    const failed = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
    call.write({ detach: {} });
    const err = await failed;
    // INVALID_ARGUMENT
    expect(err.code).toBe(3);
    expect(errorInfoOf(err)?.reason).toBe('OPERATION_ID_REQUIRED');
    expect(errorInfoOf(err)?.metadata.field).toBe('detach.operationIds');
  });

  it('refuses Dispatch of beforeToolCall, pointing to DecideToolCall', async () => {
    const event = create(HookEventSchema, {
      event: {
        case: 'beforeToolCall',
        value: { context: { ...TOOL_CONTEXT, operationId: 'op-x' } },
      },
    });
    const err = (await unary(client, 'Dispatch', dispatchRequest(event)).catch(
      (e: unknown) => e,
    )) as grpc.ServiceError;
    expect(err.code).toBe(3);
    expect(errorInfoOf(err)?.reason).toBe('USE_DECIDE_TOOL_CALL');
    expect(err.details).toContain('DecideToolCall');
  });
});

describe('critical delivery', () => {
  it('fails the dispatch after both healthy siblings got the event, naming the hook and their outcomes', async () => {
    const receiver = await startReceiver();
    receiver.respond((req, res) => {
      res.writeHead(req.path === '/critical' ? 503 : 204);
      res.end();
    });
    const sidecar = await startSidecar();
    const client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-critical',
        hooks: [
          webhook('before', `${receiver.url}/before`),
          webhook('critical', `${receiver.url}/critical`, 'HOOK_TYPE_AFTER_STEP', {
            fallback: 'FALLBACK_NONE',
          }),
          webhook('after', `${receiver.url}/after`),
        ],
      });
      const err = (await unary(client, 'Dispatch', dispatchRequest(afterStep('op-critical'))).catch(
        (e: unknown) => e,
      )) as grpc.ServiceError;
      expect(receiver.requests.map((r) => r.path)).toEqual(['/before', '/critical', '/after']);
      expect(err.code).toBe(14);
      expect(err.details).toBe('Critical webhook delivery failed: critical');
      const info = errorInfoOf(err);
      expect(info?.reason).toBe('CRITICAL_HOOK_DELIVERY_FAILED');
      expect(info?.metadata.hookId).toBe('critical');
      const status = fromBinary(
        StatusSchema,
        err.metadata.get('grpc-status-details-bin')[0] as Buffer,
      );
      const outcomes = status.details
        .map((d) => anyUnpack(d, DispatchResponseSchema))
        .find((d) => d !== undefined)?.outcomes;
      expect(outcomes?.map((o) => [o.hookId, o.errorCode, o.critical])).toEqual([
        ['before', '', false],
        ['critical', 'http_error', true],
        ['after', '', false],
      ]);

      // On a stream the ack carries the failure and the stream goes on.
      const stream = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
      const acks: LoaderObject[] = [];
      const ended = new Promise<void>((resolve, reject) => {
        stream.on('data', (a: LoaderObject) => acks.push(a));
        stream.on('end', resolve);
        stream.on('error', reject);
      });
      stream.write({ eventId: 'e1', event: dispatchRequest(afterStep('op-critical')).event });
      stream.write({ eventId: 'e2', event: dispatchRequest(afterStep('op-no-hooks')).event });
      stream.end();
      await ended;
      const byId = new Map(acks.map((a) => [a.eventId, a]));
      expect(byId.get('e1')?.error).toMatchObject({
        code: 14,
        reason: 'CRITICAL_HOOK_DELIVERY_FAILED',
        hookId: 'critical',
      });
      expect(byId.get('e1')?.outcomes).toHaveLength(3);
      // ...with the google.rpc.Status the unary call sent, details included.
      const streamStatus = fromLoaderObject(
        DispatchStreamResponseSchema,
        byId.get('e1') as LoaderObject,
      ).error?.status;
      expect(streamStatus).toMatchObject({ code: 14, message: status.message });
      expect(streamStatus?.details.map((d) => d.typeUrl)).toEqual(
        status.details.map((d) => d.typeUrl),
      );
      expect(
        streamStatus?.details
          .map((d) => anyUnpack(d, ErrorInfoSchema))
          .find((d) => d !== undefined),
      ).toMatchObject({ reason: 'CRITICAL_HOOK_DELIVERY_FAILED', domain: 'agenthooks' });
      expect(byId.get('e2')?.error ?? null).toBeNull();
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

describe('call-agent events', () => {
  it('reach the parent operation persisted hooks, also after a restart', async () => {
    const receiver = await startReceiver();
    let sidecar = await startSidecar();
    let client = hookClient(sidecar.grpc);
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-parent',
        hooks: [webhook('sub', `${receiver.url}/sub`, 'HOOK_TYPE_BEFORE_CALL_AGENT')],
      });
      client.close();
      sidecar.kill('SIGKILL');
      await sidecar.exited;
      sidecar = await startSidecar({ db: sidecar.db });
      client = hookClient(sidecar.grpc);
      const event = create(HookEventSchema, {
        event: {
          case: 'beforeCallAgent',
          value: { agentId: 'child', instruction: 'go', operationId: 'op-parent' },
        },
      });
      await unary(client, 'Dispatch', dispatchRequest(event));
      const [got] = await receiver.waitForRequests(1);
      expect(got?.json).toEqual({
        agentId: 'child',
        instruction: 'go',
        operationId: 'op-parent',
        hookId: 'sub',
        hookType: 'beforeCallAgent',
      });
    } finally {
      client.close();
      await killSidecar(sidecar);
      await receiver.close();
    }
  });
});

/** Polls an asynchronous condition a bounded number of times (state owned by another process). */
async function waitUntil(condition: () => Promise<boolean>, attempts = 200): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('condition not reached');
}

/** A gRPC message frame: the 5-byte prefix, then the bytes. */
function grpcFrame(bytes: Uint8Array): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([prefix, bytes]);
}

/**
 * A runtime's `Handle` stream over plain HTTP/2, so that a test controls
 * what it reads (`stream.pause()`) and when its writes complete: `write`
 * frames a request, and each response goes to `onMessage`.
 */
function rawHandleStream(sidecar: SidecarProcess) {
  const session = http2.connect(`http://${sidecar.grpc}`);
  session.on('error', () => {});
  const stream = session.request({
    ':method': 'POST',
    ':path': '/agenthooks.v1.HookService/Handle',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  stream.on('error', () => {});
  const runtime = {
    session,
    stream,
    onMessage: (_m: HandleResponse): void => {},
    write: (message: MessageInitShape<typeof HandleRequestSchema>) =>
      stream.write(grpcFrame(toBinary(HandleRequestSchema, create(HandleRequestSchema, message)))),
    close: () => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      session.destroy();
    },
  };
  let buffered = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
      const length = buffered.readUInt32BE(1);
      runtime.onMessage(fromBinary(HandleResponseSchema, buffered.subarray(5, 5 + length)));
      buffered = buffered.subarray(5 + length);
    }
  });
  return runtime;
}

describe('a runtime that sends each reply before it reads the next call', () => {
  it('is read while its calls queue past the bound, so no call waits for the timeout', async () => {
    // More calls than the sidecar queues before it stops reading a runtime's
    // attaches, each too large for many to fit HTTP/2's window, and replies
    // large enough to fill the window back: a runtime that waits for each
    // reply's write before it reads the next call stalls unless its replies
    // are read while the calls queue up. Plain HTTP/2, so that a write
    // completes only once the sidecar reads it.
    const calls = 300;
    // One client connection carries every call: allow them all at once.
    const sidecar = await startSidecar({
      args: ['--handler-timeout', '5', '--max-streams-per-connection', String(calls + 10)],
    });
    const client = hookClient(sidecar.grpc);
    const ops = Array.from({ length: calls }, (_, i) => `op-sync-${i}`);
    const runtime = rawHandleStream(sidecar);
    const { stream, write } = runtime;
    try {
      for (const op of ops) {
        await unary(client, 'RegisterHooks', {
          operationId: op,
          hooks: [{ id: 'local', type: 'HOOK_TYPE_AFTER_STEP', handler: true }],
        });
      }
      await new Promise<void>((resolve) => {
        runtime.onMessage = (m) => {
          if (m.message.case === 'attached') resolve();
        };
        write({ message: { case: 'attach', value: { operationIds: ops } } });
      });
      // The runtime reads nothing until every call is queued for it.
      stream.pause();
      const dispatched = Promise.all(
        ops.map((op) =>
          unary<LoaderObject>(
            client,
            'Dispatch',
            dispatchRequest(afterStep(op, 0, undefined, 20_000)),
          ).then((res) => res.outcomes[0]?.errorCode as string),
        ),
      );
      const pending = await eventually(
        () => metric(sidecar, 'agenthooks_handler_calls_pending'),
        (n) => n === calls,
      );
      expect(pending).toBe(calls);
      runtime.onMessage = (m) => {
        if (m.message.case !== 'call') return;
        const sent = write({
          message: {
            case: 'reply',
            value: {
              callId: m.message.value.callId,
              outcome: { case: 'error', value: { message: 'x'.repeat(60_000) } },
            },
          },
        });
        // Read nothing more until this reply is sent.
        if (!sent) {
          stream.pause();
          stream.once('drain', () => stream.resume());
        }
      };
      stream.resume();
      const results = await dispatched;
      const counts: Record<string, number> = {};
      for (const code of results) counts[code] = (counts[code] ?? 0) + 1;
      expect(counts).toEqual({ handler_error: calls });
    } finally {
      runtime.close();
      client.close();
      await killSidecar(sidecar);
    }
  }, 60_000);

  it('leaves a runtime that stopped reading at most one call its decision gave up on', async () => {
    // Calls too large for HTTP/2's window: the first fills it, and the runtime reads nothing.
    const calls = 30;
    const sidecar = await startSidecar({
      args: ['--handler-timeout', '1', '--max-streams-per-connection', String(calls + 10)],
    });
    const client = hookClient(sidecar.grpc);
    const runtime = rawHandleStream(sidecar);
    const { stream, write } = runtime;
    try {
      await unary(client, 'RegisterHooks', {
        operationId: 'op-stall',
        hooks: [{ id: 'local', type: 'HOOK_TYPE_AFTER_STEP', handler: true }],
      });
      await new Promise<void>((resolve) => {
        runtime.onMessage = (m) => {
          if (m.message.case === 'attached') resolve();
        };
        write({ message: { case: 'attach', value: { operationIds: ['op-stall'] } } });
      });
      stream.pause();
      const results = await Promise.all(
        Array.from({ length: calls }, (_, i) =>
          unary<LoaderObject>(
            client,
            'Dispatch',
            dispatchRequest(afterStep('op-stall', i, undefined, 200_000)),
          ).then((res) => res.outcomes[0]?.errorCode as string),
        ),
      );
      expect(new Set(results)).toEqual(new Set(['handler_timeout']));
      // Reads again: the calls still on the way come first, then a new one.
      const stale: number[] = [];
      const fresh = new Promise<void>((resolve) => {
        runtime.onMessage = (m) => {
          if (m.message.case !== 'call') return;
          const { callId, event } = m.message.value;
          const step = event?.event.case === 'afterStep' ? event.event.value.stepIndex : -1;
          if (step !== 999) {
            stale.push(step);
            return;
          }
          write({
            message: { case: 'reply', value: { callId, outcome: { case: 'done', value: {} } } },
          });
          resolve();
        };
      });
      stream.resume();
      const last = await unary<LoaderObject>(
        client,
        'Dispatch',
        dispatchRequest(afterStep('op-stall', 999)),
      );
      await fresh;
      expect(last.outcomes[0]?.status).toBe('HOOK_OUTCOME_STATUS_HANDLED');
      // The one the window took when the runtime stopped reading, at most one more.
      expect(stale.length).toBeLessThanOrEqual(2);
    } finally {
      runtime.close();
      client.close();
      await killSidecar(sidecar);
    }
  }, 60_000);
});
