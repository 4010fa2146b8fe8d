/**
 * @module Local handlers: the runtime's own functions, served over `Handle`
 * streams. An operation with an attached stream is in local mode: hooks with
 * the handler flag run there. A newer attachment for an operation replaces
 * the older one, which is told. A handler that errors, times out or whose
 * stream drops mid-call is a handler failure: reported, and the next hook
 * still runs. No transport code lives here: a stream is a {@link HandlerConnection}.
 */
import { create } from '@bufbuild/protobuf';
import type { HookEvent, ToolResult } from '../../gen/agenthooks/v1/events_pb.js';
import type { ModifyPoint } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  type HandleResponse,
  HandleResponseSchema,
  type HandlerReply,
} from '../../gen/agenthooks/v1/service_pb.js';
import type { Logger } from '../log.js';

/** Default time a handler has to reply, in milliseconds. */
export const DEFAULT_HANDLER_TIMEOUT_MS = 10_000;

/** How a handler call ended. */
export type HandlerResult =
  | { readonly kind: 'done' }
  | { readonly kind: 'mock'; readonly result: ToolResult; readonly error?: string }
  | { readonly kind: 'modified'; readonly resultJson: string }
  | {
      readonly kind: 'error';
      readonly code: 'handler_error' | 'handler_timeout' | 'handler_detached' | 'cancelled';
      readonly message: string;
    };

/** What a modifying hook's handler is called with: the point and its context. */
export class ModifyingCall {
  constructor(
    readonly point: ModifyPoint,
    readonly contextJson: string,
    readonly plugin: string,
  ) {}
}

/** One attached `Handle` stream, as the hub sees it. */
export interface HandlerConnection {
  /** Queues a message to the runtime; the transport writes it with backpressure. */
  send(message: HandleResponse): void;
  /**
   * Takes back a call not yet written, once its answer is no longer awaited
   * (timed out or cancelled): a runtime that stopped reading would otherwise
   * keep every such call, event and all, queued on the sidecar.
   */
  withdraw?(message: HandleResponse): void;
}

interface PendingCall {
  readonly connection: HandlerConnection;
  readonly resolve: (result: HandlerResult) => void;
  /** What the call may be answered with besides `done` and `error`: a modifying call's result, a `beforeToolCall` mock, or neither. */
  readonly answers: 'modified' | 'mock' | undefined;
}

/** Options of a {@link HandlerHub}. */
export interface HandlerHubOptions {
  readonly logger: Logger;
  /** Time a handler has to reply. Default {@link DEFAULT_HANDLER_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
}

/** Routes handler calls to the stream attached for each operation. */
export class HandlerHub {
  readonly #byOperation = new Map<string, HandlerConnection>();
  /** Plugins whose handlers an operation's stream no longer serves, until it attaches again. */
  readonly #droppedPlugins = new Map<string, Set<string>>();
  readonly #pending = new Map<string, PendingCall>();
  readonly #logger: Logger;
  readonly #timeoutMs: number;
  #nextCallId = 1;

  /** Creates an empty hub. */
  constructor(options: HandlerHubOptions) {
    this.#logger = options.logger;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
  }

  /** Calls sent to runtimes and not yet answered, timed out or withdrawn. */
  get pendingCalls(): number {
    return this.#pending.size;
  }

  /** Number of operations in local mode. */
  get attachedOperations(): number {
    return this.#byOperation.size;
  }

  /**
   * Makes `connection` the handler provider of the operations. A stream that
   * served one of them before is told with `replaced`; its calls in flight
   * still get their replies.
   */
  attach(connection: HandlerConnection, operationIds: readonly string[]): void {
    const replaced = new Map<HandlerConnection, string[]>();
    for (const id of operationIds) {
      const old = this.#byOperation.get(id);
      if (old !== undefined && old !== connection) {
        replaced.set(old, [...(replaced.get(old) ?? []), id]);
      }
      this.#byOperation.set(id, connection);
      this.#droppedPlugins.delete(id);
    }
    for (const [old, ids] of replaced) {
      old.send(
        create(HandleResponseSchema, {
          message: { case: 'replaced', value: { operationIds: ids } },
        }),
      );
    }
  }

  /** Stops `connection` serving the operations (only those it still serves). */
  detach(connection: HandlerConnection, operationIds: readonly string[]): void {
    for (const id of operationIds) {
      if (this.#byOperation.get(id) === connection) this.#release(id);
    }
  }

  /**
   * Forgets a stream that ended: its operations return to queue mode and its
   * calls in flight fail as `handler_detached`.
   */
  disconnect(connection: HandlerConnection): void {
    for (const [id, c] of this.#byOperation) {
      if (c === connection) this.#release(id);
    }
    for (const pending of [...this.#pending.values()]) {
      if (pending.connection === connection) {
        // `resolve` removes the call from the pending map itself.
        pending.resolve({
          kind: 'error',
          code: 'handler_detached',
          message: 'the handler stream ended before the handler replied',
        });
      }
    }
  }

  /**
   * Stops serving one plugin's handler hooks of an operation until a stream
   * attaches for it again; returns whether a stream served the operation.
   */
  dropPlugin(operationId: string, plugin: string): boolean {
    if (!this.#byOperation.has(operationId)) return false;
    const dropped = this.#droppedPlugins.get(operationId) ?? new Set<string>();
    dropped.add(plugin);
    this.#droppedPlugins.set(operationId, dropped);
    return true;
  }

  /** Whether a handler hook of `plugin` runs on the operation's stream now. */
  serves(operationId: string, plugin: string): boolean {
    if (!this.#byOperation.has(operationId)) return false;
    return this.#droppedPlugins.get(operationId)?.has(plugin) !== true;
  }

  /** Drops the operation's handlers (terminal state); returns whether one was attached. */
  dropOperation(operationId: string): boolean {
    return this.#release(operationId);
  }

  /** Serves the operation from no stream, with no dropped plugins; returns whether one served it. */
  #release(operationId: string): boolean {
    this.#droppedPlugins.delete(operationId);
    return this.#byOperation.delete(operationId);
  }

  /** True when a stream serves the operation (local mode). */
  isAttached(operationId: string): boolean {
    return this.#byOperation.has(operationId);
  }

  /**
   * Asks the operation's stream to run one handler and waits for its reply,
   * at most the handler timeout. Never throws.
   */
  call(
    operationId: string,
    hookId: string,
    event: HookEvent | ModifyingCall,
    signal: AbortSignal,
  ): Promise<HandlerResult> {
    const connection = this.#byOperation.get(operationId);
    if (connection === undefined) {
      return Promise.resolve({
        kind: 'error',
        code: 'handler_detached',
        message: 'no handler stream serves the operation',
      });
    }
    const callId = String(this.#nextCallId++);
    const value =
      event instanceof ModifyingCall
        ? {
            callId,
            hookId,
            operationId,
            point: event.point,
            contextJson: event.contextJson,
            plugin: event.plugin,
          }
        : { callId, hookId, operationId, event };
    const message = create(HandleResponseSchema, { message: { case: 'call', value } });
    return new Promise<HandlerResult>((resolve) => {
      const finish = (result: HandlerResult) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (this.#pending.delete(callId)) resolve(result);
      };
      // A call settled for any reason is taken back if the runtime has not
      // read it yet: given up on, or answered blindly (call ids are
      // guessable), it would otherwise stay queued while nothing awaits it.
      const settle = (result: HandlerResult) => {
        if (this.#pending.has(callId)) connection.withdraw?.(message);
        finish(result);
      };
      const timer = setTimeout(
        () =>
          settle({
            kind: 'error',
            code: 'handler_timeout',
            message: `the handler did not reply within ${this.#timeoutMs} ms`,
          }),
        this.#timeoutMs,
      );
      const onAbort = () =>
        settle({ kind: 'error', code: 'cancelled', message: 'the call was cancelled' });
      signal.addEventListener('abort', onAbort);
      this.#pending.set(callId, {
        connection,
        resolve: settle,
        answers:
          event instanceof ModifyingCall
            ? 'modified'
            : event.event.case === 'beforeToolCall'
              ? 'mock'
              : undefined,
      });
      connection.send(message);
      if (signal.aborted) onAbort();
    });
  }

  /** Delivers a reply from `connection`; a reply to an unknown call (late, or foreign) is ignored. */
  reply(connection: HandlerConnection, reply: HandlerReply): void {
    const pending = this.#pending.get(reply.callId);
    if (pending === undefined || pending.connection !== connection) {
      this.#logger.debug('handler reply to no pending call ignored', { callId: reply.callId });
      return;
    }
    const outcome = reply.outcome;
    if (
      (outcome.case === 'mock' || outcome.case === 'modified') &&
      outcome.case !== pending.answers
    ) {
      // A reply of the wrong kind is a broken handler, not a finished one.
      pending.resolve({
        kind: 'error',
        code: 'handler_error',
        message:
          outcome.case === 'mock'
            ? 'the handler replied with a mock, which only a beforeToolCall call takes'
            : 'the handler replied with a modified result, which only a modifying call takes',
      });
      return;
    }
    switch (outcome.case) {
      case 'done':
        pending.resolve({ kind: 'done' });
        return;
      case 'mock':
        if (outcome.value.result === undefined) {
          pending.resolve({
            kind: 'error',
            code: 'handler_error',
            message: 'the handler replied with a mock without its result',
          });
          return;
        }
        pending.resolve({ kind: 'mock', result: outcome.value.result, error: outcome.value.error });
        return;
      case 'error':
        pending.resolve({ kind: 'error', code: 'handler_error', message: outcome.value.message });
        return;
      case 'modified':
        pending.resolve({ kind: 'modified', resultJson: outcome.value.resultJson });
        return;
      default:
        pending.resolve({
          kind: 'error',
          code: 'handler_error',
          message: 'the handler reply had no outcome',
        });
    }
  }
}
