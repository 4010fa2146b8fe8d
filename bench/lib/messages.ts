/**
 * @module The messages every scenario and baseline sends: one
 * `DecideToolCall` request, one `DispatchStream` event, and the hooks the
 * scenarios register. The echo baselines send these very messages, so sizes
 * match by construction. Ids that change per call keep a fixed width, so
 * every message of a loop has the same size.
 */
import { create } from '@bufbuild/protobuf';
import { Executor, HookType } from '../../gen/agenthooks/v1/events_pb.js';
import {
  type Hook,
  HookSchema,
  ModifyPoint,
  OnError,
  ResponseHandling,
} from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  type CompleteOperationRequest,
  CompleteOperationRequestSchema,
  type DecideToolCallRequest,
  DecideToolCallRequestSchema,
  type DispatchRequest,
  DispatchRequestSchema,
  type DispatchStreamRequest,
  DispatchStreamRequestSchema,
} from '../../gen/agenthooks/v1/service_pb.js';

/** Digits of the per-call counter in tool call ids and event ids. */
export const ID_DIGITS = 8;

/** Formats a per-call counter with a fixed width. */
export function fixedId(prefix: string, n: number): string {
  return `${prefix}${String(n).padStart(ID_DIGITS, '0')}`;
}

/** Receiver path that answers `{"decision":"allow"}` (controls). */
export const ALLOW_PATH = '/allow';
/** Receiver path that answers 204 (notifications). */
export const NOTIFY_PATH = '/notify';
/** Receiver path that answers `{}` (a modifying hook that changes nothing). */
export const MODIFY_PATH = '/modify';

/**
 * Returns a `DecideToolCall` request for a tool call of `operationId`, with
 * the context fields a runtime sends. Its tool call id is set per call by
 * {@link withToolCallId}.
 */
export function decideRequest(operationId: string): DecideToolCallRequest {
  return create(DecideToolCallRequestSchema, {
    event: {
      context: {
        toolCallId: fixedId('call_', 0),
        assistantMessageId: 'msg_01HZX3K9Q7',
        identifier: 'fs',
        apiName: 'readFile',
        args: { path: '/workspace/src/index.ts', encoding: 'utf8', maxBytes: 65536 },
        callIndex: 0,
        stepIndex: 3,
        operationId,
        executor: Executor.SERVER,
        agentId: 'agent_research',
        userId: 'user_42',
        sessionId: 'sess_7f3a',
        threadId: 'thread_19c2',
        toolSource: 'builtin',
      },
    },
  });
}

/** Sets the tool call id of a request (fixed width), as each new tool call has its own. */
export function withToolCallId(request: DecideToolCallRequest, n: number): DecideToolCallRequest {
  const context = request.event?.context;
  if (context !== undefined) context.toolCallId = fixedId('call_', n);
  return request;
}

/** Returns the `CompleteOperation` request of a run of `operationId` that ended `done`. */
export function completeRequest(operationId: string): CompleteOperationRequest {
  return create(CompleteOperationRequestSchema, {
    event: {
      operationId,
      agentId: 'agent_research',
      userId: 'user_42',
      reason: 'done',
      status: 'done',
      lastAssistantContent: 'Summarised the build configuration in three bullet points.',
      steps: 7,
      totalTokens: 18_432,
      errorMessage: '',
    },
  });
}

/** Returns an `afterStep` event on `operationId`, the event of the dispatch scenarios. */
export function stepEvent(operationId: string): DispatchRequest {
  return create(DispatchRequestSchema, {
    event: {
      event: {
        case: 'afterStep',
        value: {
          operationId,
          agentId: 'agent_research',
          userId: 'user_42',
          stepIndex: 3,
          stepType: 'call_tool',
          content: 'Read 3 files and summarised the build configuration.',
          executionTimeMs: 812,
        },
      },
    },
  });
}

/** Returns a `DispatchStream` request carrying the event of {@link stepEvent}. */
export function streamRequest(operationId: string, n: number): DispatchStreamRequest {
  return create(DispatchStreamRequestSchema, {
    eventId: fixedId('evt_', n),
    event: stepEvent(operationId).event,
  });
}

/** A `transformContext` modifying hook on the receiver's {@link MODIFY_PATH}. */
export function modifyHook(id: string, receiverUrl: string): Hook {
  return create(HookSchema, {
    id,
    point: ModifyPoint.TRANSFORM_CONTEXT,
    webhook: { url: `${receiverUrl}${MODIFY_PATH}`, timeout: 10 },
  });
}

/** A `beforeToolCall` control webhook on the receiver that allows. */
export function controlHook(id: string, receiverUrl: string): Hook {
  return create(HookSchema, {
    id,
    type: HookType.BEFORE_TOOL_CALL,
    webhook: {
      url: `${receiverUrl}${ALLOW_PATH}`,
      responseHandling: ResponseHandling.TOOL_CALL,
      onError: OnError.BLOCK,
      timeout: 10,
    },
  });
}

/** A notification webhook of `type` on the receiver (answered 204). */
export function notificationHook(id: string, type: HookType, receiverUrl: string): Hook {
  return create(HookSchema, {
    id,
    type,
    webhook: { url: `${receiverUrl}${NOTIFY_PATH}`, timeout: 10 },
  });
}

/**
 * The five hooks of the five-hook scenario, in registration order: three
 * `beforeToolCall` controls and two `beforeToolCall` notifications
 * (DecideToolCall awaits the controls and starts the notifications).
 */
export function fiveHooks(receiverUrl: string): Hook[] {
  return [
    controlHook('policy-a', receiverUrl),
    notificationHook('audit-a', HookType.BEFORE_TOOL_CALL, receiverUrl),
    controlHook('policy-b', receiverUrl),
    notificationHook('audit-b', HookType.BEFORE_TOOL_CALL, receiverUrl),
    controlHook('policy-c', receiverUrl),
  ];
}

/**
 * The five hooks of each operation of the memory scenario: a control, and
 * notifications of four event types, as a typical runtime registers them.
 */
export function memoryHooks(receiverUrl: string): Hook[] {
  return [
    controlHook('policy', receiverUrl),
    notificationHook('audit-tool', HookType.BEFORE_TOOL_CALL, receiverUrl),
    notificationHook('step', HookType.AFTER_STEP, receiverUrl),
    notificationHook('done', HookType.ON_COMPLETE, receiverUrl),
    notificationHook('failed', HookType.ON_ERROR, receiverUrl),
  ];
}
