/**
 * The handler hub's calls to a runtime that stopped reading: a call given up
 * on (timed out, cancelled) is taken back from the stream's queue, so the
 * sidecar does not keep every such call, event and all, until the runtime
 * reads again.
 */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { HookEventSchema } from '../../gen/agenthooks/v1/events_pb.js';
import { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import { type HandleResponse, HandlerReplySchema } from '../../gen/agenthooks/v1/service_pb.js';
import { HandlerHub, ModifyingCall } from '../../src/hooks/handlers.js';
import { silentLogger } from '../../src/log.js';
import { AsyncQueue } from '../../src/service/async-queue.js';

function stalledRuntime() {
  const queue = new AsyncQueue<HandleResponse>();
  const connection = {
    send: (message: HandleResponse) => queue.push(message),
    withdraw: (message: HandleResponse) => {
      queue.remove(message);
    },
  };
  return { queue, connection };
}

describe('HandlerHub', () => {
  it('takes back a call that timed out before the runtime read it', async () => {
    const hub = new HandlerHub({ logger: silentLogger, timeoutMs: 20 });
    const { queue, connection } = stalledRuntime();
    hub.attach(connection, ['op-1']);
    const calls = [1, 2, 3].map(() =>
      hub.call('op-1', 'h1', create(HookEventSchema, {}), new AbortController().signal),
    );
    expect(queue.size).toBe(3);
    for (const result of await Promise.all(calls)) {
      expect(result).toMatchObject({ kind: 'error', code: 'handler_timeout' });
    }
    expect(queue.size).toBe(0);
  });

  it('takes back a cancelled call, and leaves the calls still awaited', async () => {
    const hub = new HandlerHub({ logger: silentLogger, timeoutMs: 60_000 });
    const { queue, connection } = stalledRuntime();
    hub.attach(connection, ['op-1']);
    const cancel = new AbortController();
    const kept = new AbortController();
    const cancelled = hub.call('op-1', 'h1', create(HookEventSchema, {}), cancel.signal);
    const awaited = hub.call('op-1', 'h2', create(HookEventSchema, {}), kept.signal);
    expect(queue.size).toBe(2);
    cancel.abort();
    expect(await cancelled).toMatchObject({ kind: 'error', code: 'cancelled' });
    expect(queue.size).toBe(1);
    const left = await queue.next();
    expect(left.done === true ? undefined : left.value.message.case).toBe('call');
    kept.abort();
    await awaited;
  });

  it('fails a reply of the wrong kind, or a mock without its result, as a handler error', async () => {
    const hub = new HandlerHub({ logger: silentLogger, timeoutMs: 60_000 });
    const { queue, connection } = stalledRuntime();
    hub.attach(connection, ['op-1']);
    /** Makes a call and answers it with `outcome` once the runtime reads it. */
    const answered = async (
      event: Parameters<HandlerHub['call']>[2],
      outcome: MessageInitShape<typeof HandlerReplySchema>['outcome'],
    ) => {
      const result = hub.call('op-1', 'h1', event, new AbortController().signal);
      const read = await queue.next();
      const message = read.done === true ? undefined : read.value.message;
      if (message?.case !== 'call') throw new Error('no call');
      hub.reply(connection, create(HandlerReplySchema, { callId: message.value.callId, outcome }));
      return result;
    };
    const notification = create(HookEventSchema, {
      event: { case: 'afterStep', value: { stepIndex: 0 } },
    });
    const beforeToolCall = create(HookEventSchema, {
      event: { case: 'beforeToolCall', value: {} },
    });
    const modifying = new ModifyingCall(ModifyPoint.TRANSFORM_CONTEXT, '{}', '');
    const handlerError = { kind: 'error', code: 'handler_error' };
    expect(
      await answered(notification, { case: 'modified', value: { resultJson: '{}' } }),
    ).toMatchObject(handlerError);
    expect(await answered(notification, { case: 'mock', value: { result: {} } })).toMatchObject(
      handlerError,
    );
    expect(await answered(modifying, { case: 'mock', value: { result: {} } })).toMatchObject(
      handlerError,
    );
    expect(await answered(beforeToolCall, { case: 'mock', value: {} })).toMatchObject(handlerError);
    // The right kinds still stand.
    expect(
      await answered(beforeToolCall, { case: 'mock', value: { result: { content: 'x' } } }),
    ).toMatchObject({ kind: 'mock', result: { content: 'x' } });
    expect(
      await answered(modifying, { case: 'modified', value: { resultJson: '{}' } }),
    ).toMatchObject({ kind: 'modified' });
    expect(await answered(notification, { case: 'done', value: {} })).toEqual({ kind: 'done' });
  });
});
