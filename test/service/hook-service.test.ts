/**
 * The guarded HookService in process: an app built by `createApp` on a
 * real SQLite file, wrapped by `createEdge`, served over Connect's
 * in-memory router transport. Webhooks go to a real receiver on 127.0.0.1.
 * These tests cover service logic (dispatch order, the handler hub, the
 * deferred publisher) and the guard (error mapping, admission, metrics)
 * without a process or a socket of the sidecar's own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  createClient,
  createHandlerContext,
  createRouterTransport,
} from '@connectrpc/connect';
import { createWritableIterable } from '@connectrpc/connect/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { HookOutcomeStatus } from '../../gen/agenthooks/v1/decisions_pb.js';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Fallback,
  HookSchema,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  DispatchResponseSchema,
  type DispatchStreamRequest,
  DispatchStreamRequestSchema,
  type HandleRequest,
  HandleRequestSchema,
  type HandleResponse,
  HookService,
  ParkKind,
} from '../../gen/agenthooks/v1/service_pb.js';
import { BadRequestSchema, ErrorInfoSchema } from '../../gen/google/rpc/error_details_pb.js';
import { Health } from '../../gen/grpc/health/v1/health_pb.js';
import { type App, createApp } from '../../src/app.js';
import { parseServeConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createTokenCheck } from '../../src/server/auth.js';
import { createEdge, type Edge } from '../../src/server/edge.js';
import { guardService } from '../../src/server/guard.js';
import { HANDLE_QUEUE_MAX } from '../../src/service/hook-service.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { eventually } from '../support/observe.js';
import { type Receiver, startReceiver } from '../support/receiver.js';

/** An app and its edge, with the lines it logged. */
interface Harness {
  readonly app: App;
  readonly edge: Edge;
  readonly client: ReturnType<typeof createClient<typeof HookService>>;
  readonly logs: Record<string, unknown>[];
}

const open: (() => Promise<void>)[] = [];

function build(options: { token?: string; dir?: string } = {}): Harness {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'agenthooks-service-'));
  const config = parseServeConfig(['--db', join(dir, 'agenthooks.db')], {});
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'info',
    write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>),
  });
  const app = createApp(config, logger, { processEnv: {}, globalDispatcher: false });
  const edge = createEdge(app, {
    checkToken: createTokenCheck(options.token),
    reflectionPublic: false,
  });
  const client = createClient(
    HookService,
    createRouterTransport((router) => edge.routes(router)),
  );
  open.push(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { app, edge, client, logs };
}

/** The context of a `Handle` call served in process. */
function handleContext() {
  return createHandlerContext({
    service: HookService,
    method: HookService.method.handle,
    protocolName: 'test',
    requestMethod: 'POST',
    url: 'http://localhost/agenthooks.v1.HookService/Handle',
  });
}

function toolContext(operationId: string, toolCallId = 'call-1') {
  return {
    operationId,
    toolCallId,
    identifier: 'search',
    apiName: 'query',
    executor: Executor.SERVER,
  };
}

describe('HookService in process', () => {
  let receiver: Receiver | undefined;

  afterEach(async () => {
    for (const close of open.splice(0)) await close();
    await receiver?.close();
    receiver = undefined;
  });

  it('runs an event’s webhooks in registration order and reports each outcome', async () => {
    receiver = await startReceiver();
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-order',
      hooks: ['a', 'b', 'c'].map((id) => ({
        id,
        type: HookType.ON_COMPLETE,
        webhook: { url: `${receiver?.url}/${id}` },
      })),
    });
    const { outcomes } = await client.dispatch({
      event: {
        event: {
          case: 'onComplete',
          value: { operationId: 'op-order', userId: 'u', reason: 'done' },
        },
      },
    });
    expect(outcomes.map((o) => [o.hookId, o.status])).toEqual([
      ['a', HookOutcomeStatus.DELIVERED],
      ['b', HookOutcomeStatus.DELIVERED],
      ['c', HookOutcomeStatus.DELIVERED],
    ]);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/a', '/b', '/c']);
  });

  it('serves local handlers over Handle: the first mock is the decision', async () => {
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-handler',
      hooks: [
        { id: 'first', type: HookType.BEFORE_TOOL_CALL, handler: true },
        { id: 'second', type: HookType.BEFORE_TOOL_CALL, handler: true },
      ],
    });
    const requests = createWritableIterable<HandleRequest>();
    const responses = client.handle(requests)[Symbol.asyncIterator]();
    await requests.write(
      create(HandleRequestSchema, {
        message: { case: 'attach', value: { operationIds: ['op-handler'] } },
      }),
    );
    expect((await responses.next()).value?.message.case).toBe('attached');
    const decision = client.decideToolCall({ event: { context: toolContext('op-handler') } });
    const call = (await responses.next()).value?.message;
    expect(call?.case).toBe('call');
    if (call?.case !== 'call') throw new Error('no handler call');
    expect(call.value.hookId).toBe('first');
    await requests.write(
      create(HandleRequestSchema, {
        message: {
          case: 'reply',
          value: {
            callId: call.value.callId,
            outcome: { case: 'mock', value: { result: { content: 'mocked' } } },
          },
        },
      }),
    );
    const answer = await decision;
    expect(answer.decision?.outcome.case).toBe('mock');
    expect(answer.outcomes.map((o) => o.hookId)).toEqual(['first']);
    requests.close();
  });

  it('still sends onError when onComplete fails critically, then raises the failure with both outcomes', async () => {
    receiver = await startReceiver();
    receiver.respond((req, res) => {
      res.writeHead(req.path === '/critical' ? 503 : 204);
      res.end();
    });
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-terminal',
      hooks: [
        {
          id: 'critical',
          type: HookType.ON_COMPLETE,
          webhook: { url: `${receiver.url}/critical`, fallback: Fallback.NONE },
        },
        { id: 'on-error', type: HookType.ON_ERROR, webhook: { url: `${receiver.url}/error` } },
      ],
    });
    const err = await client
      .completeOperation({ event: { operationId: 'op-terminal', reason: 'error' } })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(receiver.requests.map((r) => r.path)).toEqual(['/critical', '/error']);
    expect(err?.code).toBe(Code.Unavailable);
    expect(err?.findDetails(ErrorInfoSchema)[0]).toMatchObject({
      reason: 'CRITICAL_HOOK_DELIVERY_FAILED',
      metadata: { hookId: 'critical' },
    });
    const outcomes = err?.findDetails(DispatchResponseSchema)[0]?.outcomes;
    expect(outcomes?.map((o) => o.hookId)).toEqual(['critical', 'on-error']);
  });

  it('stops reading a Handle stream whose runtime stops reading its answers', async () => {
    const { app } = build();
    const ctx = handleContext();
    // Each attach is answered `attached`; the runtime reads none of them.
    let pulled = 0;
    let reached: () => void = () => {};
    const pulledPastBound = new Promise<void>((resolve) => {
      reached = resolve;
    });
    async function* attaches(): AsyncGenerator<HandleRequest> {
      for (let i = 0; i < HANDLE_QUEUE_MAX + 50; i += 1) {
        pulled += 1;
        if (pulled === HANDLE_QUEUE_MAX + 1) reached();
        yield create(HandleRequestSchema, {
          message: { case: 'attach', value: { operationIds: ['op-flood'] } },
        });
      }
    }
    const handle = app.hookService.handle;
    if (handle === undefined) throw new Error('no Handle');
    const out = (handle(attaches(), ctx) as AsyncIterable<HandleResponse>)[Symbol.asyncIterator]();
    const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
    try {
      await pulledPastBound;
      await settle();
      // The request past the bound waits for room: nothing more is read.
      expect(pulled).toBe(HANDLE_QUEUE_MAX + 1);
      expect((await out.next()).value?.message.case).toBe('attached');
      await settle();
      expect(pulled).toBe(HANDLE_QUEUE_MAX + 2);
    } finally {
      await out.return?.();
      ctx.abort();
    }
  });

  /** A Handle stream served in process, read only when the test reads it. */
  function openHandle(app: App) {
    const ctx = handleContext();
    const requests = createWritableIterable<HandleRequest>();
    const handle = app.hookService.handle;
    if (handle === undefined) throw new Error('no Handle');
    const out = (handle(requests, ctx) as AsyncIterable<HandleResponse>)[Symbol.asyncIterator]();
    return {
      write: (message: MessageInitShape<typeof HandleRequestSchema>) =>
        requests.write(create(HandleRequestSchema, message)),
      next: async () => (await out.next()).value?.message.case,
      close: async () => {
        requests.close();
        await out.return?.();
        ctx.abort();
      },
    };
  }

  /** Handler calls waiting on runtimes, as `/metrics` would show them. */
  async function pendingCalls(app: App): Promise<number> {
    const gauge = app.metrics.registry.getSingleMetric('agenthooks_handler_calls_pending');
    return (await gauge?.get())?.values[0]?.value ?? -1;
  }

  it('takes back a call the runtime answers before reading it: blind replies queue nothing', async () => {
    const { app, client } = build();
    await client.registerHooks({
      operationId: 'op-blind',
      hooks: [{ id: 'local', type: HookType.AFTER_STEP, handler: true }],
    });
    const runtime = openHandle(app);
    try {
      await runtime.write({ message: { case: 'attach', value: { operationIds: ['op-blind'] } } });
      expect(await runtime.next()).toBe('attached');
      const dispatched = client.dispatch({
        event: { event: { case: 'afterStep', value: { operationId: 'op-blind', userId: 'u' } } },
      });
      expect(
        await eventually(
          () => pendingCalls(app),
          (n) => n === 1,
        ),
      ).toBe(1);
      // Call ids count from 1: the runtime answers the call without reading it.
      await runtime.write({
        message: { case: 'reply', value: { callId: '1', outcome: { case: 'done', value: {} } } },
      });
      const { outcomes } = await dispatched;
      expect(outcomes.map((o) => [o.hookId, o.status])).toEqual([
        ['local', HookOutcomeStatus.HANDLED],
      ]);
      // The call was taken back: the next read is the echo of the next attach.
      await runtime.write({ message: { case: 'attach', value: { operationIds: ['op-blind'] } } });
      expect(await runtime.next()).toBe('attached');
    } finally {
      await runtime.close();
    }
  });

  it('serves an attach while more calls than the bound wait unread: only echoes count', async () => {
    const { app, client } = build();
    const operations = Array.from({ length: HANDLE_QUEUE_MAX + 10 }, (_, i) => `op-many-${i}`);
    for (const operationId of operations) {
      await client.registerHooks({
        operationId,
        hooks: [{ id: 'local', type: HookType.AFTER_STEP, handler: true }],
      });
    }
    const runtime = openHandle(app);
    try {
      await runtime.write({ message: { case: 'attach', value: { operationIds: operations } } });
      expect(await runtime.next()).toBe('attached');
      const dispatched = operations.map((operationId) =>
        client.dispatch({
          event: { event: { case: 'afterStep', value: { operationId, userId: 'u' } } },
        }),
      );
      const all = operations.length;
      expect(
        await eventually(
          () => pendingCalls(app),
          (n) => n === all,
        ),
      ).toBe(all);
      await runtime.write({ message: { case: 'attach', value: { operationIds: ['op-late'] } } });
      const attached = await eventually(
        async () => (await client.listHooks({ operationId: 'op-late' })).handlerAttached,
        (a) => a,
      );
      expect(attached).toBe(true);
      // The runtime reads its calls and answers them all.
      for (let i = 0; i < all; i += 1) {
        expect(await runtime.next()).toBe('call');
        await runtime.write({
          message: {
            case: 'reply',
            value: { callId: String(i + 1), outcome: { case: 'done', value: {} } },
          },
        });
      }
      expect(await runtime.next()).toBe('attached');
      await Promise.all(dispatched);
    } finally {
      await runtime.close();
    }
  });

  it('keeps many events of one DispatchStream waiting on handlers without a listener warning', async () => {
    const { client } = build();
    const operations = Array.from({ length: 30 }, (_, i) => `op-stream-${i}`);
    for (const operationId of operations) {
      await client.registerHooks({
        operationId,
        hooks: [{ id: 'local', type: HookType.AFTER_STEP, handler: true }],
      });
    }
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const handle = createWritableIterable<HandleRequest>();
      const calls = client.handle(handle)[Symbol.asyncIterator]();
      await handle.write(
        create(HandleRequestSchema, {
          message: { case: 'attach', value: { operationIds: operations } },
        }),
      );
      expect((await calls.next()).value?.message.case).toBe('attached');
      const events = createWritableIterable<DispatchStreamRequest>();
      const acks = client.dispatchStream(events)[Symbol.asyncIterator]();
      for (const [i, operationId] of operations.entries()) {
        await events.write(
          create(DispatchStreamRequestSchema, {
            eventId: `e${i}`,
            event: { event: { case: 'afterStep', value: { operationId, userId: 'u' } } },
          }),
        );
      }
      // Every event is in flight at once, each waiting on its handler call.
      const received: string[] = [];
      while (received.length < operations.length) {
        const message = (await calls.next()).value?.message;
        if (message?.case === 'call') received.push(message.value.callId);
      }
      for (const callId of received) {
        await handle.write(
          create(HandleRequestSchema, {
            message: { case: 'reply', value: { callId, outcome: { case: 'done', value: {} } } },
          }),
        );
      }
      for (let i = 0; i < operations.length; i++) {
        expect((await acks.next()).value?.outcomes).toHaveLength(1);
      }
      events.close();
      handle.close();
      // A warning is emitted on the next tick after the listener that passed the limit.
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('names the operations of a decision the store has no record of, so a typo shows', async () => {
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-known',
      hooks: [
        { id: 'audit', type: HookType.ON_COMPLETE, webhook: { url: 'http://127.0.0.1:9/x' } },
      ],
    });
    const typo = await client.decideToolCall({
      event: { context: toolContext('op-knwon') },
      operationChain: ['op-known', 'op-knwon'],
    });
    // Still allowed (environment hooks only, as the spec says), but the runtime can tell.
    expect(typo.decision?.outcome.case).toBe('allow');
    expect(typo.unknownOperations).toEqual(['op-knwon']);
    const known = await client.decideToolResult({
      event: { context: toolContext('op-known'), result: { content: 'ok' } },
    });
    expect(known.unknownOperations).toEqual([]);
  });

  it("continues a parked call's chain only for the same tool, not for another tool that reuses its id", async () => {
    receiver = await startReceiver({
      answer: { json: { decision: 'deny', reason: 'op1 policy' } },
    });
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-first',
      hooks: [
        {
          id: 'policy',
          type: HookType.BEFORE_TOOL_CALL,
          webhook: { url: `${receiver.url}/policy`, responseHandling: ResponseHandling.TOOL_CALL },
        },
      ],
    });
    await client.parkToolCall({
      context: toolContext('op-first', 'call_0'),
      kind: ParkKind.HUMAN_APPROVAL,
    });
    // The approval's continuation: the same tool call, in another operation.
    const continued = await client.decideToolCall({
      event: { context: toolContext('op-continued', 'call_0') },
    });
    expect(continued.decision?.outcome.case).toBe('deny');
    // Another operation whose model numbers its calls from 0 too, for another tool.
    const other = await client.decideToolCall({
      event: {
        context: { ...toolContext('op-other', 'call_0'), identifier: 'fs', apiName: 'read' },
      },
    });
    expect(other.decision?.outcome.case).toBe('allow');
    expect(receiver.requests).toHaveLength(1);
  });

  it("publishes through the parked call's own operation's controls when the chain it was parked with leaves it out, as a decision on the call does", async () => {
    receiver = await startReceiver({
      answer: { json: { decision: 'deny', reason: 'A policy' } },
    });
    const { client } = build();
    await client.registerHooks({
      operationId: 'op-own',
      hooks: [
        {
          id: 'result-policy',
          type: HookType.AFTER_TOOL_CALL,
          webhook: { url: `${receiver.url}/policy`, responseHandling: ResponseHandling.TOOL_CALL },
        },
      ],
    });
    await client.parkToolCall({
      context: toolContext('op-own', 'deferred-own'),
      operationChain: ['op-parent'],
      kind: ParkKind.DEFERRED,
    });
    const decided = await client.decideToolResult({
      event: { context: toolContext('op-own', 'deferred-own'), result: { content: 'secret' } },
    });
    expect(decided.decision?.outcome.case).toBe('deny');
    const published = await client.publishDeferredResult({
      toolCallId: 'deferred-own',
      result: { content: 'secret' },
    });
    expect(published.published).toBe(true);
    expect(published.finalResult?.content).not.toBe('secret');
    expect(receiver.requests).toHaveLength(2);
  });

  it('lets an operation parked waiting for a human expire once its parked call is published, as a terminal one does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-service-'));
    const { client } = build({ dir });
    // A second connection to the app's file, for the retention sweep.
    const store = openSqliteStore(join(dir, 'agenthooks.db'));
    open.push(() => store.close());
    await client.registerHooks({
      operationId: 'op-approval',
      hooks: [{ id: 'notes', type: HookType.AFTER_STEP, webhook: { url: 'http://127.0.0.1:9/x' } }],
    });
    await client.parkToolCall({
      context: toolContext('op-approval', 'approval-1'),
      kind: ParkKind.HUMAN_APPROVAL,
    });
    await client.completeOperation({
      event: { operationId: 'op-approval', reason: 'waiting_for_human' },
    });
    await client.completeOperation({
      event: { operationId: 'op-async', reason: 'waiting_for_async_tool' },
    });
    const later = Date.now() + 60_000;
    // While its call waits, the parked operation stays.
    expect((await store.expireBefore(later, 10)).operations).toEqual(['op-async']);
    await client.publishDeferredResult({ toolCallId: 'approval-1', result: { content: 'ok' } });
    expect((await store.expireBefore(later, 10)).operations).toEqual(['op-approval']);
  });

  it('publishes a deferred result once; a concurrent duplicate gets the same final result', async () => {
    const { client } = build();
    await client.parkToolCall({
      context: toolContext('op-park', 'deferred-1'),
      kind: ParkKind.DEFERRED,
    });
    const [a, b] = await Promise.all([
      client.publishDeferredResult({ toolCallId: 'deferred-1', result: { content: 'first' } }),
      client.publishDeferredResult({ toolCallId: 'deferred-1', result: { content: 'second' } }),
    ]);
    expect([a.published, b.published].sort()).toEqual([false, true]);
    expect(a.finalResult?.content).toBe(b.finalResult?.content);
  });

  it('maps a domain error to INVALID_ARGUMENT with ErrorInfo and BadRequest, and counts it under that code', async () => {
    const { app, client, logs } = build();
    const err = await client
      .registerHooks({
        operationId: 'op-bad',
        hooks: [{ id: 'h', type: HookType.ON_COMPLETE, webhook: { url: 'ftp://example.com' } }],
      })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.InvalidArgument);
    expect(err?.findDetails(ErrorInfoSchema)[0]).toMatchObject({ domain: 'agenthooks' });
    expect(err?.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field).toBe(
      'hooks[0].webhook.url',
    );
    const metrics = await app.metrics.registry.metrics();
    expect(metrics).toMatch(
      /^agenthooks_rpc_calls_total\{method="RegisterHooks",code="INVALID_ARGUMENT"\} 1$/m,
    );
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('answers an unexpected exception INTERNAL without its text, and logs it once with the cause', async () => {
    const logs: string[] = [];
    const logger = createLogger({ write: (line) => logs.push(line) });
    const guarded = guardService(
      HookService,
      {
        listHooks() {
          throw new Error('secret detail of a bug');
        },
      },
      { logger },
    );
    const client = createClient(
      HookService,
      createRouterTransport((router) => router.service(HookService, guarded)),
    );
    const err = await client.listHooks({ operationId: 'x' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Internal);
    expect(err?.rawMessage).toBe('internal error');
    expect(err?.findDetails(ErrorInfoSchema)[0]?.reason).toBe('INTERNAL');
    expect(logs).toHaveLength(1);
    expect(logs[0]).toContain('secret detail of a bug');
    // A method the implementation lacks answers UNIMPLEMENTED through the same guard.
    const missing = await client.dispatch({}).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(missing?.code).toBe(Code.Unimplemented);
  });

  it('refuses calls without the token, except health', async () => {
    const { edge } = build({ token: 's3cret' });
    const transport = createRouterTransport((router) => edge.routes(router));
    const err = await createClient(HookService, transport)
      .listHooks({ operationId: 'x' })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.Unauthenticated);
    expect(err?.findDetails(ErrorInfoSchema)[0]?.reason).toBe('UNAUTHENTICATED');
    const withToken = await createClient(HookService, transport).listHooks(
      { operationId: 'x' },
      { headers: { authorization: 'Bearer s3cret' } },
    );
    expect(withToken.hooks).toEqual([]);
    await expect(createClient(Health, transport).check({})).resolves.toBeDefined();
  });

  it('refuses new calls with SHUTTING_DOWN once draining', async () => {
    const { edge, client } = build();
    await expect(client.listHooks({ operationId: 'x' })).resolves.toBeDefined();
    edge.startDraining();
    const err = await client.listHooks({ operationId: 'x' }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unavailable);
    expect(err?.findDetails(ErrorInfoSchema)[0]?.reason).toBe('SHUTTING_DOWN');
  });

  it('fails every call that would run a stored hook breaking a rule; lists and purges it', async () => {
    receiver = await startReceiver({ answer: { json: { decision: 'deny' } } });
    const dir = mkdtempSync(join(tmpdir(), 'agenthooks-service-'));
    const store = openSqliteStore(join(dir, 'agenthooks.db'));
    // As an older sidecar could store it: `onError: block` on a hook that is not a control.
    await store.appendHooks('op-stored', undefined, [
      create(HookSchema, {
        id: 'notify',
        type: HookType.AFTER_STEP,
        webhook: { url: `${receiver.url}/notify`, onError: OnError.BLOCK },
      }),
    ]);
    await store.close();
    const { client } = build({ dir });
    const context = toolContext('op-stored', 'call-stored');
    await client.parkToolCall({ context, kind: ParkKind.DEFERRED });
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => 'answered',
        (e: unknown) => {
          const err = ConnectError.from(e);
          return [Code[err.code], err.findDetails(ErrorInfoSchema)[0]?.reason];
        },
      );
    const failed = ['FailedPrecondition', 'STORED_HOOK_INVALID'];
    const afterStep = {
      event: { case: 'afterStep' as const, value: { operationId: 'op-stored', userId: 'u' } },
    };
    expect({
      decideToolCall: await refusal(client.decideToolCall({ event: { context } })),
      decideToolResult: await refusal(
        client.decideToolResult({ event: { context, result: { content: 'ok' } } }),
      ),
      publishDeferredResult: await refusal(
        client.publishDeferredResult({ toolCallId: 'call-stored', result: { content: 'ok' } }),
      ),
      dispatch: await refusal(client.dispatch({ event: afterStep })),
      completeOperation: await refusal(
        client.completeOperation({ event: { operationId: 'op-stored', reason: 'done' } }),
      ),
    }).toEqual({
      decideToolCall: failed,
      decideToolResult: failed,
      publishDeferredResult: failed,
      dispatch: failed,
      completeOperation: failed,
    });
    const events = createWritableIterable<DispatchStreamRequest>();
    const acks = client.dispatchStream(events)[Symbol.asyncIterator]();
    await events.write(create(DispatchStreamRequestSchema, { eventId: 'e1', event: afterStep }));
    const ack = (await acks.next()).value;
    expect([ack?.eventId, ack?.error?.reason, ack?.error?.hookId]).toEqual([
      'e1',
      'STORED_HOOK_INVALID',
      'notify',
    ]);
    events.close();
    expect(receiver.requests).toEqual([]);

    const listed = await client.listHooks({ operationId: 'op-stored' });
    expect(listed.hooks.map((h) => [h.id, h.webhook?.onError])).toEqual([
      ['notify', OnError.BLOCK],
    ]);
    expect(
      (await client.unregisterHooks({ operationId: 'op-stored', purge: true })).hooksPurged,
    ).toBe(1);
    expect((await client.dispatch({ event: afterStep })).outcomes).toEqual([]);
  });

  describe('identifier limits', () => {
    const at = 'o'.repeat(256);
    const over = 'o'.repeat(257);

    async function refused(call: Promise<unknown>) {
      const err = await call.then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      return {
        code: err?.code,
        reason: err?.findDetails(ErrorInfoSchema)[0]?.reason,
        fields: err
          ?.findDetails(BadRequestSchema)
          .flatMap((b) => b.fieldViolations.map((v) => v.field)),
      };
    }

    it('accepts 256-byte operation and tool call ids and refuses 257 in every RPC, naming the field', async () => {
      const { client } = build();
      await expect(client.registerHooks({ operationId: at, hooks: [] })).resolves.toBeDefined();
      await expect(
        client.decideToolCall({ event: { context: toolContext(at, at) }, operationChain: [at] }),
      ).resolves.toBeDefined();
      const tooLong = (field: string, reason = 'OPERATION_ID_TOO_LONG') => ({
        code: Code.InvalidArgument,
        reason,
        fields: [field],
      });
      expect(await refused(client.registerHooks({ operationId: over }))).toEqual(
        tooLong('operationId'),
      );
      expect(await refused(client.listHooks({ operationId: over }))).toEqual(
        tooLong('operationId'),
      );
      expect(await refused(client.unregisterHooks({ operationId: over }))).toEqual(
        tooLong('operationId'),
      );
      expect(
        await refused(
          client.dispatch({
            event: { event: { case: 'onComplete', value: { operationId: over, reason: 'done' } } },
          }),
        ),
      ).toEqual(tooLong('event.onComplete.operationId'));
      expect(
        await refused(client.decideToolCall({ event: { context: toolContext(over) } })),
      ).toEqual(tooLong('event.context.operationId'));
      expect(
        await refused(
          client.decideToolCall({ event: { context: toolContext('op') }, operationChain: [over] }),
        ),
      ).toEqual(tooLong('operationChain[0]'));
      expect(
        await refused(client.decideToolCall({ event: { context: toolContext('op', over) } })),
      ).toEqual(tooLong('event.context.toolCallId', 'TOOL_CALL_ID_TOO_LONG'));
      expect(
        await refused(
          client.parkToolCall({ context: toolContext('op', over), kind: ParkKind.DEFERRED }),
        ),
      ).toEqual(tooLong('context.toolCallId', 'TOOL_CALL_ID_TOO_LONG'));
      expect(await refused(client.publishDeferredResult({ toolCallId: over, result: {} }))).toEqual(
        tooLong('toolCallId', 'TOOL_CALL_ID_TOO_LONG'),
      );
      expect(
        await refused(
          client.publishDeferredResult({ toolCallId: 'c', result: {}, operationChain: [over] }),
        ),
      ).toEqual(tooLong('operationChain[0]'));
      expect(
        await refused(client.completeOperation({ event: { operationId: over, reason: 'done' } })),
      ).toEqual(tooLong('event.operationId'));
    });

    it('still delivers a hook stored before the limits, over every one of them', async () => {
      receiver = await startReceiver();
      const dir = mkdtempSync(join(tmpdir(), 'agenthooks-service-'));
      const store = openSqliteStore(join(dir, 'agenthooks.db'));
      // As an older sidecar stored it: a long id, a long URL, over 1 MiB of configuration.
      const id = 'h'.repeat(300);
      await store.appendHooks('op-legacy', undefined, [
        create(HookSchema, {
          id,
          type: HookType.ON_COMPLETE,
          webhook: {
            url: `${receiver.url}/legacy?pad=${'p'.repeat(9_000)}`,
            body: { pad: 'x'.repeat(1_100_000) },
          },
        }),
      ]);
      await store.close();
      const { client } = build({ dir });
      const { outcomes } = await client.dispatch({
        event: {
          event: {
            case: 'onComplete',
            value: { operationId: 'op-legacy', userId: 'u', reason: 'done' },
          },
        },
      });
      expect(outcomes.map((o) => [o.hookId, o.status])).toEqual([
        [id, HookOutcomeStatus.DELIVERED],
      ]);
      expect(receiver.requests).toHaveLength(1);
      // New hooks cannot be added to it: the operation is over the stored limit.
      expect(
        await refused(
          client.registerHooks({
            operationId: 'op-legacy',
            hooks: [{ id: 'b', type: HookType.ON_COMPLETE, webhook: { url: '/b' } }],
          }),
        ),
      ).toEqual({ code: Code.InvalidArgument, reason: 'HOOK_CONFIG_TOO_LARGE', fields: ['hooks'] });
    });
  });
});
