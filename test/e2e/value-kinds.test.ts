/**
 * A `google.protobuf.Value` that proto3 JSON cannot write (no kind set, or a
 * NaN or infinite number) is refused up front, on every RPC whose request can
 * carry one: INVALID_ARGUMENT, `MALFORMED_REQUEST`, the Value's path in the
 * `BadRequest`, before anything is stored or any hook runs, whether or not a
 * hook would run. Arguments large enough to be left undecoded are held to
 * it too, and Connect answers as gRPC does.
 */
import { create } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../gen/agenthooks/v1/events_pb.js';
import { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { connectErrorDetails, readConnectError } from '../support/connect-errors.js';
import {
  type AnyClient,
  badRequestOf,
  errorInfoOf,
  hookClient,
  type LoaderObject,
  unary,
} from '../support/grpc-client.js';
import { type Receiver, startReceiver } from '../support/receiver.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** A tool call's context in proto-loader form; `args` as given. */
function context(operationId: string, toolCallId: string, args?: LoaderObject): LoaderObject {
  return {
    toolCallId,
    identifier: 'fs',
    apiName: 'write',
    operationId,
    executor: 'EXECUTOR_SERVER',
    args,
  };
}

/** A tool result whose `error` is `error`. */
function toolResult(error: LoaderObject): LoaderObject {
  return { content: 'failed', success: false, error };
}

/** Arguments whose `mode` is a Value with no kind. */
const KINDLESS_ARGS = { fields: { path: { stringValue: '/tmp/x' }, mode: {} } };

/** What a refused call answered: code, reason and the fields of its BadRequest. */
async function refusal(call: Promise<unknown>) {
  try {
    await call;
  } catch (e: unknown) {
    const err = e as grpc.ServiceError;
    return {
      code: err.code,
      reason: errorInfoOf(err)?.reason,
      fields: badRequestOf(err)?.fieldViolations.map((v) => v.field),
    };
  }
  throw new Error('the call succeeded');
}

/** A refusal naming `field`: INVALID_ARGUMENT (3), `MALFORMED_REQUEST`. */
function malformed(field: string) {
  return { code: 3, reason: 'MALFORMED_REQUEST', fields: [field] };
}

/** Ends a client-streaming call and resolves with its status: code, reason and fields. */
function streamEnd(
  call: grpc.ClientDuplexStream<LoaderObject, LoaderObject>,
  acks: LoaderObject[],
) {
  return new Promise<{ code: number; reason?: string; fields?: string[] }>((resolve) => {
    call.on('data', (ack: LoaderObject) => acks.push(ack));
    call.on('error', (e: grpc.ServiceError) =>
      resolve({
        code: e.code,
        reason: errorInfoOf(e)?.reason,
        fields: badRequestOf(e)?.fieldViolations.map((v) => v.field),
      }),
    );
    call.on('end', () => resolve({ code: 0 }));
  });
}

describe('Values JSON cannot write', () => {
  let receiver: Receiver;
  let sidecar: SidecarProcess;
  let client: AnyClient;

  beforeAll(async () => {
    receiver = await startReceiver({ answer: { json: { decision: 'allow' } } });
    sidecar = await startSidecar();
    client = hookClient(sidecar.grpc);
  });
  afterAll(async () => {
    client?.close();
    await killSidecar(sidecar);
    await receiver?.close();
  });

  /** Registers a control webhook of `type` on `operationId`. */
  async function control(operationId: string, type: string): Promise<void> {
    await unary(client, 'RegisterHooks', {
      operationId,
      hooks: [
        {
          id: `control-${operationId}`,
          type,
          webhook: {
            url: `${receiver.url}/control`,
            responseHandling: 'RESPONSE_HANDLING_TOOL_CALL',
          },
        },
      ],
    });
  }

  it('refuses DecideToolResult with a kindless, NaN or infinite error, hook or no hook, and runs no hook', async () => {
    await control('op-result', 'HOOK_TYPE_AFTER_TOOL_CALL');
    const cases: [LoaderObject, string][] = [
      [{}, 'event.result.error'],
      [{ numberValue: Number.NaN }, 'event.result.error'],
      [{ numberValue: Number.POSITIVE_INFINITY }, 'event.result.error'],
      [{ numberValue: Number.NEGATIVE_INFINITY }, 'event.result.error'],
      [{ listValue: { values: [{ stringValue: 'a' }, {}] } }, 'event.result.error[1]'],
      [{ structValue: { fields: { code: {} } } }, 'event.result.error.code'],
    ];
    for (const operationId of ['op-result', 'op-result-no-hook']) {
      for (const [error, field] of cases) {
        const answer = await refusal(
          unary(client, 'DecideToolResult', {
            event: { context: context(operationId, 'call_r'), result: toolResult(error) },
          }),
        );
        expect(answer, JSON.stringify(error)).toEqual(malformed(field));
      }
    }
    expect(receiver.requests.filter((r) => r.path === '/control')).toEqual([]);
    // The same result with a Value that has a kind is decided.
    const allowed = await unary<LoaderObject>(client, 'DecideToolResult', {
      event: {
        context: context('op-result', 'call_r'),
        result: toolResult({ stringValue: 'ENOENT' }),
      },
    });
    expect(allowed.decision.allow).toBeDefined();
    expect(receiver.requests.filter((r) => r.path === '/control')).toHaveLength(1);
  });

  it('refuses DecideToolCall with a kindless Value in its arguments, small or left undecoded', async () => {
    await control('op-call', 'HOOK_TYPE_BEFORE_TOOL_CALL');
    const before = receiver.count();
    expect(
      await refusal(
        unary(client, 'DecideToolCall', {
          event: { context: context('op-call', 'call_c', KINDLESS_ARGS) },
        }),
      ),
    ).toEqual(malformed('event.context.args.mode'));
    // 32 KiB of arguments: over gRPC they are checked on the wire, not decoded.
    const large = {
      fields: {
        text: { stringValue: 'x'.repeat(32 * 1024) },
        items: { listValue: { values: [{ numberValue: 1 }, {}] } },
      },
    };
    for (const operationId of ['op-call', 'op-call-no-hook']) {
      expect(
        await refusal(
          unary(client, 'DecideToolCall', {
            event: { context: context(operationId, 'call_c', large) },
          }),
        ),
      ).toEqual(malformed('event.context.args.items[1]'));
    }
    expect(receiver.count()).toBe(before);
  });

  it('refuses Dispatch and CompleteOperation with a kindless Value, delivering nothing', async () => {
    await unary(client, 'RegisterHooks', {
      operationId: 'op-notify',
      hooks: [
        { id: 'steps', type: 'HOOK_TYPE_AFTER_STEP', webhook: { url: `${receiver.url}/notify` } },
        { id: 'done', type: 'HOOK_TYPE_ON_COMPLETE', webhook: { url: `${receiver.url}/notify` } },
      ],
    });
    const before = receiver.count();
    expect(
      await refusal(
        unary(client, 'Dispatch', {
          event: { afterStep: { operationId: 'op-notify', userId: 'u', toolsResult: {} } },
        }),
      ),
    ).toEqual(malformed('event.afterStep.toolsResult'));
    expect(
      await refusal(
        unary(client, 'CompleteOperation', {
          event: {
            operationId: 'op-notify',
            userId: 'u',
            reason: 'done',
            errorDetail: { numberValue: Number.NaN },
          },
        }),
      ),
    ).toEqual(malformed('event.errorDetail'));
    expect(receiver.count()).toBe(before);
  });

  it('ends a DispatchStream at an event holding a kindless Value, after acking the ones before it', async () => {
    const call = client.DispatchStream() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
    const acks: LoaderObject[] = [];
    const ended = streamEnd(call, acks);
    call.write({ eventId: 'e1', event: { afterStep: { operationId: 'op-s', userId: 'u' } } });
    call.write({
      eventId: 'e2',
      event: { afterStep: { operationId: 'op-s', userId: 'u', metadata: { fields: { k: {} } } } },
    });
    call.end();
    expect(await ended).toEqual(malformed('event.afterStep.metadata.k'));
    expect(acks.map((a) => a.eventId)).toEqual(['e1']);
  });

  it('refuses RegisterHooks with a kindless Value in a webhook body, storing nothing', async () => {
    const hook = (id: string, body: LoaderObject) => ({
      id,
      type: 'HOOK_TYPE_AFTER_STEP',
      webhook: { url: `${receiver.url}/body`, body },
    });
    expect(
      await refusal(
        unary(client, 'RegisterHooks', {
          operationId: 'op-body',
          hooks: [
            hook('good', { fields: { k: { stringValue: 'v' } } }),
            hook('bad', { fields: { k: {} } }),
          ],
        }),
      ),
    ).toEqual(malformed('hooks[1].webhook.body.k'));
    const listed = await unary<LoaderObject>(client, 'ListHooks', { operationId: 'op-body' });
    expect(listed.hooks ?? []).toEqual([]);
  });

  it('refuses ParkToolCall and PublishDeferredResult with a kindless Value, parking and publishing nothing', async () => {
    expect(
      await refusal(
        unary(client, 'ParkToolCall', {
          context: context('op-park', 'call_p', KINDLESS_ARGS),
          kind: 'PARK_KIND_DEFERRED',
        }),
      ),
    ).toEqual(malformed('context.args.mode'));
    const parked = await unary<LoaderObject>(client, 'ParkToolCall', {
      context: context('op-park', 'call_p', { fields: { path: { stringValue: '/tmp/x' } } }),
      kind: 'PARK_KIND_DEFERRED',
    });
    expect(parked.created).toBe(true);
    expect(
      await refusal(
        unary(client, 'PublishDeferredResult', { toolCallId: 'call_p', result: toolResult({}) }),
      ),
    ).toEqual(malformed('result.error'));
    const published = await unary<LoaderObject>(client, 'PublishDeferredResult', {
      toolCallId: 'call_p',
      result: toolResult({ stringValue: 'ENOENT' }),
    });
    expect(published.published).toBe(true);
  });

  it('ends a Handle stream whose handler mocks a result holding a kindless Value', async () => {
    await unary(client, 'RegisterHooks', {
      operationId: 'op-handle',
      hooks: [{ id: 'mocker', type: 'HOOK_TYPE_BEFORE_TOOL_CALL', handler: true }],
    });
    const call = client.Handle() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
    const messages: LoaderObject[] = [];
    const ended = streamEnd(call, messages);
    const attached = new Promise<void>((resolve) =>
      call.on('data', (m: LoaderObject) => {
        if (m.attached) resolve();
        if (m.call) {
          call.write({
            reply: { callId: m.call.callId, mock: { result: toolResult({}) } },
          });
        }
      }),
    );
    call.write({ attach: { operationIds: ['op-handle'] } });
    await attached;
    const decided = await unary<LoaderObject>(client, 'DecideToolCall', {
      event: { context: context('op-handle', 'call_h') },
    });
    // The refused reply mocks nothing.
    expect(decided.decision.mock).toBeUndefined();
    call.end();
    expect(await ended).toEqual(malformed('reply.mock.result.error'));
  });

  it.each([
    [
      'Connect binary',
      (baseUrl: string) =>
        createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: true }),
    ],
    [
      'gRPC-Web',
      (baseUrl: string) =>
        createGrpcWebTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: true }),
    ],
  ])('answers a kindless Value over %s as over gRPC', async (protocol, transport) => {
    const operationId = `op-${protocol.replace(/\W/g, '').toLowerCase()}`;
    await control(operationId, 'HOOK_TYPE_AFTER_TOOL_CALL');
    const before = receiver.count();
    const client = createClient(HookService, transport(`http://${sidecar.http}`));
    let error: unknown;
    try {
      await client.decideToolResult({
        event: {
          context: {
            toolCallId: 'call_cb',
            identifier: 'fs',
            apiName: 'write',
            operationId,
            executor: Executor.SERVER,
          },
          result: { content: 'failed', error: create(ValueSchema) },
        },
      });
    } catch (e: unknown) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect(readConnectError(error)).toMatchObject({
      reason: 'MALFORMED_REQUEST',
      fields: ['event.result.error'],
    });
    expect(receiver.count()).toBe(before);
  });

  it.each([
    // JSON cannot say "no kind", but 1e999 reads as Infinity.
    ['an exponent of three digits', '1e999'],
    ['210 digits and a small exponent', `-2${'0'.repeat(209)}e99`],
  ])(
    'refuses a number too large for a double over Connect JSON, in a Value: %s',
    async (_, number) => {
      await control('op-json', 'HOOK_TYPE_AFTER_TOOL_CALL');
      const before = receiver.count();
      const res = await fetch(`http://${sidecar.http}/agenthooks.v1.HookService/DecideToolResult`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"event":{"context":{"toolCallId":"call_cj","identifier":"fs","apiName":"write","operationId":"op-json","executor":"EXECUTOR_SERVER"},"result":{"content":"failed","error":{"code":${number}}}}}`,
      });
      const json = (await res.json()) as {
        code: string;
        details?: { type: string; value: string }[];
      };
      expect(res.status).toBe(400);
      expect(json.code).toBe('invalid_argument');
      expect(connectErrorDetails(json.details)).toMatchObject({
        reason: 'MALFORMED_REQUEST',
        fields: ['event.result.error.code'],
      });
      expect(receiver.count()).toBe(before);
    },
  );
});
