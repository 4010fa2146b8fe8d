/**
 * @module The `agenthooks.v1.HookService` implementation, served by both
 * transports. It validates requests, calls the hook engine and shapes the
 * answers; RPCs that are not built yet are absent, which both transports
 * answer with UNIMPLEMENTED.
 */
import { setMaxListeners } from 'node:events';
import { create, fromBinary, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { DecisionKind } from '../../gen/agenthooks/v1/audit_pb.js';
import { DecisionSchema, type HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type BeforeToolCallEvent,
  type HookEvent,
  HookEventSchema,
  HookType,
  OnCompleteEventSchema,
  OnErrorEventSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import {
  type DispatchStreamRequest,
  type DispatchStreamResponse,
  DispatchStreamResponseSchema,
  type HandleRequest,
  type HandleResponse,
  HandleResponseSchema,
  type HookService,
} from '../../gen/agenthooks/v1/service_pb.js';
import type { AuditLog } from '../audit/audit-log.js';
import { newDecisionId, publicationDecisionId } from '../audit/decision-id.js';
import { listDecisions } from '../audit/list.js';
import {
  modifyRecord,
  type PayloadPolicy,
  type ToolDecision,
  toolDecisionRecord,
} from '../audit/records.js';
import { ByteBudget, DEFAULT_STREAM_MAX_IN_FLIGHT_BYTES, StreamBytes } from '../byte-budget.js';
import { AgentHooksError, InvalidArgumentError, shuttingDown } from '../errors.js';
import { extend } from '../extend.js';
import { evaluateControls } from '../hooks/control.js';
import {
  CriticalDeliveryError,
  dispatchEvent,
  type EventRoute,
  matchesNoHookNow,
  routeOf,
  runToolCallObservers,
} from '../hooks/dispatch.js';
import { EVENT_FIELD_REQUIRED, validateEventFields } from '../hooks/event-fields.js';
import type { HandlerConnection } from '../hooks/handlers.js';
import {
  DeferredPublisher,
  decisionChain,
  type ParkDeps,
  type PublisherOptions,
  parkToolCall,
} from '../hooks/parked.js';
import {
  checkChainLength,
  checkToolCallId,
  TOOL_RESULT_REQUIRED,
  validateToolCallContext,
} from '../hooks/tool-call.js';
import {
  checkIdentifier,
  checkIdentifierLength,
  MAX_EVENT_ID_BYTES,
  MAX_PLUGIN_NAME_BYTES,
  REASON,
  validateOperationId,
} from '../hooks/validate.js';
import { type ModifyDeps, type ModifySeen, runModifyingHooks } from '../modify/run.js';
import { INTERNAL_REASON, isServerSide, toConnectError, toStatus } from '../server/errors.js';
import { type TakesNow, takesNow } from '../server/request-stream.js';
import { plainAck } from '../server/response-codec.js';
import { largeWireBytes } from '../server/wire-bytes.js';
import type { DecisionStore } from '../store/store.js';
import { AsyncQueue } from './async-queue.js';

/** `onComplete` reason (terminal) after which `onError` follows `onComplete`. */
export const ON_COMPLETE_ERROR = 'error';
/**
 * `onComplete` reason (parked) for which `CompleteOperation` dispatches
 * nothing and keeps handlers (as upstream).
 */
export const ON_COMPLETE_ASYNC_TOOL = 'waiting_for_async_tool';
/** Prefix of the reasons of a parked (not terminal) operation, such as `waiting_for_human`. */
export const PARKED_REASON_PREFIX = 'waiting_for';
/** Reason of a `Dispatch` of `beforeToolCall`, which only `DecideToolCall` runs. */
export const USE_DECIDE_TOOL_CALL = 'USE_DECIDE_TOOL_CALL';
/** Default bound of events in flight on one `DispatchStream`. */
export const DEFAULT_STREAM_MAX_IN_FLIGHT = 64;

/** Messages a `Handle` stream queues for its runtime before it stops reading the runtime's. */
export const HANDLE_QUEUE_MAX = 256;

/** Listeners on a stream's signal beyond one per event in flight (the stream's own). */
const STREAM_SIGNAL_SPARE_LISTENERS = 8;

/** Operations a stream remembers before it forgets those whose events all settled. */
const STREAM_TAILS_SWEEP_AT = 1_024;

/** The last event of one operation on a stream: the next waits for `done`. */
interface StreamTail {
  done: Promise<void>;
  /** True once that event was acknowledged. */
  settled: boolean;
}

/** Options of the service beyond the engine. */
export interface HookServiceOptions {
  /** The decision audit log; decisions still get ids without it. */
  readonly audit?: AuditLog;
  /** Recorded payloads and their masks (`--audit-payloads`); none when undefined. */
  readonly auditPayloads?: PayloadPolicy;
  /** Events in flight per `DispatchStream` before it stops reading. */
  readonly streamMaxInFlight?: number;
  /** Bytes of large events every `DispatchStream` together holds ({@link ByteBudget}). */
  readonly streamMaxInFlightBytes?: number;
  /** The publication leases this process takes (`PublishDeferredResult`); default {@link DeferredPublisher}'s. */
  readonly publisher?: PublisherOptions;
  /**
   * Aborts when the sidecar starts draining: a `DispatchStream` stops reading,
   * acks the events it read and ends `UNAVAILABLE` (`SHUTTING_DOWN`). A
   * `Handle` stream stays: the calls still in flight may need its handlers.
   */
  readonly draining?: AbortSignal;
}

/**
 * Checks that an event may be dispatched: not `beforeToolCall` (DecideToolCall
 * runs it), and with the fields its kind requires.
 *
 * @throws InvalidArgumentError naming the first field that fails.
 */
function checkNotification(event: HookEvent | undefined, route: EventRoute, field: string): void {
  if (route.type === HookType.BEFORE_TOOL_CALL) {
    throw new InvalidArgumentError(
      `${field}.beforeToolCall`,
      USE_DECIDE_TOOL_CALL,
      'beforeToolCall is dispatched by DecideToolCall, which runs its controls, observers and mocks',
    );
  }
  validateEventFields(event, field);
}

/** Creates the HookService implementation over the hook engine. */
export function createHookService(
  deps: ParkDeps & Pick<ModifyDeps, 'operatorHooks'> & { readonly decisions?: DecisionStore },
  options: HookServiceOptions = {},
): Partial<ServiceImpl<typeof HookService>> {
  const maxInFlight = options.streamMaxInFlight ?? DEFAULT_STREAM_MAX_IN_FLIGHT;
  const streamBudget = new ByteBudget(
    options.streamMaxInFlightBytes ?? DEFAULT_STREAM_MAX_IN_FLIGHT_BYTES,
  );
  const publisher = new DeferredPublisher(options.publisher);
  const { audit, auditPayloads } = options;
  // ListDecisions answers from the store only while the store sink writes it.
  const decisionStore = audit?.keepsInStore === true ? deps.decisions : undefined;

  /**
   * Gives a tool decision its id, and records it when the audit log has a
   * sink or a subscriber (the record is only built then).
   */
  const recordTool = (d: Omit<ToolDecision, 'decisionId' | 'payloads'>): string => {
    const decisionId = newDecisionId(Date.now());
    if (audit?.enabled === true) {
      audit.record(toolDecisionRecord(extend(d, { decisionId, payloads: auditPayloads })));
    }
    return decisionId;
  };

  /**
   * Validates one notification event (its operation, then the fields its
   * kind requires) and dispatches it; nothing is delivered for an invalid one.
   */
  const dispatchOne = (event: HookEvent | undefined, signal: AbortSignal, field = 'event') => {
    checkNotification(event, routeOf(event, field), field);
    return dispatchEvent(deps, event as HookEvent, signal);
  };

  /**
   * The outcomes of an event that is valid and would run no hook, known
   * without waiting (the operation's hooks are cached), so a stream can ack
   * it at once; `undefined` when {@link dispatchOne} must answer.
   */
  const noOutcomesNow = (event: HookEvent, route: EventRoute): HookOutcome[] | undefined => {
    try {
      checkNotification(event, route, 'event');
      return matchesNoHookNow(deps, route) ? [] : undefined;
    } catch {
      return undefined; // dispatchOne answers the same error in the event's turn
    }
  };

  return {
    async registerHooks(request) {
      // As the spec's register(): refused while the environment hooks are invalid
      // (INVALID_ENVIRONMENT), so a runtime learns of it before its first decision.
      deps.environmentHooks();
      const hookCount = await deps.registry.register(
        request.operationId,
        request.parentOperationId,
        request.hooks,
      );
      return { hookCount };
    },

    async unregisterHooks(request) {
      validateOperationId(request.operationId);
      const plugin = request.plugin === '' ? undefined : request.plugin;
      if (plugin !== undefined) {
        checkIdentifier(
          plugin,
          'plugin',
          REASON.PLUGIN_NAME_TOO_LONG,
          MAX_PLUGIN_NAME_BYTES,
          'A plugin name',
        );
      }
      const dropped =
        plugin === undefined
          ? deps.handlers.dropOperation(request.operationId)
          : deps.handlers.dropPlugin(request.operationId, plugin);
      const handlersDropped = dropped ? 1 : 0;
      const hooksPurged = await deps.registry.unregister(
        request.operationId,
        request.purge,
        plugin,
      );
      return { hooksPurged, handlersDropped };
    },

    async listHooks(request) {
      validateOperationId(request.operationId);
      const { hooks, parentOperationId } = await deps.registry.storedHooksOf(request.operationId);
      return {
        hooks,
        parentOperationId,
        handlerAttached: deps.handlers.isAttached(request.operationId),
      };
    },

    async dispatch(request, ctx: HandlerContext) {
      return { outcomes: await dispatchOne(request.event, ctx.signal) };
    },

    dispatchStream(requests: AsyncIterable<DispatchStreamRequest>, ctx: HandlerContext) {
      // Each event in flight may wait on the stream's signal (a handler call, an
      // email lookup): up to the in-flight bound of listeners is expected, not a leak.
      setMaxListeners(maxInFlight + STREAM_SIGNAL_SPARE_LISTENERS, ctx.signal);
      let inFlight = 0;
      // The events this stream added to the in-flight gauge and has not taken back.
      let counted = 0;
      let freed: (() => void) | undefined;
      // Wakes the reader waiting for room, once: every ack taken while it
      // waits would otherwise resolve its promise again, and V8 reports each
      // such resolve to Node's rejection tracker.
      const free = () => {
        const wake = freed;
        freed = undefined;
        wake?.();
      };
      const bytes = new StreamBytes(streamBudget);
      const onAbort = () => {
        acks.close();
        // A reader waiting for room stops: the acks it waits on will not be taken.
        free();
      };
      // True once the acks ended: an event read after it is never acked, nor counted.
      let acksEnded = false;
      const acks = new AsyncQueue<DispatchStreamResponse>({
        // The transport may write acks as they are pushed (see `stream-sink.ts`).
        takesSink: true,
        // An event stays in flight until the transport takes its ack.
        onTake: () => {
          inFlight -= 1;
          counted -= 1;
          deps.metrics?.streamEvents(-1);
          free();
        },
        onEnd: () => {
          acksEnded = true;
          ctx.signal.removeEventListener('abort', onAbort);
          // Events whose acks were never taken leave the gauge with the stream.
          deps.metrics?.streamEvents(-counted);
          counted = 0;
        },
      });
      // Events of one operation run one after another; operations run in parallel.
      // An operation's entry stays after its last event settled and is swept
      // only once many are settled: a set and a delete per event would churn
      // the map's tables, which on Node 20 promotes what they held (see
      // `src/live-slots.ts`).
      const tails = new Map<string, StreamTail>();
      const ackOf = async (request: DispatchStreamRequest): Promise<DispatchStreamResponse> => {
        try {
          if (request.eventId === '') {
            throw new InvalidArgumentError('eventId', EVENT_FIELD_REQUIRED, 'eventId is required');
          }
          // U+0000 can be echoed in the ack: the event is refused, not the stream.
          checkIdentifier(
            request.eventId,
            'eventId',
            REASON.EVENT_ID_TOO_LONG,
            MAX_EVENT_ID_BYTES,
            'An event id',
          );
          return plainAck(request.eventId, await dispatchOne(request.event, ctx.signal));
        } catch (e: unknown) {
          const err = toConnectError(e);
          if (isServerSide(err.code)) {
            // The stream goes on, so the guard never sees this failure: log it here, once.
            deps.logger.error('dispatch stream event failed', { eventId: request.eventId, err: e });
          }
          return create(DispatchStreamResponseSchema, {
            eventId: request.eventId,
            outcomes: e instanceof CriticalDeliveryError ? e.outcomes : [],
            error: {
              code: err.code,
              reason: e instanceof AgentHooksError ? e.reason : INTERNAL_REASON,
              message: err.rawMessage,
              hookId: e instanceof AgentHooksError ? (e.metadata.hookId ?? '') : '',
              status: toStatus(err),
            },
          });
        }
      };
      // Draining: no event is read any more; those read are acked, then the stream ends.
      const { draining } = options;
      const drained = () => draining?.aborted === true;
      // One iterator, so that the drain can end a read that waits for the next request.
      const iterator = requests[Symbol.asyncIterator]();
      const onDrain = () => {
        void iterator.return?.();
        free();
      };
      draining?.addEventListener('abort', onDrain, { once: true });
      const reader = (async () => {
        try {
          await readAll();
          if (drained()) throw shuttingDown();
        } finally {
          draining?.removeEventListener('abort', onDrain);
          // Also when the requests fail: the acks of the events read before go first.
          await Promise.allSettled(Array.from(tails.values(), (t) => t.done));
        }
      })();
      async function readAll(): Promise<void> {
        const now = takesNow(iterator) ? iterator : undefined;
        let ended = false;
        try {
          for (;;) {
            const next = now !== undefined ? await readWhileAcked(now) : await iterator.next();
            ended = next.done === true;
            if (ended || !(await accept(next.value))) return;
          }
        } finally {
          // Stopped before the requests ended (or failed): the transport stops reading them.
          if (!ended) void iterator.return?.();
        }
      }
      /**
       * Reads requests in the turns they arrive in, acking each at once while
       * one can be ({@link ackedNow}); resolves with the first that cannot,
       * or the end of the requests.
       */
      function readWhileAcked(
        stream: TakesNow<DispatchStreamRequest>,
      ): Promise<IteratorResult<DispatchStreamRequest>> {
        return new Promise((resolve, reject) => {
          const read = (): void => {
            try {
              for (;;) {
                const next = stream.take(read);
                // Nothing yet: `read` runs again when a request arrives.
                if (next === undefined) return;
                if (next.done === true || !ackedNow(next.value)) {
                  resolve(next);
                  return;
                }
              }
            } catch (e: unknown) {
              reject(e);
            }
          };
          read();
        });
      }
      /** The checks every event passes as it is read; throws what ends the stream. */
      function checkRead(request: DispatchStreamRequest): void {
        // An id too long to echo in every ack ends the stream, as a malformed request does.
        checkIdentifierLength(
          request.eventId,
          'eventId',
          REASON.EVENT_ID_TOO_LONG,
          MAX_EVENT_ID_BYTES,
          'An event id',
        );
      }
      /** Counts an event in flight, from its read until the transport takes its ack. */
      function countIn(): void {
        inFlight += 1;
        if (acksEnded) return;
        counted += 1;
        deps.metrics?.streamEvents(1);
      }
      /** The event's route, or `undefined` for one acked with its error (in its turn). */
      function routeOfRead(request: DispatchStreamRequest): EventRoute | undefined {
        if (request.eventId === '' || request.eventId.includes('\0')) return undefined;
        try {
          return routeOf(request.event);
        } catch {
          return undefined;
        }
      }
      /**
       * Acks an event now, when nothing makes it wait: room in flight, nothing of
       * its operation pending, and no hook it matches. False leaves it to
       * {@link accept}, untouched.
       */
      function ackedNow(request: DispatchStreamRequest): boolean {
        if (drained() || ctx.signal.aborted || inFlight >= maxInFlight) return false;
        checkRead(request);
        const route = routeOfRead(request);
        const outcomes = route === undefined ? undefined : outcomesAtOnce(request, route);
        if (outcomes === undefined) return false;
        countIn();
        acks.push(plainAck(request.eventId, outcomes));
        return true;
      }
      /**
       * The outcomes (none) of an event that can be acked at once: nothing of its
       * operation pending and no hook it matches; `undefined` when it takes its turn.
       */
      function outcomesAtOnce(
        request: DispatchStreamRequest,
        route: EventRoute,
      ): HookOutcome[] | undefined {
        const last = tails.get(route.operationId);
        if (last !== undefined && !last.settled) return undefined;
        return noOutcomesNow(request.event as HookEvent, route);
      }
      /** Takes one event read: acked at once, or in its operation's turn. False once reading stops. */
      async function accept(request: DispatchStreamRequest): Promise<boolean> {
        if (drained()) return false;
        checkRead(request);
        // At the bound, stop reading: gRPC flow control then pushes back on the producer.
        while (inFlight >= maxInFlight && !ctx.signal.aborted && !drained()) {
          await new Promise<void>((resolve) => {
            freed = resolve;
          });
        }
        if (ctx.signal.aborted || drained()) return false;
        countIn();
        const route = routeOfRead(request);
        // Without a turn through the promise chain when nothing makes it wait.
        const outcomes = route === undefined ? undefined : outcomesAtOnce(request, route);
        if (outcomes !== undefined) {
          acks.push(plainAck(request.eventId, outcomes));
          return true;
        }
        // Invalid events are acknowledged with their error, in arrival order.
        const key = route?.operationId ?? '';
        const last = tails.get(key);
        // A large event waits for room in the byte budget; what the stream
        // holds is given back once the event is delivered (its ack is small).
        const size = largeWireBytes(request);
        if (size > 0) {
          if (!(await bytes.take(size, ctx.signal))) return false;
          deps.metrics?.streamBytes(size);
        }
        const previous = last?.done ?? Promise.resolve();
        const tail: StreamTail = { done: previous, settled: false };
        tail.done = previous.then(async () => {
          let ack: DispatchStreamResponse;
          try {
            ack = await ackOf(request);
          } finally {
            if (size > 0) {
              bytes.release(size);
              deps.metrics?.streamBytes(-size);
            }
          }
          acks.push(ack);
          tail.settled = true;
        });
        tails.set(key, tail);
        if (tails.size > STREAM_TAILS_SWEEP_AT) {
          for (const [id, t] of tails) if (t.settled) tails.delete(id);
        }
        return true;
      }
      ctx.signal.addEventListener('abort', onAbort);
      // A request the transport could not decode fails the stream (after the acks before it).
      reader.then(
        () => acks.close(),
        (e: unknown) => acks.fail(e),
      );
      return acks;
    },

    async modify(request, ctx: HandlerContext) {
      const startedAt = performance.now();
      const seen: ModifySeen = {};
      const answer = await runModifyingHooks(deps, request, ctx.signal, seen);
      const decisionId = newDecisionId(Date.now());
      if (audit?.enabled === true) {
        audit.record(
          modifyRecord({
            decisionId,
            startedAt,
            payloads: auditPayloads,
            operationId: request.operationId,
            point: request.point,
            toolName: seen.toolName,
            answer,
            contextJson: request.contextJson,
          }),
        );
      }
      return extend(answer, { decisionId });
    },

    async listDecisions(request) {
      return listDecisions(decisionStore, request);
    },

    async decideToolCall(request, ctx: HandlerContext) {
      const startedAt = performance.now();
      const event = request.event;
      validateToolCallContext(event?.context, 'event.context');
      const chain = await decisionChain(deps, request.operationChain, event.context);
      const { decision, outcomes, unknownOperations } = await evaluateControls(
        deps,
        { type: HookType.BEFORE_TOOL_CALL, event: event as BeforeToolCallEvent },
        chain,
        ctx.signal,
      );
      const kind = DecisionKind.TOOL_CALL;
      const context = event.context;
      if (decision.outcome.case !== 'allow') {
        deps.metrics?.decision('beforeToolCall', decision.outcome.case ?? 'none');
        const decisionId = recordTool({ kind, startedAt, context, chain, decision, outcomes });
        return { decision, outcomes, unknownOperations, decisionId };
      }
      const observed = await runToolCallObservers(
        deps,
        create(HookEventSchema, {
          event: { case: 'beforeToolCall', value: event as BeforeToolCallEvent },
        }),
        ctx.signal,
      );
      outcomes.push(...observed.outcomes);
      if (observed.mock !== undefined) {
        deps.metrics?.decision('beforeToolCall', 'mock');
        const mocked = create(DecisionSchema, {
          outcome: { case: 'mock', value: observed.mock },
        });
        const decisionId = recordTool({
          kind,
          startedAt,
          context,
          chain,
          decision: mocked,
          outcomes,
        });
        return { decision: mocked, outcomes, unknownOperations, decisionId };
      }
      deps.metrics?.decision('beforeToolCall', 'allow');
      const decisionId = recordTool({ kind, startedAt, context, chain, decision, outcomes });
      return { decision, outcomes, unknownOperations, decisionId };
    },

    async decideToolResult(request, ctx: HandlerContext) {
      const startedAt = performance.now();
      const event = request.event;
      validateToolCallContext(event?.context, 'event.context');
      if (event?.result === undefined) {
        throw new InvalidArgumentError(
          'event.result',
          TOOL_RESULT_REQUIRED,
          'the tool result is required',
        );
      }
      const chain = await decisionChain(deps, request.operationChain, event.context);
      const evaluation = await evaluateControls(
        deps,
        { type: HookType.AFTER_TOOL_CALL, event },
        chain,
        ctx.signal,
      );
      deps.metrics?.decision('afterToolCall', evaluation.decision.outcome.case ?? 'none');
      const decisionId = recordTool({
        kind: DecisionKind.TOOL_RESULT,
        startedAt,
        context: event.context,
        chain,
        decision: evaluation.decision,
        outcomes: evaluation.outcomes,
        result: event.result,
      });
      return extend(evaluation, { decisionId });
    },

    async parkToolCall(request) {
      const { record, created } = await parkToolCall(
        deps,
        request.context,
        request.operationChain,
        request.kind,
      );
      return {
        created,
        record: {
          context: record.context,
          operationChain: [...record.chain],
          kind: record.kind,
          parkedAt: timestampFromMs(record.parkedAt),
          finalResult: record.finalResult,
        },
      };
    },

    async publishDeferredResult(request, ctx: HandlerContext) {
      if (request.toolCallId === '') {
        throw new InvalidArgumentError(
          'toolCallId',
          'TOOL_CALL_ID_REQUIRED',
          'toolCallId is required',
        );
      }
      checkToolCallId(request.toolCallId, 'toolCallId');
      if (request.result === undefined) {
        throw new InvalidArgumentError(
          'result',
          TOOL_RESULT_REQUIRED,
          'the tool result is required',
        );
      }
      checkChainLength(request.operationChain);
      request.operationChain.forEach((id, i) => {
        validateOperationId(id, `operationChain[${i}]`);
      });
      const startedAt = performance.now();
      const { finalResult, published, publishedAt, evaluation } = await publisher.publish(
        deps,
        request.toolCallId,
        request.result,
        request.operationChain,
        ctx.signal,
      );
      // Derived from what the store keeps, so a duplicate answers the first one's id.
      const decisionId = publicationDecisionId(request.toolCallId, publishedAt);
      if (evaluation !== undefined && audit?.enabled === true) {
        audit.record(
          toolDecisionRecord({
            decisionId,
            kind: DecisionKind.PUBLICATION,
            startedAt,
            context: evaluation.context,
            chain: evaluation.chain,
            decision: evaluation.decision,
            outcomes: evaluation.outcomes,
            result: request.result,
            payloads: auditPayloads,
          }),
        );
      }
      return { finalResult, published, decisionId };
    },

    async completeOperation(request, ctx: HandlerContext) {
      const onComplete = request.event;
      if (onComplete === undefined) {
        throw new InvalidArgumentError(
          'event',
          'EVENT_REQUIRED',
          'an onComplete event is required',
        );
      }
      validateOperationId(onComplete.operationId, 'event.operationId');
      // Every completion starts the retention clock, a park's too
      // (waiting_for_human, waiting_for_async_tool): the operation does not
      // expire while a call parked on it waits (retention skips it), and once
      // its calls are published no later request would ever end it.
      await deps.parks.markOperationCompleted(onComplete.operationId, deps.now());
      if (onComplete.reason === ON_COMPLETE_ASYNC_TOOL) {
        return { outcomes: [], handlersDropped: false };
      }
      try {
        // A critical failure of onComplete does not skip onError: the error
        // notification still goes out, then the first critical failure is
        // raised with the outcomes of both dispatches.
        let critical: CriticalDeliveryError | undefined;
        const run = async (event: HookEvent): Promise<HookOutcome[]> => {
          try {
            return await dispatchEvent(deps, event, ctx.signal);
          } catch (e: unknown) {
            if (!(e instanceof CriticalDeliveryError)) throw e;
            critical ??= e;
            return e.outcomes;
          }
        };
        const outcomes = await run(
          create(HookEventSchema, { event: { case: 'onComplete', value: onComplete } }),
        );
        if (onComplete.reason === ON_COMPLETE_ERROR) {
          // The four step and terminal events share field numbers, so the
          // onComplete fields encode as the onError event.
          const onError = fromBinary(
            OnErrorEventSchema,
            toBinary(OnCompleteEventSchema, onComplete),
          );
          outcomes.push(
            ...(await run(create(HookEventSchema, { event: { case: 'onError', value: onError } }))),
          );
        }
        if (critical !== undefined) {
          throw new CriticalDeliveryError(critical.metadata.hookId ?? '', outcomes);
        }
        return { outcomes, handlersDropped: true };
      } finally {
        // Handlers go with the terminal (or human-approval) state, as upstream's unregister in finally.
        deps.handlers.dropOperation(onComplete.operationId);
        // A finished operation's hooks are rarely read again (a late publication
        // reads them from the store): the cache keeps the operations in progress.
        if (!onComplete.reason.startsWith(PARKED_REASON_PREFIX)) {
          deps.registry.forget([onComplete.operationId]);
        }
      }
    },

    handle(requests: AsyncIterable<HandleRequest>, ctx: HandlerContext) {
      // The answers to the runtime's own messages (`attached`, and `replaced`
      // when another stream attaches) queued and not yet read. Calls are not
      // counted: each is taken back once it is answered, timed out or cancelled.
      let echoes = 0;
      let ended = false;
      let room: (() => void) | undefined;
      const wake = () => {
        const resolve = room;
        room = undefined;
        resolve?.();
      };
      const onAbort = () => {
        out.close();
        wake();
      };
      const out = new AsyncQueue<HandleResponse>({
        onTake: (message) => {
          if (message.message.case === 'call') return;
          echoes -= 1;
          if (echoes < HANDLE_QUEUE_MAX) wake();
        },
        onEnd: () => {
          ctx.signal.removeEventListener('abort', onAbort);
          deps.handlers.disconnect(connection);
          deps.metrics?.handlerStreams(-1);
          ended = true;
          wake();
        },
      });
      const push = (message: HandleResponse) => {
        if (message.message.case !== 'call') echoes += 1;
        out.push(message);
      };
      const connection: HandlerConnection = {
        send: push,
        withdraw: (message) => {
          out.remove(message);
        },
      };
      const send = (message: MessageInitShape<typeof HandleResponseSchema>) =>
        push(create(HandleResponseSchema, message));
      ctx.signal.addEventListener('abort', onAbort);
      deps.metrics?.handlerStreams(1);
      const reader = (async () => {
        for await (const request of requests) {
          const m = request.message;
          switch (m.case) {
            case 'attach': {
              // A runtime that stops reading stops being read: gRPC flow control
              // then pushes back on it, instead of the `attached` echo of each
              // attach queuing on the sidecar without bound. Only an attach
              // waits, and only on the echoes: a reply or a detach adds nothing
              // to the queue, and a runtime that sends a reply before it reads
              // the next call must be read while its calls queue up.
              while (echoes >= HANDLE_QUEUE_MAX && !ended && !ctx.signal.aborted) {
                await new Promise<void>((resolve) => {
                  room = resolve;
                });
              }
              m.value.operationIds.forEach((id, i) => {
                validateOperationId(id, `attach.operationIds[${i}]`);
              });
              if (m.value.operationIds.length === 0) {
                throw new InvalidArgumentError(
                  'attach.operationIds',
                  'OPERATION_ID_REQUIRED',
                  'attach needs at least one operation id',
                );
              }
              // A stream that ended (its responses closed, the client gone) serves
              // nothing: attaching it would route calls to no one until they time out.
              if (ended || ctx.signal.aborted) return;
              deps.handlers.attach(connection, m.value.operationIds);
              send({
                message: { case: 'attached', value: { operationIds: m.value.operationIds } },
              });
              break;
            }
            case 'detach':
              // The rule of attach: every id a request names is one an operation may have.
              m.value.operationIds.forEach((id, i) => {
                validateOperationId(id, `detach.operationIds[${i}]`);
              });
              if (m.value.operationIds.length === 0) {
                throw new InvalidArgumentError(
                  'detach.operationIds',
                  'OPERATION_ID_REQUIRED',
                  'detach needs at least one operation id',
                );
              }
              deps.handlers.detach(connection, m.value.operationIds);
              break;
            case 'reply':
              deps.handlers.reply(connection, m.value);
              break;
            default:
              throw new InvalidArgumentError(
                'message',
                'HANDLE_MESSAGE_REQUIRED',
                'a Handle message needs attach, detach or reply',
              );
          }
        }
      })();
      reader.then(
        () => out.close(),
        (e: unknown) => out.fail(e),
      );
      return out;
    },
  };
}
