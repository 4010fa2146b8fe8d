/**
 * Registering modifying hooks (the HookBus points) on the real sidecar:
 * they share `RegisterHooks`, the order and the store with lifecycle hooks
 * and survive a restart, their own rules are refused with the same field
 * and reason over gRPC and Connect JSON, and the lifecycle paths never run
 * them: a `beforeToolCall` point hook is not a `beforeToolCall` event hook.
 */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { afterEach, describe, expect, it } from 'vitest';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  Delivery,
  type Hook,
  HookSchema,
  ModifyPoint,
  ResponseHandling,
  WebhookSchema,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { readConnectError } from '../support/connect-errors.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

let sidecar: SidecarProcess | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  await killSidecar(sidecar);
  await receiver?.close();
  sidecar = undefined;
  receiver = undefined;
});

function client(s: SidecarProcess) {
  return createClient(HookService, createGrpcTransport({ baseUrl: `http://${s.grpc}` }));
}

/** What ListHooks shows of a hook: its kind, plugin and target. */
function summary(h: Hook) {
  return { id: h.id, type: h.type, point: h.point, plugin: h.plugin, url: h.webhook?.url };
}

describe('modifying hooks: registration', () => {
  it('registers point hooks beside event hooks, in order, and keeps them across a restart', async () => {
    sidecar = await startSidecar();
    const hooks = [
      create(HookSchema, {
        id: 'audit',
        type: HookType.AFTER_STEP,
        webhook: { url: 'http://127.0.0.1:9/audit' },
      }),
      create(HookSchema, {
        id: 'redact',
        point: ModifyPoint.TRANSFORM_CONTEXT,
        plugin: 'privacy',
        webhook: { url: 'http://127.0.0.1:9/redact' },
      }),
      create(HookSchema, {
        id: 'rewrite',
        point: ModifyPoint.BEFORE_TOOL_CALL,
        plugin: 'privacy',
        matcher: '^search$',
        handler: true,
      }),
    ];
    await expect(
      client(sidecar).registerHooks({ operationId: 'op-mod', hooks }),
    ).resolves.toMatchObject({ hookCount: 3 });
    const expected = hooks.map(summary);
    expect((await client(sidecar).listHooks({ operationId: 'op-mod' })).hooks.map(summary)).toEqual(
      expected,
    );

    // A bare kill keeps the database folder for the restart.
    sidecar.kill('SIGKILL');
    await sidecar.exited;
    sidecar = await startSidecar({ db: sidecar.db });
    const listed = await client(sidecar).listHooks({ operationId: 'op-mod' });
    expect(listed.hooks.map(summary)).toEqual(expected);
    expect(listed.hooks[2]?.matcher).toBe('^search$');
  });

  it('refuses a modifying hook that breaks its rules, naming the field, and stores nothing', async () => {
    sidecar = await startSidecar();
    const cases: [MessageInitShape<typeof HookSchema>, string, string][] = [
      [
        { point: ModifyPoint.TRANSFORM_CONTEXT, type: HookType.AFTER_STEP },
        'hooks[1].point',
        'HOOK_KIND_CONFLICT',
      ],
      [
        {
          point: ModifyPoint.BEFORE_PROVIDER_PAYLOAD,
          webhook: { url: 'http://127.0.0.1:9/q', delivery: Delivery.QSTASH },
        },
        'hooks[1].webhook.delivery',
        'MODIFY_DELIVERY_NOT_ALLOWED',
      ],
      [
        {
          point: ModifyPoint.BEFORE_TOOL_CALL,
          webhook: { url: 'http://127.0.0.1:9/c', responseHandling: ResponseHandling.TOOL_CALL },
        },
        'hooks[1].webhook.responseHandling',
        'MODIFY_WEBHOOK_OPTION_NOT_ALLOWED',
      ],
      [
        { point: ModifyPoint.GET_STEERING_MESSAGES, matcher: '.*' },
        'hooks[1].matcher',
        'MATCHER_NOT_ALLOWED',
      ],
    ];
    for (const [init, field, reason] of cases) {
      const bad = create(HookSchema, {
        id: 'bad',
        webhook: create(WebhookSchema, { url: 'http://127.0.0.1:9/x' }),
        ...init,
      } as MessageInitShape<typeof HookSchema>);
      const good = create(HookSchema, {
        id: 'good',
        point: ModifyPoint.PREPARE_NEXT_TURN,
        webhook: { url: 'http://127.0.0.1:9/ok' },
      });
      const transports = {
        grpc: createGrpcTransport({ baseUrl: `http://${sidecar.grpc}` }),
        'connect-json': createConnectTransport({
          baseUrl: `http://${sidecar.http}`,
          httpVersion: '1.1',
          useBinaryFormat: false,
        }),
      };
      for (const [name, transport] of Object.entries(transports)) {
        const error: unknown = await createClient(HookService, transport)
          .registerHooks({ operationId: 'op-bad', hooks: [good, bad] })
          .catch((e: unknown) => e);
        expect(error, `${reason} over ${name}`).toBeInstanceOf(ConnectError);
        const details = readConnectError(error);
        expect(details.code).toBe(Code.InvalidArgument);
        expect(details.reason).toBe(reason);
        expect(details.fields).toEqual([field]);
      }
    }
    expect((await client(sidecar).listHooks({ operationId: 'op-bad' })).hooks).toEqual([]);
  });

  it('never runs a point hook on the lifecycle paths of the same name', async () => {
    receiver = await startReceiver();
    sidecar = await startSidecar();
    const url = (path: string) => `${receiver?.url}${path}`;
    await client(sidecar).registerHooks({
      operationId: 'op-apart',
      hooks: [
        create(HookSchema, {
          id: 'point-before',
          point: ModifyPoint.BEFORE_TOOL_CALL,
          webhook: { url: url('/point-before') },
        }),
        create(HookSchema, {
          id: 'point-after',
          point: ModifyPoint.AFTER_TOOL_CALL,
          webhook: { url: url('/point-after') },
        }),
        create(HookSchema, {
          id: 'point-compact',
          point: ModifyPoint.BEFORE_COMPACT,
          webhook: { url: url('/point-compact') },
        }),
        create(HookSchema, {
          id: 'event-after',
          type: HookType.AFTER_TOOL_CALL,
          webhook: { url: url('/event-after') },
        }),
      ],
    });
    const context = {
      operationId: 'op-apart',
      toolCallId: 'call-1',
      identifier: 'search',
      apiName: 'query',
      executor: Executor.SERVER,
      stepIndex: 0,
      callIndex: 0,
      assistantMessageId: 'msg-1',
      userId: 'u',
    };
    const decision = await client(sidecar).decideToolCall({ event: { context } });
    expect(decision.decision?.outcome.case).toBe('allow');
    const dispatched = await client(sidecar).dispatch({
      event: {
        event: {
          case: 'afterToolCall',
          value: { context, result: { content: 'ok' } },
        },
      },
    });
    expect(dispatched.outcomes.map((o) => o.hookId)).toEqual(['event-after']);
    const compact = await client(sidecar).dispatch({
      event: {
        event: {
          case: 'beforeCompact',
          value: { operationId: 'op-apart', userId: 'u' },
        },
      },
    });
    expect(compact.outcomes).toEqual([]);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/event-after']);
  });
});
