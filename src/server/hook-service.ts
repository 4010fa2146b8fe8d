/**
 * @module The `agenthooks.v1.HookService` implementation, served by both
 * transports. It validates requests, calls the hook engine and shapes the
 * answers; RPCs that are not built yet are absent, which both transports
 * answer with UNIMPLEMENTED.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { HookOutcome } from '../../gen/agenthooks/v1/decisions_pb.js';
import {
  type BeforeToolCallEvent,
  type HookEvent,
  HookEventSchema,
  HookType,
  OnCompleteEventSchema,
  OnErrorEventSchema,
} from '../../gen/agenthooks/v1/events_pb.js';
import type { HookService } from '../../gen/agenthooks/v1/service_pb.js';
import { InvalidArgumentError } from '../errors.js';
import { evaluateControls } from '../hooks/control.js';
import {
  type DispatchDeps,
  dispatchEvent,
  routeOf,
  startNotifications,
} from '../hooks/dispatch.js';
import { resolveChain, validateToolCallContext } from '../hooks/tool-call.js';
import { validateOperationId } from '../hooks/validate.js';

/** Terminal reason after which `onError` follows `onComplete`. */
export const ERROR_REASON = 'error';
/** Parked reason for which `CompleteOperation` dispatches nothing and keeps handlers (as upstream). */
export const ASYNC_TOOL_REASON = 'waiting_for_async_tool';

/** Creates the HookService implementation over the hook engine. */
export function createHookService(deps: DispatchDeps): Partial<ServiceImpl<typeof HookService>> {
  return {
    async registerHooks(request) {
      const hookCount = await deps.registry.register(
        request.operationId,
        request.parentOperationId,
        request.hooks,
      );
      return { hookCount };
    },

    async unregisterHooks(request) {
      const hooksPurged = await deps.registry.unregister(request.operationId, request.purge);
      return { hooksPurged, handlersDropped: 0 };
    },

    async listHooks(request) {
      validateOperationId(request.operationId);
      const { hooks, parentOperationId } = await deps.registry.hooksOf(request.operationId);
      return { hooks, parentOperationId, handlerAttached: false };
    },

    async dispatch(request, ctx: HandlerContext) {
      routeOf(request.event);
      const outcomes = await dispatchEvent(deps, request.event as HookEvent, ctx.signal);
      return { outcomes };
    },

    async decideToolCall(request, ctx: HandlerContext) {
      const event = request.event;
      validateToolCallContext(event?.context, 'event.context');
      const chain = resolveChain(request.operationChain, event.context);
      const { decision, outcomes } = await evaluateControls(
        deps,
        { type: HookType.BEFORE_TOOL_CALL, event: event as BeforeToolCallEvent },
        chain,
        ctx.signal,
      );
      if (decision.outcome.case === 'allow') {
        // Observers of an allowed call are started, not awaited (upstream dispatchBeforeToolCall).
        await startNotifications(
          deps,
          create(HookEventSchema, {
            event: { case: 'beforeToolCall', value: event as BeforeToolCallEvent },
          }),
        );
      }
      return { decision, outcomes };
    },

    async decideToolResult(request, ctx: HandlerContext) {
      const event = request.event;
      validateToolCallContext(event?.context, 'event.context');
      if (event?.result === undefined) {
        throw new InvalidArgumentError(
          'event.result',
          'TOOL_RESULT_REQUIRED',
          'the tool result is required',
        );
      }
      const chain = resolveChain(request.operationChain, event.context);
      const { decision, outcomes } = await evaluateControls(
        deps,
        { type: HookType.AFTER_TOOL_CALL, event },
        chain,
        ctx.signal,
      );
      return { decision, outcomes };
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
      if (onComplete.reason === ASYNC_TOOL_REASON) {
        return { outcomes: [], handlersDropped: false };
      }
      const outcomes: HookOutcome[] = await dispatchEvent(
        deps,
        { $typeName: HookEventSchema.typeName, event: { case: 'onComplete', value: onComplete } },
        ctx.signal,
      );
      if (onComplete.reason === ERROR_REASON) {
        // The four step and terminal events share field numbers, so the
        // onComplete fields encode as the onError event.
        const onError = fromBinary(OnErrorEventSchema, toBinary(OnCompleteEventSchema, onComplete));
        outcomes.push(
          ...(await dispatchEvent(
            deps,
            { $typeName: HookEventSchema.typeName, event: { case: 'onError', value: onError } },
            ctx.signal,
          )),
        );
      }
      return { outcomes, handlersDropped: true };
    },
  };
}
