/**
 * @module A runtime's handler side over the `Handle` stream, with a
 * proto-loader client: attaches for operations, records every call and
 * answers it as the test decides.
 */
import type * as grpc from '@grpc/grpc-js';
import type { AnyClient, LoaderObject } from './grpc-client.js';

/** One handler call the runtime received. */
export interface ReceivedCall {
  readonly callId: string;
  readonly hookId: string;
  /** The operation whose hook runs (proto3 JSON omits it when empty). */
  readonly operationId?: string;
  readonly event: LoaderObject;
  /** A modifying hook's point (its enum name), with `contextJson` and `plugin`; else unset. */
  readonly point?: string;
  readonly contextJson?: string;
  readonly plugin?: string;
  /** `performance.now()` when it arrived. */
  readonly at: number;
}

/** What the runtime replies to a call: a reply object, or `undefined` to never reply. */
export type CallAnswer = (call: ReceivedCall) => LoaderObject | undefined;

/** A running handler stream. */
export interface HandlerStream {
  readonly calls: ReceivedCall[];
  /** Operations this stream was told a newer stream took over. */
  readonly replaced: string[];
  /** Attaches for operations and resolves once the sidecar confirmed. */
  attach(operationIds: string[]): Promise<void>;
  detach(operationIds: string[]): void;
  /** Changes how calls are answered. */
  answer(fn: CallAnswer): void;
  /** Resolves once `n` calls arrived. */
  waitForCalls(n: number): Promise<ReceivedCall[]>;
  /** Resolves once a `replaced` message arrived. */
  waitForReplaced(): Promise<string[]>;
  /** Ends the stream from the runtime's side (half-close). */
  end(): void;
  /** Cancels the stream, as a crashing runtime would. */
  cancel(): void;
}

/** Opens a `Handle` stream; by default every call is answered `done`. */
export function openHandlerStream(client: AnyClient): HandlerStream {
  const call = client.Handle() as grpc.ClientDuplexStream<LoaderObject, LoaderObject>;
  const calls: ReceivedCall[] = [];
  const replaced: string[] = [];
  let answer: CallAnswer = () => ({ done: {} });
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  call.on('error', () => {});
  call.on('data', (msg: LoaderObject) => {
    if (msg.call) {
      const received: ReceivedCall = {
        callId: msg.call.callId,
        hookId: msg.call.hookId,
        operationId: msg.call.operationId,
        event: msg.call.event,
        point: msg.call.point,
        contextJson: msg.call.contextJson,
        plugin: msg.call.plugin,
        at: performance.now(),
      };
      calls.push(received);
      const reply = answer(received);
      if (reply !== undefined) call.write({ reply: { callId: received.callId, ...reply } });
    } else if (msg.replaced) {
      replaced.push(...(msg.replaced.operationIds as string[]));
    }
    notify();
  });
  const until = <T>(ready: () => T | undefined): Promise<T> =>
    new Promise((resolve) => {
      const check = () => {
        const value = ready();
        if (value !== undefined) {
          waiters.delete(check);
          resolve(value);
        }
      };
      waiters.add(check);
      check();
    });
  let attachedAcks = 0;
  call.on('data', (msg: LoaderObject) => {
    if (msg.attached) attachedAcks += 1;
    notify();
  });
  return {
    calls,
    replaced,
    async attach(operationIds) {
      const want = attachedAcks + 1;
      call.write({ attach: { operationIds } });
      await until(() => (attachedAcks >= want ? true : undefined));
    },
    detach(operationIds) {
      call.write({ detach: { operationIds } });
    },
    answer(fn) {
      answer = fn;
    },
    waitForCalls: (n) => until(() => (calls.length >= n ? calls : undefined)),
    waitForReplaced: () => until(() => (replaced.length > 0 ? replaced : undefined)),
    end: () => call.end(),
    cancel: () => call.cancel(),
  };
}
